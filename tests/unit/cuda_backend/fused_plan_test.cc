// The fused small-batch path's per-model plans (worker/cuda_backend/fused_plan.h): supported
// shapes, the projection geometry and split-K factors for the benchmark shapes on an H200, and
// clear errors for shapes the kernels cannot take.
#include "worker/cuda_backend/fused_plan.h"

#include "gtest/gtest.h"
#include "worker/tools/model_shapes.h"

namespace pkv::cuda_backend {
namespace {

constexpr gpu::GemvDevice kH200{132, 3};

TEST(FusedPlanTest, Llama3_8bOnH200) {
  absl::StatusOr<FusedPlans> p = PlanFusedLayers(*ModelShapeConfig("llama3-8b"), kH200);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(p->rope_in_gemv);
  EXPECT_EQ(p->qkv.n, 6144);
  EXPECT_EQ(p->qkv.k, 4096);
  EXPECT_EQ(p->qkv.group_rows, 128);
  EXPECT_EQ(p->qkv.parts, 1);
  EXPECT_EQ(p->o.n, 4096);
  EXPECT_EQ(p->o.parts, 1);
  EXPECT_EQ(p->gate_up.n, 28672);
  EXPECT_EQ(p->gate_up.group_rows, 28672);
  EXPECT_EQ(p->down.k, 14336);
  EXPECT_EQ(p->down.parts, 1);
  EXPECT_EQ(p->lm_head.n, 128256);
  EXPECT_EQ(p->residual_parts, 256);
  // 256 tiles or more on 132 SMs: no plan splits, so no workspace.
  EXPECT_EQ(p->partial_floats(), 0);
  EXPECT_EQ(p->num_tickets(), 0);
  for (const gpu::GemvPlan* g : {&p->qkv, &p->o, &p->gate_up, &p->down, &p->lm_head}) {
    EXPECT_LE(g->grid, 132 * 3);
    EXPECT_EQ(g->items, g->tiles * g->parts);
  }
}

// Packed 4-bit projections plan in their format (a unit is 128 k, so 4x fewer units a row), the
// LM head stays dense; the tiny model's 64-wide hidden size cannot hold a 128-k group.
TEST(FusedPlanTest, Llama3_8bInt4PlansEachProjectionInItsFormat) {
  FusedFormats f;
  f.qkv = f.o = f.gate_up = f.down = gpu::GemvWeightFormat::kInt4;
  f.dense = kH200;
  f.int4 = gpu::GemvDevice{132, 2};
  absl::StatusOr<FusedPlans> p = PlanFusedLayers(*ModelShapeConfig("llama3-8b"), f);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->qkv.format, gpu::GemvWeightFormat::kInt4);
  EXPECT_EQ(p->qkv.units, 4096 / 128);
  EXPECT_EQ(p->o.parts, 1);  // gemv_plan.h's worked example: 256 tiles >= 132 SMs
  EXPECT_EQ(p->down.parts, 1);
  EXPECT_LE(p->gate_up.grid, 132 * 2);
  EXPECT_EQ(p->lm_head.format, gpu::GemvWeightFormat::kDense);
  EXPECT_LE(p->lm_head.grid, 132 * 3);
  EXPECT_FALSE(PlanFusedLayers(*ModelShapeConfig("tiny"), f).ok());
}

TEST(FusedPlanTest, Llama3_1bAndTinyAreSupported) {
  absl::StatusOr<FusedPlans> p = PlanFusedLayers(*ModelShapeConfig("llama3-1b"), kH200);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->qkv.group_rows, 64);
  EXPECT_EQ(p->qkv.parts, 1);  // 192 tiles >= 132 SMs
  EXPECT_EQ(p->o.parts, 3);
  EXPECT_EQ(p->down.parts, 3);
  EXPECT_EQ(p->residual_parts, 128);
  p = PlanFusedLayers(*ModelShapeConfig("tiny"), kH200);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->qkv.group_rows, 16);
  EXPECT_EQ(p->residual_parts, 4);
  EXPECT_EQ(p->partial_floats(), 0);
}

TEST(FusedPlanTest, QkNormModelsKeepRopeOutOfTheGemv) {
  ModelConfig c = *ModelShapeConfig("llama3-1b");
  c.qk_norm = true;
  absl::StatusOr<FusedPlans> p = PlanFusedLayers(c, kH200);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_FALSE(p->rope_in_gemv);
  EXPECT_EQ(p->qkv.group_rows, 16);
}

TEST(FusedPlanTest, RejectsShapesTheKernelsCannotTake) {
  ModelConfig c = *ModelShapeConfig("llama3-1b");
  c.intermediate_size = 8200;  // not a multiple of 32
  absl::StatusOr<FusedPlans> p = PlanFusedLayers(c, kH200);
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("intermediate_size"), absl::string_view::npos);
  c = *ModelShapeConfig("llama3-1b");
  c.hidden_size = 2040;
  EXPECT_NE(PlanFusedLayers(c, kH200).status().message().find("hidden_size"),
            absl::string_view::npos);
  c = *ModelShapeConfig("llama3-1b");
  c.head_dim = 72;  // 32 * 72 is a multiple of 32, but 72 is not one of 16
  c.num_q_heads = 32;
  EXPECT_NE(PlanFusedLayers(c, kH200).status().message().find("head_dim"), absl::string_view::npos);
  EXPECT_FALSE(PlanFusedLayers(*ModelShapeConfig("llama3-1b"), gpu::GemvDevice{0, 0}).ok());
}

}  // namespace
}  // namespace pkv::cuda_backend
