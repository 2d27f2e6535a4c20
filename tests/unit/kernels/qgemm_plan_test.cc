// The quantized-weight GEMM's host planner (kernels/model/qgemm_plan.h): the split-K rule's worked
// examples, the token tile, the ring depth and scale table per device, plan invariants (items
// cover every tile and part, parts tile the K stages, workspace sizes), the route rule and the
// rejection of unsupported shapes.
#include "kernels/model/qgemm_plan.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace pkv::gpu {
namespace {

constexpr QGemmDevice kH200{132, 233472, 232448, 1024};
constexpr QGemmDevice kSm86{84, 102400, 101376, 1024};

TEST(QGemmPlanTest, PartsFollowTheWorkedExamples) {
  EXPECT_EQ(ChooseQGemmParts(16, 16, 264), 8);    // 8B o_proj, 16 tokens, 4-bit (16 stages)
  EXPECT_EQ(ChooseQGemmParts(16, 32, 132), 8);    // the same, fp8
  EXPECT_EQ(ChooseQGemmParts(16, 56, 264), 16);   // 8B down, 4-bit
  EXPECT_EQ(ChooseQGemmParts(112, 16, 132), 1);   // 8B gate/up, 64 tokens, 4-bit
  EXPECT_EQ(ChooseQGemmParts(112, 16, 264), 2);   // the same at 16 tokens
  EXPECT_EQ(ChooseQGemmParts(24, 16, 264), 8);    // 8B qkv, 16 tokens, 4-bit
  EXPECT_EQ(ChooseQGemmParts(24, 32, 132), 5);    // the same, fp8
  EXPECT_EQ(ChooseQGemmParts(448, 32, 264), 1);   // more tiles than slots
  EXPECT_EQ(ChooseQGemmParts(1, 1000, 264), 16);  // the cap
  EXPECT_EQ(ChooseQGemmParts(1, 3, 264), 1);      // a part keeps >= 2 stages
  absl::StatusOr<QGemmPlan> p = PlanQGemm(16, 4096, 4096, GemvWeightFormat::kInt4, kH200);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->tile_tokens, 16);
  EXPECT_EQ(p->ctas_per_sm, 2);
  EXPECT_EQ(p->parts, 8);
  EXPECT_EQ(p->scale_stride, 5);  // 4 groups a part, odd
  p = PlanQGemm(16, 4096, 4096, GemvWeightFormat::kFp8, kH200);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->ctas_per_sm, 1);
  EXPECT_EQ(p->parts, 8);
  EXPECT_EQ(p->scale_stride, 0);
  // 8B gate/up at 64 tokens: one CTA per SM, one part, the 32-group table and three stages.
  p = PlanQGemm(64, 28672, 4096, GemvWeightFormat::kInt4, kH200);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->tile_tokens, 64);
  EXPECT_EQ(p->ctas_per_sm, 1);
  EXPECT_EQ(p->parts, 1);
  EXPECT_EQ(p->scale_stride, 33);
  EXPECT_EQ(p->stages, 3);
  EXPECT_EQ(p->smem_bytes, 3 * 65536 + 256 * 33 * 4);
  // The same at 16 tokens: two CTAs per SM, two parts of 16 groups, two stages.
  p = PlanQGemm(16, 28672, 4096, GemvWeightFormat::kInt4, kH200);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->ctas_per_sm, 2);
  EXPECT_EQ(p->parts, 2);
  EXPECT_EQ(p->scale_stride, 17);
  EXPECT_EQ(p->stages, 2);
  // 8B down forced to one part: raised until a part's groups fit the table (112 groups: 4).
  p = PlanQGemm(64, 4096, 14336, GemvWeightFormat::kInt4, kH200, 1);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->parts, 4);
  EXPECT_EQ(p->scale_stride, 29);
}

TEST(QGemmPlanTest, TileTokens) {
  EXPECT_EQ(ChooseQGemmTileTokens(1), 16);
  EXPECT_EQ(ChooseQGemmTileTokens(16), 16);
  EXPECT_EQ(ChooseQGemmTileTokens(17), 32);
  EXPECT_EQ(ChooseQGemmTileTokens(32), 32);
  EXPECT_EQ(ChooseQGemmTileTokens(33), 64);
  EXPECT_EQ(ChooseQGemmTileTokens(1000), 64);
}

TEST(QGemmPlanTest, StagesFitTheDevice) {
  EXPECT_EQ(ChooseQGemmStages(QGemmStageBytes(GemvWeightFormat::kFp8, 64), 0, 1, kH200), 4);
  EXPECT_EQ(ChooseQGemmStages(QGemmStageBytes(GemvWeightFormat::kInt4, 64), 0, 1, kSm86), 1);
  for (const QGemmDevice& d : {kH200, kSm86}) {
    for (GemvWeightFormat f : {GemvWeightFormat::kInt4, GemvWeightFormat::kFp8}) {
      for (int32_t m : {1, 16, 17, 32, 64, 256}) {
        for (int32_t k : {640, 4096, 14336}) {
          for (int32_t parts : {0, 1, 3}) {
            absl::StatusOr<QGemmPlan> p = PlanQGemm(m, 4096, k, f, d, parts);
            ASSERT_TRUE(p.ok()) << p.status();
            EXPECT_LE(p->smem_bytes, d.smem_per_block);
            EXPECT_LE(p->ctas_per_sm * (p->smem_bytes + d.smem_reserved), d.smem_per_sm);
            EXPECT_EQ(p->smem_bytes, p->stages * QGemmStageBytes(f, p->tile_tokens) +
                                         kQGemmTileRows * p->scale_stride * 4);
            EXPECT_GE(p->stages, 2);
            EXPECT_LE(p->stages, kQGemmMaxStages);
            EXPECT_GE(p->ctas_per_sm, 1);
          }
        }
      }
    }
  }
}

TEST(QGemmPlanTest, PlansCoverEveryTileAndStage) {
  for (GemvWeightFormat f : {GemvWeightFormat::kInt4, GemvWeightFormat::kFp8}) {
    for (int32_t m : {1, 9, 16, 17, 63, 64, 65, 256, 1000}) {
      for (int32_t n : {1, 255, 256, 300, 6144, 28672}) {
        for (int32_t k : {128, 640, 4096, 14336}) {
          absl::StatusOr<QGemmPlan> p = PlanQGemm(m, n, k, f, kH200);
          ASSERT_TRUE(p.ok()) << p.status();
          EXPECT_EQ(p->row_tiles * kQGemmTileRows >= n, true);
          EXPECT_LT((p->row_tiles - 1) * kQGemmTileRows, n);
          EXPECT_LT((p->token_tiles - 1) * p->tile_tokens, m);
          EXPECT_GE(p->token_tiles * p->tile_tokens, m);
          EXPECT_EQ(p->k_stages * QGemmStageK(f) >= k, true);
          EXPECT_LT((p->k_stages - 1) * QGemmStageK(f), k);
          EXPECT_EQ(p->items, p->tiles() * p->parts);
          // The rule's split (one wave), more only where the 4-bit scale table and two stages
          // need shorter parts.
          const int32_t rule =
              ChooseQGemmParts(p->tiles(), p->k_stages, kH200.num_sms * p->ctas_per_sm);
          if (f == GemvWeightFormat::kFp8) EXPECT_EQ(p->parts, rule);
          if (p->parts > rule) {  // and one part fewer would not fit
            int32_t groups = 0;
            for (int32_t part = 0; part < p->parts - 1; ++part) {
              groups = std::max(
                  groups,
                  std::min(2 * QGemmPartBegin(p->k_stages, p->parts - 1, part + 1), p->k_groups) -
                      2 * QGemmPartBegin(p->k_stages, p->parts - 1, part));
            }
            const int32_t table = kQGemmTileRows * (groups | 1) * 4;
            EXPECT_TRUE(groups > kQGemmMaxPartGroups ||
                        ChooseQGemmStages(QGemmStageBytes(f, p->tile_tokens), table, p->ctas_per_sm,
                                          kH200) < 2)
                << m << " " << n << " " << k;
          }
          // The kernel's part bounds (qgemm_kernel.cuh MakeItem) tile [0, k_stages) with none
          // empty, and every part's scale groups fit the table's row.
          int32_t covered = 0;
          for (int32_t part = 0; part < p->parts; ++part) {
            const int32_t lo = QGemmPartBegin(p->k_stages, p->parts, part);
            const int32_t hi = QGemmPartBegin(p->k_stages, p->parts, part + 1);
            EXPECT_EQ(lo, covered);
            EXPECT_GT(hi, lo);
            if (f == GemvWeightFormat::kInt4) {
              EXPECT_LE(std::min(2 * hi, p->k_groups) - 2 * lo, p->scale_stride);
              EXPECT_LE(p->scale_stride, kQGemmMaxPartGroups + 1);
              EXPECT_EQ(p->scale_stride % 2, 1);
            }
            covered = hi;
          }
          EXPECT_EQ(covered, p->k_stages);
          EXPECT_EQ(p->partial_floats(),
                    p->parts > 1 ? int64_t{p->items} * kQGemmTileRows * p->tile_tokens : 0);
          EXPECT_EQ(p->num_tickets(), p->parts > 1 ? p->tiles() : 0);
        }
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
  EXPECT_FALSE(PlanQGemm(64, 4096, 65536 + 128, GemvWeightFormat::kInt4, kH200).ok());  // table
  EXPECT_TRUE(PlanQGemm(64, 4096, 65536 + 128, GemvWeightFormat::kFp8, kH200).ok());
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
