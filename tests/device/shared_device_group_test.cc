// SharedDeviceGroup (worker/parallel/shared_device_group.h): ranks sharing one GPU, each on its
// own stream. All-reduce equals the host's rank-order float32 sum rounded once (exactly, for
// float32, fp16 and bf16), all-gather is exact, every rank ends with the same bits, collectives
// are ordered with the work before and after them on the rank's stream, and Abort wakes a rank
// stranded in a collective.
#include "worker/parallel/shared_device_group.h"

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/common/float16.h"
#include "worker/parallel/rank_threads.h"

namespace pkv {
namespace {

struct Streams {
  explicit Streams(int n) : s(n) {
    for (cudaStream_t& x : s) cudaStreamCreateWithFlags(&x, cudaStreamNonBlocking);
  }
  ~Streams() {
    for (cudaStream_t x : s) cudaStreamDestroy(x);
  }
  std::vector<cudaStream_t> s;
};

struct DevBuf {
  explicit DevBuf(size_t bytes) { cudaMalloc(&p, bytes); }
  ~DevBuf() { cudaFree(p); }
  void* p = nullptr;
};

// Host values of `type` stored as raw bits, and their float32 values.
uint32_t Encode(CollectiveDType type, float v) {
  if (type == CollectiveDType::kBFloat16) return ToBFloat16(v).bits;
  if (type == CollectiveDType::kFloat16) return ToHalf(v).bits;
  uint32_t b;
  std::memcpy(&b, &v, 4);
  return b;
}
float Decode(CollectiveDType type, uint32_t b) {
  if (type == CollectiveDType::kBFloat16) return ToFloat(BFloat16{static_cast<uint16_t>(b)});
  if (type == CollectiveDType::kFloat16) return ToFloat(Half{static_cast<uint16_t>(b)});
  float v;
  std::memcpy(&v, &b, 4);
  return v;
}
size_t ElemBytes(CollectiveDType type) { return type == CollectiveDType::kFloat32 ? 4 : 2; }

std::vector<uint8_t> Pack(CollectiveDType type, const std::vector<uint32_t>& bits) {
  std::vector<uint8_t> out(bits.size() * ElemBytes(type));
  for (size_t i = 0; i < bits.size(); ++i)
    std::memcpy(&out[i * ElemBytes(type)], &bits[i], ElemBytes(type));
  return out;
}

class SharedDeviceGroupTest : public ::testing::TestWithParam<int> {};

TEST_P(SharedDeviceGroupTest, AllReduceIsTheRankOrderSumOnEveryRank) {
  const int n = GetParam();
  std::mt19937 rng(1000 + n);
  std::uniform_real_distribution<float> dist(-3.f, 3.f);
  for (CollectiveDType type :
       {CollectiveDType::kFloat32, CollectiveDType::kFloat16, CollectiveDType::kBFloat16}) {
    const int64_t count = 1 + static_cast<int64_t>(rng() % 5000);  // uneven slices
    Streams streams(n);
    auto group = SharedDeviceGroup::Create(0, streams.s);
    ASSERT_TRUE(group.ok()) << group.status();
    std::vector<std::vector<uint32_t>> in(n, std::vector<uint32_t>(count));
    std::vector<std::unique_ptr<DevBuf>> bufs;
    for (int r = 0; r < n; ++r) {
      for (uint32_t& b : in[r]) b = Encode(type, dist(rng));
      bufs.push_back(std::make_unique<DevBuf>(count * ElemBytes(type)));
      const std::vector<uint8_t> bytes = Pack(type, in[r]);
      ASSERT_EQ(cudaMemcpy(bufs[r]->p, bytes.data(), bytes.size(), cudaMemcpyHostToDevice),
                cudaSuccess);
    }
    RankThreads threads(n);
    // Each rank overwrites its buffer with 2 * d_r on its stream just before the collective (which
    // must see the new values: ordering on the stream), then reduces: result = sum of 2 * d_r.
    ASSERT_TRUE(threads
                    .Run([&](int r) -> absl::Status {
                      cudaSetDevice(0);
                      DeviceCommunicator* c = (*group)->rank(r);
                      const int64_t bytes = count * ElemBytes(type);
                      std::vector<uint8_t> doubled = Pack(type, in[r]);
                      for (int64_t i = 0; i < count; ++i) {
                        const uint32_t b = Encode(type, 2 * Decode(type, in[r][i]));
                        std::memcpy(&doubled[i * ElemBytes(type)], &b, ElemBytes(type));
                      }
                      cudaMemcpyAsync(bufs[r]->p, doubled.data(), bytes, cudaMemcpyHostToDevice,
                                      c->stream());
                      absl::Status st = c->AllReduceSum(bufs[r]->p, count, type);
                      if (!st.ok()) return st;
                      return c->Barrier();  // synchronises the stream
                    })
                    .ok());
    for (int r = 0; r < n; ++r) {
      std::vector<uint8_t> got(count * ElemBytes(type));
      ASSERT_EQ(cudaMemcpy(got.data(), bufs[r]->p, got.size(), cudaMemcpyDeviceToHost),
                cudaSuccess);
      for (int64_t i = 0; i < count; ++i) {
        float sum = Decode(type, Encode(type, 2 * Decode(type, in[0][i])));
        for (int q = 1; q < n; ++q) sum += Decode(type, Encode(type, 2 * Decode(type, in[q][i])));
        uint32_t bits = 0;
        std::memcpy(&bits, &got[i * ElemBytes(type)], ElemBytes(type));
        ASSERT_EQ(bits, Encode(type, sum)) << "rank " << r << " element " << i << " of " << count;
      }
    }
  }
}

TEST_P(SharedDeviceGroupTest, AllGatherConcatenatesInRankOrder) {
  const int n = GetParam();
  const int64_t count = 777;
  Streams streams(n);
  auto group = SharedDeviceGroup::Create(0, streams.s);
  ASSERT_TRUE(group.ok());
  std::mt19937 rng(7);
  std::vector<std::vector<float>> send(n, std::vector<float>(count));
  std::vector<std::unique_ptr<DevBuf>> sbuf, rbuf;
  for (int r = 0; r < n; ++r) {
    for (float& v : send[r]) v = static_cast<float>(rng() % 100000) - 50000.f;
    sbuf.push_back(std::make_unique<DevBuf>(count * 4));
    rbuf.push_back(std::make_unique<DevBuf>(n * count * 4));
    cudaMemcpy(sbuf[r]->p, send[r].data(), count * 4, cudaMemcpyHostToDevice);
    cudaMemset(rbuf[r]->p, 0xFF, n * count * 4);  // poisoned
  }
  RankThreads threads(n);
  ASSERT_TRUE(threads
                  .Run([&](int r) -> absl::Status {
                    cudaSetDevice(0);
                    DeviceCommunicator* c = (*group)->rank(r);
                    absl::Status st = c->AllGather(static_cast<const float*>(sbuf[r]->p), count,
                                                   static_cast<float*>(rbuf[r]->p));
                    return st.ok() ? c->Barrier() : st;
                  })
                  .ok());
  for (int r = 0; r < n; ++r) {
    std::vector<float> got(n * count);
    cudaMemcpy(got.data(), rbuf[r]->p, got.size() * 4, cudaMemcpyDeviceToHost);
    for (int q = 0; q < n; ++q) {
      for (int64_t i = 0; i < count; ++i) ASSERT_EQ(got[q * count + i], send[q][i]);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, SharedDeviceGroupTest, ::testing::Values(1, 2, 3, 4));

TEST(SharedDeviceGroup, AbortWakesARankStrandedInACollective) {
  Streams streams(2);
  auto group = SharedDeviceGroup::Create(0, streams.s);
  ASSERT_TRUE(group.ok());
  DevBuf buf(64 * 4);
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    (*group)->Abort("test abort");
  });
  // Rank 1 never enters: rank 0 must come back ABORTED instead of waiting forever.
  const absl::Status st = (*group)->rank(0)->AllReduceSum(buf.p, 64, CollectiveDType::kFloat32);
  aborter.join();
  EXPECT_EQ(st.code(), absl::StatusCode::kAborted) << st;
  EXPECT_EQ((*group)->rank(1)->AllReduceSum(buf.p, 64, CollectiveDType::kFloat32).code(),
            absl::StatusCode::kAborted);
  EXPECT_FALSE((*group)->rank(0)->capturable());
}

TEST(SharedDeviceGroup, RefusesEmptyAndOversizedGroups) {
  EXPECT_EQ(SharedDeviceGroup::Create(0, {}).status().code(), absl::StatusCode::kInvalidArgument);
  Streams streams(SharedDeviceGroup::kMaxRanks + 1);
  EXPECT_EQ(SharedDeviceGroup::Create(0, streams.s).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pkv
