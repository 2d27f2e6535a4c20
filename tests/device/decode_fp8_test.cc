// FP8 KV pages through every CUDA decode route: each output and LSE against the CPU reference of
// the same quantized pages (ReferenceDecodeAttentionFp8, the fp16/bf16 tolerances of
// decode_attention_test) and against the 16-bit reference of the K/V before quantization within
// the documented FP8 accuracy bound (decode_fixture.h). Awkward lengths, page sizes, head dims
// 64/128/256, groups 1..8, fp16 and bf16 queries, both formats, kernel configs. Label: device
// (needs a GPU).
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/decode/decode_launch.h"
#include "tests/device/decode_fixture.h"

namespace pkv::decode::testing {
namespace {

constexpr KvCacheDtype kFormats[] = {KvCacheDtype::kFp8E4M3, KvCacheDtype::kFp8E5M2};

using DecodeFp8DeviceTest = DecodeDeviceTest;

TEST_F(DecodeFp8DeviceTest, AwkwardLengthsEveryRouteAndPageSize) {
  for (KvCacheDtype kv : kFormats) {
    for (int ps : {1, 16, 64}) {
      Case c;
      c.kv_dtype = kv;
      c.shape.page_size = ps;
      c.lengths = {1, ps, ps + 1, 0, 3 * ps + 5, 700, 2 * ps};
      if (ps > 1) c.lengths.push_back(ps - 1);
      std::shuffle(c.lengths.begin(), c.lengths.end(), rng_);
      CheckAllRoutes(c);
      if (HasFatalFailure()) return;
    }
  }
}

TEST_F(DecodeFp8DeviceTest, HeadDimsDtypesAndGroupsEveryRoute) {
  for (int d : {64, 128, 256}) {
    for (DType t : {DType::kFloat16, DType::kBFloat16}) {
      for (int g = 1; g <= 8; ++g) {
        Case c;
        c.kv_dtype = kFormats[(d + g) % 2];
        c.dtype = t;
        c.shape = KvShape{2 * g, 2, d, 16};
        c.lengths = RandomLengths(1 + rng_() % 4, 0, 2500);
        if (d == 256) c.config = KernelConfig{2, 3, 0};
        c.q_scale = 1.f + (rng_() % 3);
        CheckAllRoutes(c);
        if (HasFatalFailure()) return;
      }
    }
  }
}

TEST_F(DecodeFp8DeviceTest, LongRowsAndLargeBatches) {
  Case c;
  c.kv_dtype = KvCacheDtype::kFp8E4M3;
  c.lengths = {40000, 3, 9000};
  c.shape.page_size = 64;
  CheckAllRoutes(c);
  c.lengths = RandomLengths(128, 0, 600);
  c.dtype = DType::kBFloat16;
  CheckAllRoutes(c);
}

TEST_F(DecodeFp8DeviceTest, KernelConfigs) {
  for (int d : {64, 128, 256}) {
    Case c;
    c.kv_dtype = KvCacheDtype::kFp8E4M3;
    c.shape.head_dim = d;
    c.lengths = RandomLengths(4, 0, 5000);
    DecodeProblem prob(c, rng_);
    for (int w : {2, 4, 8}) {
      for (int s : {2, 3, 4, 6}) {
        c.config = KernelConfig{w, s, (w + s) % 3 == 0 ? 256 : (w + s) % 3 == 1 ? 128 : 0};
        if (AttentionSmemBytes(d, c.config, 1) > 200 * 1024) continue;
        for (Route r : {Route::kWorkqueue, Route::kPersistent}) {
          c.route = r;
          RunAndCompare(c, prob);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

TEST_F(DecodeFp8DeviceTest, MismatchedPagesAndScalesAreRejected) {
  Case c;
  c.kv_dtype = KvCacheDtype::kFp8E4M3;
  c.lengths = {100};
  DecodeProblem prob(c, rng_);
  DecodeTensors t = prob.tensors();
  t.kv_scales.k = 0.f;
  ASSERT_TRUE(ConfigureDecodeKernels(c.config).ok());
  auto limits = LimitsFor(c);
  ASSERT_TRUE(limits.ok());
  KvShape s = c.shape;
  s.kv_elem_bytes = 1;
  PlanInput in{prob.lengths().data(), prob.page_indptr().data(), 1, s};
  DecodePlan plan;
  ASSERT_TRUE(PlanDecode(in, *limits, PlanOptions{}, &plan).ok());
  Workspace ws(1, s, *limits, PlanOptions{});
  ASSERT_TRUE(ws.Fill(plan).ok());
  const float scale = 0.1f;
  absl::Status st = LaunchDecode(plan, ws.layout(), t, ws.device(), c.config, scale, stream_);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  t = prob.tensors();
  t.kv_dtype = KvCacheDtype::kAuto;  // 16-bit kernels over a 1-byte plan
  st = LaunchDecode(plan, ws.layout(), t, ws.device(), c.config, scale, stream_);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
}

}  // namespace
}  // namespace pkv::decode::testing
