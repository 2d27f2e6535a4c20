// GraphCache's capture policy (worker/cuda_backend/graph_cache.h): a key runs eagerly once, is
// captured and replayed on its next use, replays without enqueueing after that; a key whose capture
// fails stays eager. The enqueued work is a memset whose bytes are checked after each run.
#include "worker/cuda_backend/graph_cache.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "worker/cuda_backend/device_buffer.h"
#include "worker/cuda_backend/device_stream.h"

namespace pkv::cuda_backend {
namespace {

constexpr int64_t kBytes = 4096;

class GraphCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<DeviceStream> s = DeviceStream::Create(0);
    ASSERT_TRUE(s.ok()) << s.status();
    stream_ = *std::move(s);
    absl::StatusOr<DeviceBuffer> b = DeviceBuffer::AllocateZeroed(kBytes, stream_.get());
    ASSERT_TRUE(b.ok()) << b.status();
    buffer_ = *std::move(b);
  }

  // Counts its calls, eager and under capture; refuses capture when fail_capture_ is set.
  absl::Status Enqueue(int value) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream_.get(), &capture) != cudaSuccess) {
      return absl::InternalError("cudaStreamIsCapturing");
    }
    const bool capturing = capture == cudaStreamCaptureStatusActive;
    (capturing ? captured_calls_ : eager_calls_)++;
    if (capturing && fail_capture_) return absl::InternalError("not capturable");
    if (cudaMemsetAsync(buffer_.get(), value, kBytes, stream_.get()) != cudaSuccess) {
      return absl::InternalError("cudaMemsetAsync");
    }
    return absl::OkStatus();
  }

  // Every byte of the buffer after the stream drains.
  std::vector<uint8_t> Bytes() {
    std::vector<uint8_t> out(kBytes, 0xEE);
    EXPECT_EQ(
        cudaMemcpyAsync(out.data(), buffer_.get(), kBytes, cudaMemcpyDeviceToHost, stream_.get()),
        cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(stream_.get()), cudaSuccess);
    return out;
  }

  // Poisons the buffer, so a run that wrote nothing is seen.
  void Poison() {
    ASSERT_EQ(cudaMemsetAsync(buffer_.get(), 0x5A, kBytes, stream_.get()), cudaSuccess);
  }

  DeviceStream stream_;
  DeviceBuffer buffer_;
  int eager_calls_ = 0;
  int captured_calls_ = 0;
  bool fail_capture_ = false;
};

TEST_F(GraphCacheTest, EagerOnceThenCaptureThenReplay) {
  GraphCache graphs;
  auto enqueue = [&] { return Enqueue(7); };
  for (int run = 0; run < 4; ++run) {
    Poison();
    absl::StatusOr<bool> replayed =
        graphs.Run(/*bucket=*/8, /*signature=*/42, stream_.get(), enqueue);
    ASSERT_TRUE(replayed.ok()) << replayed.status();
    EXPECT_EQ(*replayed, run > 0) << "run " << run;
    EXPECT_EQ(Bytes(), std::vector<uint8_t>(kBytes, 7)) << "run " << run;
  }
  EXPECT_EQ(eager_calls_, 1);     // the warm-up
  EXPECT_EQ(captured_calls_, 1);  // one capture, then replays only
  EXPECT_EQ(graphs.size(), 1);
  EXPECT_NE(graphs.Find(GraphCache::Key(8, 42)), nullptr);
  EXPECT_EQ(graphs.Find(GraphCache::Key(8, 43)), nullptr);  // another signature: its own key
}

TEST_F(GraphCacheTest, FailedCaptureStaysEager) {
  GraphCache graphs;
  fail_capture_ = true;
  auto enqueue = [&] { return Enqueue(3); };
  for (int run = 0; run < 3; ++run) {
    Poison();
    absl::StatusOr<bool> replayed =
        graphs.Run(/*bucket=*/2, /*signature=*/1, stream_.get(), enqueue);
    ASSERT_TRUE(replayed.ok()) << replayed.status();
    EXPECT_FALSE(*replayed) << "run " << run;
    EXPECT_EQ(Bytes(), std::vector<uint8_t>(kBytes, 3)) << "run " << run;
  }
  EXPECT_EQ(captured_calls_, 1);  // tried once, never again
  EXPECT_EQ(eager_calls_, 3);
  EXPECT_EQ(graphs.size(), 0);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // the failed capture left no error behind
}

}  // namespace
}  // namespace pkv::cuda_backend
