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
  EXPECT_EQ(ChooseQGemmParts(16, 32, 132), 8);    // 8B o_proj, 64 tokens: capped by 32 / 4
  EXPECT_EQ(ChooseQGemmParts(112, 32, 132), 2);   // 8B gate/up, 64 tokens
  EXPECT_EQ(ChooseQGemmParts(16, 112, 132), 9);   // 8B down, 64 tokens
  EXPECT_EQ(ChooseQGemmParts(96, 32, 132), 2);    // 8B qkv, 256 tokens
  EXPECT_EQ(ChooseQGemmParts(448, 32, 132), 1);   // 8B gate/up, 256 tokens
  EXPECT_EQ(ChooseQGemmParts(1, 1000, 132), 16);  // the cap
  EXPECT_EQ(ChooseQGemmParts(1, 3, 132), 1);      // fewer than 4 stages: no split
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
  EXPECT_EQ(ChoosePackedRoute(9, F::kInt4, 4096, 4096), PackedRoute::kQGemm);
  EXPECT_EQ(ChoosePackedRoute(kQGemmMaxRouteTokens, F::kFp8, 4096, 4096), PackedRoute::kQGemm);
  EXPECT_EQ(ChoosePackedRoute(kQGemmMaxRouteTokens + 1, F::kInt4, 4096, 4096),
            PackedRoute::kDequantCublas);
  EXPECT_EQ(ChoosePackedRoute(64, F::kFp8, 4096, 4160), PackedRoute::kDequantCublas);
  EXPECT_EQ(ChoosePackedRoute(64, F::kDense, 4096, 4096), PackedRoute::kDequantCublas);
}

}  // namespace
}  // namespace pkv::gpu
