// NcclCommunicator on the GPUs of this machine (label device): all-reduce equals the host sum,
// all-gather is a rank-major concatenation, in float32 and bf16, for every group size the machine
// allows (1, 2, 4, ...); NVLink multicast is forced off; the expected transport is reported.
// Needs at least one GPU; group sizes above the GPU count are skipped.
#include "worker/parallel/nccl_communicator.h"

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "worker/parallel/p2p_probe.h"
#include "worker/parallel/rank_threads.h"

namespace pkv {
namespace {

int GpuCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}

struct Group {
  std::vector<int> devices;
  std::vector<cudaStream_t> streams;
  std::vector<std::unique_ptr<NcclCommunicator>> comms;
  ~Group() {
    comms.clear();
    for (size_t r = 0; r < streams.size(); ++r) {
      cudaSetDevice(devices[r]);
      cudaStreamDestroy(streams[r]);
    }
  }
};

std::unique_ptr<Group> MakeGroup(int n) {
  auto g = std::make_unique<Group>();
  for (int r = 0; r < n; ++r) {
    g->devices.push_back(r);
    cudaSetDevice(r);
    cudaStream_t s;
    EXPECT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    g->streams.push_back(s);
  }
  auto comms = NcclCommunicator::CreateGroup(g->devices, g->streams);
  EXPECT_TRUE(comms.ok()) << comms.status();
  if (!comms.ok()) return nullptr;
  g->comms = std::move(*comms);
  return g;
}

class NcclCommunicatorTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    if (GpuCount() < GetParam()) GTEST_SKIP() << "needs " << GetParam() << " GPUs";
  }
};

TEST_P(NcclCommunicatorTest, AllReduceFloatEqualsHostSum) {
  const int n = GetParam();
  auto g = MakeGroup(n);
  ASSERT_NE(g, nullptr);
  EXPECT_STREQ(std::getenv("NCCL_NVLS_ENABLE"), "0");
  constexpr int64_t kCount = 4096 * 3 + 7;
  std::mt19937 rng(n);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::vector<float>> host(n, std::vector<float>(kCount));
  std::vector<double> want(kCount, 0.0);
  for (int r = 0; r < n; ++r) {
    for (int64_t i = 0; i < kCount; ++i) want[i] += host[r][i] = normal(rng);
  }
  std::vector<float*> dev(n);
  std::vector<std::vector<float>> got(n, std::vector<float>(kCount, NAN));
  RankThreads threads(n);
  ASSERT_TRUE(threads
                  .Run([&](int r) -> absl::Status {
                    cudaSetDevice(g->devices[r]);
                    if (cudaMalloc(&dev[r], kCount * 4) != cudaSuccess) {
                      return absl::InternalError("cudaMalloc");
                    }
                    cudaMemcpy(dev[r], host[r].data(), kCount * 4, cudaMemcpyHostToDevice);
                    absl::Status s = g->comms[r]->AllReduceSum(dev[r], kCount);
                    if (!s.ok()) return s;
                    cudaMemcpyAsync(got[r].data(), dev[r], kCount * 4, cudaMemcpyDeviceToHost,
                                    g->streams[r]);
                    cudaStreamSynchronize(g->streams[r]);
                    cudaFree(dev[r]);
                    return g->comms[r]->CheckAsyncError();
                  })
                  .ok());
  for (int r = 0; r < n; ++r) {
    for (int64_t i = 0; i < kCount; ++i) {
      ASSERT_NEAR(got[r][i], want[i], 1e-5 * n + 1e-5 * std::abs(want[i])) << r << " " << i;
    }
  }
}

TEST_P(NcclCommunicatorTest, AllReduceBf16AndAllGatherAndBarrier) {
  const int n = GetParam();
  auto g = MakeGroup(n);
  ASSERT_NE(g, nullptr);
  constexpr int64_t kCount = 1000;
  std::vector<std::vector<float>> gathered(n, std::vector<float>(n * kCount, NAN));
  std::vector<std::vector<__nv_bfloat16>> bf(n, std::vector<__nv_bfloat16>(kCount));
  RankThreads threads(n);
  ASSERT_TRUE(threads
                  .Run([&](int r) -> absl::Status {
                    cudaSetDevice(g->devices[r]);
                    std::vector<float> send(kCount);
                    std::vector<__nv_bfloat16> ones(kCount, __float2bfloat16(float(r + 1)));
                    for (int64_t i = 0; i < kCount; ++i) send[i] = r * 10000.0f + i;
                    float *d_send, *d_recv;
                    void* d_bf;
                    cudaMalloc(&d_send, kCount * 4);
                    cudaMalloc(&d_recv, n * kCount * 4);
                    cudaMalloc(&d_bf, kCount * 2);
                    cudaMemcpy(d_send, send.data(), kCount * 4, cudaMemcpyHostToDevice);
                    cudaMemcpy(d_bf, ones.data(), kCount * 2, cudaMemcpyHostToDevice);
                    absl::Status s = g->comms[r]->AllGather(d_send, kCount, d_recv);
                    if (s.ok()) s = g->comms[r]->AllReduceSum(d_bf, kCount, ncclBfloat16);
                    if (s.ok()) s = g->comms[r]->Barrier();
                    cudaMemcpy(gathered[r].data(), d_recv, n * kCount * 4, cudaMemcpyDeviceToHost);
                    cudaMemcpy(bf[r].data(), d_bf, kCount * 2, cudaMemcpyDeviceToHost);
                    cudaFree(d_send);
                    cudaFree(d_recv);
                    cudaFree(d_bf);
                    return s;
                  })
                  .ok());
  for (int r = 0; r < n; ++r) {
    for (int src = 0; src < n; ++src) {
      for (int64_t i = 0; i < kCount; ++i) {
        ASSERT_EQ(gathered[r][src * kCount + i], src * 10000.0f + i);
      }
    }
    for (int64_t i = 0; i < kCount; ++i) {
      ASSERT_EQ(__bfloat162float(bf[r][i]), n * (n + 1) / 2.0f);  // small integers: exact
    }
  }
}

TEST_P(NcclCommunicatorTest, ProbeReportsATransport) {
  std::vector<int> devices;
  for (int r = 0; r < GetParam(); ++r) devices.push_back(r);
  auto report = LogExpectedTransport(devices);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_FALSE(report->transport.empty());
  if (GetParam() == 1) {
    EXPECT_EQ(report->transport, "none (1 GPU)");
  }
  EXPECT_EQ(ProbePeerAccess({0, 0}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ProbePeerAccess({GpuCount()}).status().code(), absl::StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(GroupSizes, NcclCommunicatorTest, ::testing::Values(1, 2, 4, 8));

}  // namespace
}  // namespace pkv
