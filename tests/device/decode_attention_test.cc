// Every CUDA decode route against the CPU reference, element by element (outputs and LSE), on
// fresh random inputs with poisoned outputs and workspaces, over awkward lengths, batch sizes,
// head dims, dtypes, group sizes, page sizes, kernel configs, SM-restricted limits, and CUDA-graph
// replay with new lengths. Label: device (needs a GPU).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/decode/decode_launch.h"
#include "tests/device/decode_fixture.h"

namespace pkv::decode::testing {
namespace {

TEST_F(DecodeDeviceTest, AwkwardLengthsEveryRouteAndPageSize) {
  // 17: a divisor whose multiply-shift constant is not 1 (the kernel's 32-bit page division).
  for (int ps : {1, 16, 17, 64}) {
    Case c;
    c.shape.page_size = ps;
    c.lengths = {1, ps, ps + 1, 0, 3 * ps + 5, 700, 2 * ps};
    if (ps > 1) c.lengths.push_back(ps - 1);
    std::shuffle(c.lengths.begin(), c.lengths.end(), rng_);
    CheckAllRoutes(c);
  }
}

// Plans without the host block table: every item loads its first page ids itself.
TEST_F(DecodeDeviceTest, WithoutPagePrefix) {
  for (int ps : {1, 16}) {
    Case c;
    c.page_prefix = false;
    c.shape.page_size = ps;
    c.lengths = {1, ps + 1, 0, 3 * ps + 5, 700, 2900};
    CheckAllRoutes(c);
    if (HasFatalFailure()) return;
  }
}

TEST_F(DecodeDeviceTest, HeadDimsDtypesAndGroups) {
  for (int d : {64, 128, 256}) {
    for (DType t : {DType::kFloat16, DType::kBFloat16}) {
      for (int g = 1; g <= 8; ++g) {
        Case c;
        c.dtype = t;
        c.shape = KvShape{2 * g, 2, d, 16};
        c.lengths = RandomLengths(1 + rng_() % 4, 0, 2500);
        if (d == 256) c.config = KernelConfig{2, 3, 0};
        c.route = g % 2 ? Route::kWorkqueue : Route::kSplit;
        c.q_scale = 1.f + (rng_() % 4);
        DecodeProblem prob(c, rng_);
        RunAndCompare(c, prob);
        if (HasFatalFailure()) return;
      }
    }
  }
}

TEST_F(DecodeDeviceTest, Qwen7bShapeG7) {
  Case c;
  c.shape = KvShape{28, 4, 128, 16};
  c.lengths = RandomLengths(5, 1, 6000);
  CheckAllRoutes(c);
  c.dtype = DType::kBFloat16;
  c.lengths = RandomLengths(3, 0, 3000);
  CheckAllRoutes(c);
}

TEST_F(DecodeDeviceTest, BatchSizesUpTo256) {
  for (int b : {1, 2, 5, 17, 64, 128, 256}) {
    Case c;
    c.lengths = RandomLengths(b, 0, b >= 128 ? 300 : 1200);
    CheckAllRoutes(c);
    if (HasFatalFailure()) return;
  }
}

TEST_F(DecodeDeviceTest, LongRowsManySplitsPeakySoftmax) {
  Case c;
  c.q_scale = 6.f;
  c.lengths = {40000};
  CheckAllRoutes(c);
  c.lengths = {20000, 5, 9000};
  c.shape.page_size = 64;
  c.dtype = DType::kBFloat16;
  CheckAllRoutes(c);
}

TEST_F(DecodeDeviceTest, KernelConfigs) {
  for (int d : {64, 128}) {
    Case c;
    c.shape.head_dim = d;
    c.lengths = RandomLengths(4, 0, 5000);
    c.dtype = d == 64 ? DType::kBFloat16 : DType::kFloat16;
    DecodeProblem prob(c, rng_);
    for (int w : {2, 4, 8}) {
      for (int s : {2, 3, 4, 6}) {
        c.config = KernelConfig{w, s, (w + s) % 3 == 0 ? 256 : (w + s) % 3 == 1 ? 128 : 0};
        if (AttentionSmemBytes(d, c.config) > 200 * 1024) continue;
        for (Route r : {Route::kWorkqueue, Route::kPersistent}) {
          c.route = r;
          RunAndCompare(c, prob);
        }
      }
    }
  }
}

TEST_F(DecodeDeviceTest, SmRestrictedLimitsStrideAndMultiItemCtas) {
  for (DeviceLimits lim : {DeviceLimits{8, 1}, DeviceLimits{3, 2}, DeviceLimits{28, 2}}) {
    Case c;
    c.limits = lim;
    c.min_split_tokens = 16;
    c.lengths = RandomLengths(9, 0, 4000);
    CheckAllRoutes(c);
    if (HasFatalFailure()) return;
  }
}

// A graph captured once for a capacity replays later plans of that capacity with new lengths.
TEST_F(DecodeDeviceTest, GraphReplayWithNewLengthsMatchesFreshRun) {
  for (Route route : {Route::kFused, Route::kSplit, Route::kWorkqueue, Route::kPersistent}) {
    for (MergeMode merge : kMerges) {
      Case c;
      c.route = route;
      c.merge = merge;
      c.lengths = RandomLengths(6, 0, 3000);
      SCOPED_TRACE(absl::StrCat(c.Name(), " seed ", seed_));
      ASSERT_TRUE(ConfigureDecodeKernels(c.config).ok());
      DecodeProblem prob(c, rng_);
      auto limits = LimitsFor(c);
      ASSERT_TRUE(limits.ok());
      PlanOptions opt;
      opt.route = route;
      opt.merge = merge;
      opt.capacity_rows = 8;
      Workspace ws(8, c.shape, *limits, opt);
      const float scale = 1.f / std::sqrt(128.f);
      DecodePlan plan;
      auto plan_for = [&](const std::vector<int32_t>& lengths) {
        PlanInput in{lengths.data(), prob.page_indptr().data(),
                     static_cast<int32_t>(lengths.size()), c.shape};
        in.page_ids = prob.page_ids().data();
        ASSERT_TRUE(PlanDecode(in, *limits, opt, &plan).ok());
        ASSERT_TRUE(ws.Fill(plan).ok());
      };
      plan_for(prob.lengths());
      cudaGraph_t graph;
      cudaGraphExec_t exec;
      ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), cudaSuccess);
      ASSERT_TRUE(UploadPlan(ws.image(), ws.layout(), true, ws.device(), stream_).ok());
      ASSERT_TRUE(
          LaunchDecode(plan, ws.layout(), prob.tensors(), ws.device(), c.config, scale, stream_)
              .ok());
      ASSERT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess);
      ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
      for (int step = 0; step < 3; ++step) {
        if (step > 0) {  // rows grow (within their pages); one may empty
          std::vector<int32_t> next = prob.lengths();
          for (auto& l : next) l += 1 + rng_() % 4;  // pages hold 8 spare tokens
          if (step == 2) next[rng_() % next.size()] = 0;
          prob.SetLengths(next);
          plan_for(prob.lengths());
        }
        prob.PoisonOutputs(stream_);
        ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
        std::vector<uint16_t> out, fresh;
        std::vector<float> lse, fresh_lse;
        ASSERT_TRUE(prob.Download(stream_, &out, &lse).ok());
        const CompareResult r = prob.Compare(out, lse);
        EXPECT_EQ(r.bad + r.bad_lse, 0) << "replay step " << step << ": " << r.first_bad;
        EXPECT_TRUE(ws.CountersAreZero());
        ASSERT_TRUE(prob.Run(c, stream_, &fresh, &fresh_lse).ok());
        if (route != Route::kPersistent) {  // same items, so the same bits
          EXPECT_EQ(out, fresh) << "replay differs from a fresh run at step " << step;
        }
      }
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(graph);
    }
  }
}

// Small enough for compute-sanitizer memcheck (run with --gtest_filter=*Sanitizer*).
TEST_F(DecodeDeviceTest, SanitizerSubsetAllRoutes) {
  Case c;
  c.shape = KvShape{8, 2, 128, 16};
  c.lengths = {0, 1, 15, 17, 300};
  CheckAllRoutes(c);
  c.shape = KvShape{14, 2, 64, 7};
  c.dtype = DType::kBFloat16;
  c.config = KernelConfig{2, 2, 128};
  c.lengths = {33, 0, 129};
  CheckAllRoutes(c);
}

TEST_F(DecodeDeviceTest, RejectsUnsupportedShapesAndConfigs) {
  EXPECT_FALSE(ConfigureDecodeKernels(KernelConfig{3, 4, 0}).ok());
  EXPECT_FALSE(ConfigureDecodeKernels(KernelConfig{4, 1, 0}).ok());
  EXPECT_FALSE(ConfigureDecodeKernels(KernelConfig{4, 3, 64}).ok());
  const auto bad = QueryDeviceLimits(0, KvShape{32, 8, 96, 16}, DType::kFloat16, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("supported"), absl::string_view::npos);
}

}  // namespace
}  // namespace pkv::decode::testing
