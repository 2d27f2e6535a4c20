// The quantized-weight GEMM's host planner (kernels/model/qgemm_plan.h): the split-K rule's worked
// examples, the ring depth per device, plan invariants (items cover every tile and part, parts
// tile the K stages, workspace sizes), the route rule and the rejection of unsupported shapes.
#include "kernels/model/qgemm_plan.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace pkv::gpu {
namespace {

constexpr QGemmDevice kH200{132, 233472, 232448, 1024};
constexpr QGemmDevice kSm86{84, 102400, 101376, 1024};

TEST(QGemmPlanTest, PartsFollowTheWorkedExamples) {
  EXPECT_EQ(ChooseQGemmParts(16, 32, 264), 16);   // 8B o_proj, 16 tokens, 4-bit
  EXPECT_EQ(ChooseQGemmParts(16, 32, 132), 8);    // the same, fp8
  EXPECT_EQ(ChooseQGemmParts(16, 112, 264), 16);  // 8B down, 4-bit
  EXPECT_EQ(ChooseQGemmParts(112, 32, 264), 2);   // 8B gate/up, 64 tokens, 4-bit
  EXPECT_EQ(ChooseQGemmParts(112, 32, 132), 1);   // the same, fp8
  EXPECT_EQ(ChooseQGemmParts(24, 32, 264), 11);   // 8B qkv, 16 tokens, 4-bit
  EXPECT_EQ(ChooseQGemmParts(24, 32, 132), 5);    // the same, fp8
  EXPECT_EQ(ChooseQGemmParts(448, 32, 264), 1);   // more tiles than slots
  EXPECT_EQ(ChooseQGemmParts(1, 1000, 264), 16);  // the cap
  EXPECT_EQ(ChooseQGemmParts(1, 3, 264), 1);      // a part keeps >= 2 stages
  absl::StatusOr<QGemmPlan> p = PlanQGemm(16, 4096, 4096, GemvWeightFormat::kInt4, kH200);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->ctas_per_sm, 2);
  EXPECT_EQ(p->parts, 16);
  p = PlanQGemm(16, 4096, 4096, GemvWeightFormat::kFp8, kH200);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->ctas_per_sm, 1);
  EXPECT_EQ(p->parts, 8);
}

TEST(QGemmPlanTest, StagesFitTheDevice) {
  EXPECT_EQ(ChooseQGemmStages(GemvWeightFormat::kInt4, kH200), 3);
  EXPECT_EQ(ChooseQGemmStages(GemvWeightFormat::kFp8, kH200), 4);
  EXPECT_EQ(ChooseQGemmStages(GemvWeightFormat::kInt4, kSm86), 2);
  EXPECT_EQ(ChooseQGemmStages(GemvWeightFormat::kFp8, kSm86), 2);
  for (const QGemmDevice& d : {kH200, kSm86}) {
    for (GemvWeightFormat f : {GemvWeightFormat::kInt4, GemvWeightFormat::kFp8}) {
      absl::StatusOr<QGemmPlan> p = PlanQGemm(64, 4096, 4096, f, d);
      ASSERT_TRUE(p.ok()) << p.status();
      EXPECT_LE(p->smem_bytes, d.smem_per_block);
      EXPECT_EQ(p->smem_bytes, p->stages * QGemmStageBytes(f));
      EXPECT_GE(p->ctas_per_sm, 1);
    }
  }
}

TEST(QGemmPlanTest, PlansCoverEveryTileAndStage) {
  for (int32_t m : {1, 9, 63, 64, 65, 256, 1000}) {
    for (int32_t n : {1, 255, 256, 300, 6144, 28672}) {
      for (int32_t k : {128, 640, 4096, 14336}) {
        absl::StatusOr<QGemmPlan> p = PlanQGemm(m, n, k, GemvWeightFormat::kInt4, kH200);
        ASSERT_TRUE(p.ok()) << p.status();
        EXPECT_EQ(p->row_tiles * kQGemmTileRows >= n, true);
        EXPECT_LT((p->row_tiles - 1) * kQGemmTileRows, n);
        EXPECT_LT((p->token_tiles - 1) * kQGemmTileTokens, m);
        EXPECT_GE(p->token_tiles * kQGemmTileTokens, m);
        EXPECT_EQ(p->items, p->tiles() * p->parts);
        EXPECT_LE(p->parts, std::max(1, p->k_stages / kQGemmMinStagesPerPart));
        EXPECT_LE(p->items, std::max(p->tiles(), kH200.num_sms * p->ctas_per_sm));  // one wave
        // The kernel's part bounds (qgemm_kernel.cuh MakeItem) tile [0, k_stages) with none empty.
        int32_t covered = 0;
        for (int32_t part = 0; part < p->parts; ++part) {
          const int32_t lo = static_cast<int32_t>(int64_t{part} * p->k_stages / p->parts);
          const int32_t hi = static_cast<int32_t>(int64_t{part + 1} * p->k_stages / p->parts);
          EXPECT_EQ(lo, covered);
          EXPECT_GT(hi, lo);
          covered = hi;
        }
        EXPECT_EQ(covered, p->k_stages);
        EXPECT_EQ(p->partial_floats(),
                  p->parts > 1 ? int64_t{p->items} * kQGemmTileRows * kQGemmTileTokens : 0);
        EXPECT_EQ(p->num_tickets(), p->parts > 1 ? p->tiles() : 0);
      }
    }
  }
}

TEST(QGemmPlanTest, ForcedPartsAreKeptWithinTheStages) {
  absl::StatusOr<QGemmPlan> p = PlanQGemm(64, 512, 512, GemvWeightFormat::kFp8, kH200, 3);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->parts, 3);
  p = PlanQGemm(64, 512, 256, GemvWeightFormat::kFp8, kH200, 3);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->parts, 2);  // two stages
}

TEST(QGemmPlanTest, RejectsUnsupportedShapes) {
  EXPECT_FALSE(PlanQGemm(64, 4096, 4096, GemvWeightFormat::kDense, kH200).ok());
  EXPECT_FALSE(PlanQGemm(64, 4096, 4160, GemvWeightFormat::kFp8, kH200).ok());  // k % 128
  EXPECT_FALSE(PlanQGemm(0, 4096, 4096, GemvWeightFormat::kInt4, kH200).ok());
  EXPECT_FALSE(PlanQGemm(64, 0, 4096, GemvWeightFormat::kInt4, kH200).ok());
  EXPECT_FALSE(PlanQGemm(64, 4096, 4096, GemvWeightFormat::kInt4, QGemmDevice{}).ok());
}

TEST(QGemmPlanTest, RouteRule) {
  using F = GemvWeightFormat;
  constexpr auto kQ = PackedRoute::kQGemm;
  constexpr auto kD = PackedRoute::kDequantCublas;
  EXPECT_EQ(ChoosePackedRoute(1, F::kInt4, 4096, 4096), kQ);
  EXPECT_EQ(ChoosePackedRoute(20, F::kFp8, 6144, 4096), kQ);  // any projection to 32 tokens
  EXPECT_EQ(ChoosePackedRoute(32, F::kInt4, 4096, 4096), kQ);
  EXPECT_EQ(ChoosePackedRoute(64, F::kInt4, 28672, 4096), kQ);  // 8B gate/up
  EXPECT_EQ(ChoosePackedRoute(64, F::kFp8, 4096, 14336), kQ);   // 8B down
  EXPECT_EQ(ChoosePackedRoute(64, F::kInt4, 6144, 4096), kD);   // 8B qkv
  EXPECT_EQ(ChoosePackedRoute(33, F::kInt4, 4096, 4096), kD);   // 8B o
  EXPECT_EQ(ChoosePackedRoute(65, F::kInt4, 28672, 4096), kD);
  EXPECT_EQ(ChoosePackedRoute(16, F::kFp8, 4096, 4160), kD);  // k % 128
  EXPECT_EQ(ChoosePackedRoute(16, F::kDense, 4096, 4096), kD);
  EXPECT_EQ(ChoosePackedRoute(0, F::kInt4, 4096, 4096), kD);
}

}  // namespace
}  // namespace pkv::gpu
