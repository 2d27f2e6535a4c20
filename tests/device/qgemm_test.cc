// The quantized-weight GEMM (kernels/model/qgemm.h) against the dequantized-weight reference of
// the GEMV tests (gemv_test_util.h: the canonical weights dequantized in float32, rounded to the
// activation dtype as the kernel feeds the MMA; bound 4e-3 * sum |x w| plus the output rounding).
//   AwkwardShapes: 4-bit (zero points, groups of 128 and 256) and fp8 (per-row and per-tensor
//     scales), bf16 and fp16, tokens 9, 16, 17, 32, 63, 64, 100, 256 (full and partial 16-, 32-
//     and 64-token tiles, several tiles), n not a multiple of the 256-row tile, forced split
//     factors 1..3 and the planner's choice, float32 and 16-bit outputs, the memory-pipeline
//     options off (default) and on; every element checked, outputs poisoned, overrun guarded; the
//     split launches run twice (the tickets reset) and give the same bits.
//   ModelShapes: every 8B and 1B Llama projection (fp16: 1B only, as the GEMV test), tokens
//     cycling through the awkward counts, the planner's split; rows sampled (8 per 256-row tile,
//     one in each warp's 32 rows at varying lane positions, and the last row), every token.
//   RejectsBadArguments: a plan not from PlanQGemm, a split without workspace, missing scales.
#include "kernels/model/qgemm.h"

#include <cuda_runtime_api.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/device/gemv_test_util.h"
#include "tests/harness/test_seed.h"

namespace pkv::gemv_test {
namespace {

using gpu::GemvWeightFormat;

// 16, 32, 64 and 256 fill their token tiles (no live-token tests); the others end in a part tile.
constexpr int32_t kAwkwardTokens[] = {9, 16, 17, 32, 63, 64, 100, 256};
constexpr int32_t kNumAwkward = sizeof(kAwkwardTokens) / sizeof(kAwkwardTokens[0]);

std::vector<GemvCase> QuantCases() {
  std::vector<GemvCase> all;
  for (GemvWeightFormat f : {GemvWeightFormat::kInt4, GemvWeightFormat::kFp8}) {
    for (bool bf16 : {true, false}) all.push_back({bf16, f});
  }
  return all;
}

gpu::QGemmDevice Device() {
  absl::StatusOr<gpu::QGemmDevice> d = gpu::QueryQGemmDevice(0);
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() ? *d : gpu::QGemmDevice{};
}

// Device operands of one problem and a launch over them.
struct Staged {
  DeviceBuffer w, scales, x, partials, tickets;
  gpu::QGemmArgs args;
};

Staged Stage(const Problem& p, const gpu::QGemmPlan& plan) {
  Staged r;
  r.w = Upload(p.packed);
  r.scales = Upload(p.packed_scales);
  r.x = Upload(p.x16);
  r.partials = Poisoned(plan.partial_floats() * 4 + 64);
  r.tickets = *DeviceBuffer::Allocate(int64_t{plan.num_tickets()} * 4 + 16);
  cudaMemset(r.tickets.get(), 0, int64_t{plan.num_tickets()} * 4 + 16);
  gpu::QGemmArgs& a = r.args;
  a.dtype = p.bf16 ? gpu::DType::kBFloat16 : gpu::DType::kFloat16;
  a.plan = plan;
  a.w = r.w.get();
  a.w_scales = r.scales.get();
  a.w_scale_count = p.scale_count;
  a.x = r.x.get();
  a.partials = static_cast<float*>(r.partials.get());
  a.tickets = static_cast<int32_t*>(r.tickets.get());
  return r;
}

// Launches into a poisoned output; returns its bytes (checked for overrun).
std::vector<uint8_t> Launch(gpu::QGemmArgs a, bool f32, const std::string& what) {
  const int64_t bytes = int64_t{a.plan.m} * a.plan.n * (f32 ? 4 : 2);
  DeviceBuffer y = Poisoned(bytes + 64);
  a.y = y.get();
  a.y_f32 = f32;
  const absl::Status st = gpu::LaunchQGemm(a, nullptr);
  EXPECT_TRUE(st.ok()) << what << ": " << st;
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
  std::vector<uint8_t> got = Download<uint8_t>(y, bytes + 64);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(got[bytes + i], 0xff) << what << ": overrun";
  got.resize(bytes);
  return got;
}

// Mismatches of rows `rows` (all tokens) against the reference, the first few reported.
std::vector<int32_t> AllRows(int32_t n) {
  std::vector<int32_t> rows(n);
  for (int32_t r = 0; r < n; ++r) rows[r] = r;
  return rows;
}

std::vector<int32_t> SampledRows(int32_t n) {
  std::vector<int32_t> rows;
  for (int32_t b = 0; b * gpu::kQGemmTileRows < n; ++b) {
    for (int32_t i = 0; i < 8; ++i) {
      const int32_t r = b * gpu::kQGemmTileRows + (b * 37 + i * 33) % gpu::kQGemmTileRows;
      if (r < n) rows.push_back(r);
    }
  }
  rows.push_back(n - 1);
  return rows;
}

std::string What(const Problem& p, const gpu::QGemmPlan& plan, bool f32) {
  return absl::StrCat(CaseName(p.cs), " m=", plan.m, " n=", p.n, " k=", p.k, " parts=", plan.parts,
                      " stages=", plan.stages, f32 ? " f32" : " 16-bit");
}

class QGemmTest : public ::testing::TestWithParam<GemvCase> {
 protected:
  std::mt19937 rng_{::pkv::testing::TestSeed()};
};

TEST_P(QGemmTest, AwkwardShapes) {
  const gpu::QGemmDevice dev = Device();
  struct Shape {
    int32_t n, k;
  };
  // n = 300: a partial second row tile; 3 divides 300 (fp8 per-tensor scale, 4-bit groups of
  // 256 with k = 512); n = 520 with k = 640 (5 groups: a 4-bit stage of one group at the end):
  // groups of 128, per-row fp8 scales.
  int i = 0;
  for (const Shape sh : {Shape{300, 512}, Shape{520, 640}}) {
    for (int32_t m : kAwkwardTokens) {
      const Problem p = MakeProblem(GetParam(), sh.n, sh.k, m, /*rmsnorm=*/false, &rng_);
      for (int32_t parts : {0, 1, 2, 3}) {
        absl::StatusOr<gpu::QGemmPlan> plan =
            gpu::PlanQGemm(m, sh.n, sh.k, GetParam().format, dev, parts);
        ASSERT_TRUE(plan.ok()) << plan.status();
        Staged r = Stage(p, *plan);
        const bool f32 = (i++ % 2) == 0;
        const std::string what = What(p, *plan, f32);
        const std::vector<uint8_t> got = Launch(r.args, f32, what);
        EXPECT_EQ(CheckRows(p, got, f32, AllRows(sh.n), what), 0);
        if (plan->parts > 1) {  // the tickets are back at zero, and the sums are deterministic
          EXPECT_EQ(Launch(r.args, f32, what), got) << what << ": second launch differs";
        }
        if (parts == 2) {  // the memory-pipeline options on: the same sums in another order
          gpu::QGemmArgs plain = r.args;
          plain.l2_256b = plain.stagger = true;
          plain.prefetch_stages = 4;
          const std::string w2 = absl::StrCat(what, " pipeline options");
          EXPECT_EQ(CheckRows(p, Launch(plain, f32, w2), f32, AllRows(sh.n), w2), 0);
        }
      }
    }
  }
}

TEST_P(QGemmTest, ModelShapes) {
  struct Shape {
    const char* name;
    int32_t n, k;
  };
  std::vector<Shape> shapes = {{"1B qkv", 3072, 2048},
                               {"1B o", 2048, 2048},
                               {"1B gate/up", 16384, 2048},
                               {"1B down", 2048, 8192}};
  if (GetParam().bf16) {
    shapes.insert(shapes.end(), {{"8B qkv", 6144, 4096},
                                 {"8B o", 4096, 4096},
                                 {"8B gate/up", 28672, 4096},
                                 {"8B down", 4096, 14336}});
  }
  const gpu::QGemmDevice dev = Device();
  int i = 0;
  for (const Shape& sh : shapes) {
    const int32_t m = kAwkwardTokens[i % kNumAwkward];
    const bool f32 = (i++ % 2) == 1;
    const Problem p = MakeProblem(GetParam(), sh.n, sh.k, m, /*rmsnorm=*/false, &rng_);
    absl::StatusOr<gpu::QGemmPlan> plan = gpu::PlanQGemm(m, sh.n, sh.k, GetParam().format, dev);
    ASSERT_TRUE(plan.ok()) << plan.status();
    Staged r = Stage(p, *plan);
    const std::string what = absl::StrCat(sh.name, " ", What(p, *plan, f32));
    const std::vector<uint8_t> got = Launch(r.args, f32, what);
    EXPECT_EQ(CheckRows(p, got, f32, SampledRows(sh.n), what), 0);
  }
}

TEST_P(QGemmTest, RejectsBadArguments) {
  const gpu::QGemmDevice dev = Device();
  const Problem p = MakeProblem(GetParam(), 256, 512, 16, false, &rng_);
  absl::StatusOr<gpu::QGemmPlan> plan = gpu::PlanQGemm(16, 256, 512, GetParam().format, dev, 2);
  ASSERT_TRUE(plan.ok()) << plan.status();
  Staged r = Stage(p, *plan);
  DeviceBuffer y = Poisoned(16 * 256 * 4);
  gpu::QGemmArgs a = r.args;
  a.y = y.get();
  ASSERT_TRUE(gpu::LaunchQGemm(a, nullptr).ok());
  gpu::QGemmArgs bad = a;
  bad.plan.items += 1;
  EXPECT_EQ(gpu::LaunchQGemm(bad, nullptr).code(), absl::StatusCode::kInvalidArgument);
  bad = a;
  bad.tickets = nullptr;
  EXPECT_EQ(gpu::LaunchQGemm(bad, nullptr).code(), absl::StatusCode::kInvalidArgument);
  bad = a;
  bad.w_scales = nullptr;
  EXPECT_EQ(gpu::LaunchQGemm(bad, nullptr).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(gpu::PlanQGemm(16, 256, 192, GetParam().format, dev).status().code(),
            absl::StatusCode::kInvalidArgument);  // k not a multiple of 128
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

INSTANTIATE_TEST_SUITE_P(Formats, QGemmTest, ::testing::ValuesIn(QuantCases()),
                         [](const ::testing::TestParamInfo<GemvCase>& i) {
                           return CaseName(i.param);
                         });

}  // namespace
}  // namespace pkv::gemv_test
