// The fused GEMV's host-visible decomposition (kernels/model/gemv_plan.h): row maps, K-step runs,
// the split-K heuristic and plans, and an emulation of one CTA's arithmetic that runs the kernel's
// own operand packing (GemvFragA / GemvFragB / GemvAccLane / GemvAccElem) through an MMA written
// from the PTX m16n8k16 fragment tables, checked against plain dot products.
#include "kernels/model/gemv_plan.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace pkv::gpu {
namespace {

TEST(GemvRowTest, EveryRowOnceAndPairsHalfAGroupApart) {
  struct Case {
    int32_t n, group;
  };
  for (const Case& cs : std::vector<Case>{{16, 16},
                                          {48, 16},
                                          {128, 16},
                                          {6144, 128},  // q/k/v of the 8B shape: 48 heads of 128
                                          {320, 64},
                                          {128, 16},
                                          {64, 32},
                                          {768, 768},       // gate/up with I = 384
                                          {28672, 28672}})  // gate/up with I = 14336
  {
    std::set<int32_t> seen;
    for (int32_t tile = 0; tile < cs.n / kGemvTileRows; ++tile) {
      for (int32_t slot = 0; slot < kGemvTileRows; ++slot) {
        const int32_t row = GemvRow(cs.group, tile, slot);
        ASSERT_GE(row, 0);
        ASSERT_LT(row, cs.n) << "group " << cs.group << " tile " << tile;
        EXPECT_TRUE(seen.insert(row).second) << "row " << row << " twice";
        if (slot < 8) {
          const int32_t partner = GemvRow(cs.group, tile, slot + 8);
          EXPECT_EQ(partner - row, cs.group / 2);
          EXPECT_EQ(row / cs.group, partner / cs.group) << "pair crosses a group";
          EXPECT_LT(row % cs.group, cs.group / 2);
        }
      }
    }
    EXPECT_EQ(static_cast<int32_t>(seen.size()), cs.n);
  }
}

TEST(GemvRowTest, ContiguousTilesAreConsecutiveRows) {
  for (int32_t tile = 0; tile < 5; ++tile) {
    for (int32_t slot = 0; slot < 16; ++slot) EXPECT_EQ(GemvRow(16, tile, slot), 16 * tile + slot);
  }
}

// The kernel's division-free row map equals GemvRow for the model's row groups (8B qkv: head_dim
// 128; gate/up: 2 * 14336; 1B gate/up: 2 * 8192; contiguous), every tile and slot.
TEST(GemvRowTest, PlanRowEqualsGemvRow) {
  for (const auto& [n, group] : std::vector<std::pair<int32_t, int32_t>>{
           {6144, 128}, {28672, 28672}, {16384, 16384}, {4096, 16}, {96, 96}, {4144, 16}}) {
    const GemvPlan p = *PlanGemv(n, 4096, group, GemvDevice{132, 3});
    for (int32_t tile = 0; tile < p.tiles; ++tile) {
      for (int32_t slot = 0; slot < kGemvTileRows; ++slot) {
        ASSERT_EQ(GemvPlanRow(p, tile, slot), GemvRow(group, tile, slot))
            << "n " << n << " group " << group << " tile " << tile << " slot " << slot;
      }
    }
  }
}

TEST(GemvWarpStepsTest, PartsAndWarpsTileTheStepsInOrder) {
  for (int32_t steps : {1, 2, 3, 7, 8, 64, 128, 448, 1001}) {
    for (int32_t parts = 1; parts <= kGemvMaxParts; ++parts) {
      int32_t next = 0;
      for (int32_t part = 0; part < parts; ++part) {
        for (int32_t warp = 0; warp < kGemvWarps; ++warp) {
          const GemvStepRange r = GemvWarpSteps(steps, parts, part, warp);
          EXPECT_EQ(r.begin, next) << steps << " steps, part " << part << " warp " << warp;
          EXPECT_LE(r.begin, r.end);
          next = r.end;
        }
      }
      EXPECT_EQ(next, steps);
    }
  }
}

TEST(ChooseGemvPartsTest, WorkedExamplesOn132Sms) {
  EXPECT_EQ(ChooseGemvParts(256, 128, 132), 1);   // 8B o_proj: tiles >= SMs
  EXPECT_EQ(ChooseGemvParts(384, 128, 132), 1);   // 8B q/k/v
  EXPECT_EQ(ChooseGemvParts(1792, 128, 132), 1);  // 8B gate/up
  EXPECT_EQ(ChooseGemvParts(256, 448, 132), 1);   // 8B down
  EXPECT_EQ(ChooseGemvParts(192, 64, 132), 1);    // 1B q/k/v
  EXPECT_EQ(ChooseGemvParts(128, 64, 132), 3);    // 1B o_proj
  EXPECT_EQ(ChooseGemvParts(128, 256, 132), 3);   // 1B down
  EXPECT_EQ(ChooseGemvParts(8016, 128, 132), 1);  // 8B LM head
  EXPECT_EQ(ChooseGemvParts(8, 2, 132), 1);       // tiny model: too few steps to split
  EXPECT_EQ(ChooseGemvParts(0, 64, 132), 1);
}

TEST(ChooseGemvPartsTest, NeverSplitsBelowTwoStepsPerWarp) {
  std::mt19937 rng(5);
  for (int i = 0; i < 2000; ++i) {
    const int32_t tiles = 1 + rng() % 3000, steps = 1 + rng() % 600, sms = 1 + rng() % 200;
    const int32_t parts = ChooseGemvParts(tiles, steps, sms);
    ASSERT_GE(parts, 1);
    ASSERT_LE(parts, kGemvMaxParts);
    if (parts > 1) {
      EXPECT_GE(steps / parts, 2 * kGemvWarps) << tiles << " " << steps;
    }
  }
}

TEST(PlanGemvTest, PlansAndRejections) {
  const GemvDevice h200{132, 3};
  absl::StatusOr<GemvPlan> p = PlanGemv(4096, 4096, 16, h200);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->tiles, 256);
  EXPECT_EQ(p->parts, 1);
  EXPECT_EQ(p->grid, 256);
  EXPECT_EQ(p->partial_floats(), 0);
  EXPECT_EQ(p->num_tickets(), 0);
  p = PlanGemv(2048, 8192, 16, h200);  // 1B down: 128 tiles < 132 SMs split 3 ways
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->tiles, 128);
  EXPECT_EQ(p->parts, 3);
  EXPECT_EQ(p->items, 384);
  EXPECT_EQ(p->grid, 384);
  EXPECT_EQ(p->partial_floats(), 384 * 128);
  EXPECT_EQ(p->num_tickets(), 128);
  p = PlanGemv(100, 64, 16, h200);  // rows not a multiple of 16: the last tile is masked
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->tiles, 7);
  EXPECT_EQ(p->grid, 7);
  EXPECT_EQ(p->partial_floats(), 0);
  EXPECT_EQ(PlanGemv(64, 48, 16, h200).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanGemv(0, 64, 16, h200).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanGemv(96, 64, 64, h200).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanGemv(96, 64, 24, h200).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanGemv(96, 64, 16, GemvDevice{0, 3}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Deep batches where at most two CTAs an SM run: 8B o / down (256 tiles on 132 SMs) in 16-bit and
// fp8 weights, not 4-bit (its own pipeline), not 8B q/k/v (384 tiles) or gate/up (1792), not the
// 1B down (3 parts: 384 items).
TEST(PlanGemvTest, DeepBatchesWhereAtMostTwoCtasAnSmRun) {
  const GemvDevice h200{132, 3};
  struct Cell {
    int32_t n, k;
    GemvWeightFormat format;
    bool deep;
  };
  for (const Cell& c : {Cell{4096, 4096, GemvWeightFormat::kDense, true},
                        Cell{4096, 14336, GemvWeightFormat::kFp8, true},
                        Cell{4096, 14336, GemvWeightFormat::kInt4, false},
                        Cell{6144, 4096, GemvWeightFormat::kDense, false},
                        Cell{28672, 4096, GemvWeightFormat::kDense, false},
                        Cell{2048, 8192, GemvWeightFormat::kDense, false}}) {
    absl::StatusOr<GemvPlan> p = PlanGemv(c.n, c.k, 16, h200, c.format);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->deep, c.deep) << c.n << " x " << c.k << " format " << static_cast<int>(c.format);
  }
}

// Quantized weights: the split rule sees the packed bytes (units of 1 KB per tile), and k must
// hold whole units (and 128-k scale words for 4-bit).
TEST(PlanGemvTest, QuantizedFormatsPlanOnTheirBytes) {
  const GemvDevice h200{132, 3};
  absl::StatusOr<GemvPlan> p = PlanGemv(4096, 4096, 16, h200, GemvWeightFormat::kInt4);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->units, 32);
  EXPECT_EQ(p->parts, 1);  // 256 tiles >= 132 SMs
  EXPECT_EQ(p->weight_bytes(), 4096 * (4096 / 2 + 4 * 32));
  p = PlanGemv(2048, 2048, 16, h200, GemvWeightFormat::kInt4);  // 1B o_proj: 16 units
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->parts, 1);  // dense splits 3 ways (64 steps); 4-bit has 1 KB per warp at most
  p = PlanGemv(2048, 2048, 16, h200, GemvWeightFormat::kFp8);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->units, 32);
  EXPECT_EQ(p->parts, 1);  // 2 parts would be allowed but balance no better (256 < 264 items)
  EXPECT_EQ(p->weight_bytes(), 2048 * (2048 + 4));
  EXPECT_EQ(PlanGemv(64, 64, 16, h200, GemvWeightFormat::kInt4).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PlanGemv(64, 96, 16, h200, GemvWeightFormat::kFp8).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// ---- Emulation of the kernel's arithmetic with integer "elements" --------------------------

// 16-bit elements packed two to a word, the lower k in the low half (little-endian memory).
uint32_t Word(const std::vector<uint16_t>& v, int64_t first) {
  return uint32_t{v[first]} | (uint32_t{v[first + 1]} << 16);
}
int64_t Lo(uint32_t w) { return w & 0xffff; }
int64_t Hi(uint32_t w) { return w >> 16; }

// One m16n8k16 MMA over a warp's registers, straight from the PTX fragment tables
// (groupID = lane / 4, tig = lane % 4):
//   A: a0 = (g, 2tig | 2tig+1), a1 = (g+8, ..), a2 = (g, 2tig+8 | 2tig+9), a3 = (g+8, ..)
//   B: b0 = (k 2tig | 2tig+1, n g), b1 = (k 2tig+8 | 2tig+9, n g)
//   C: c0 = (g, 2tig), c1 = (g, 2tig+1), c2 = (g+8, 2tig), c3 = (g+8, 2tig+1)
void EmulatedMma(const uint32_t (&a)[32][4], const uint32_t (&b)[32][2], int64_t (&c)[32][4]) {
  int64_t A[16][16], B[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    const int rows[4] = {g, g + 8, g, g + 8}, cols[4] = {2 * t, 2 * t, 2 * t + 8, 2 * t + 8};
    for (int r = 0; r < 4; ++r) {
      A[rows[r]][cols[r]] = Lo(a[lane][r]);
      A[rows[r]][cols[r] + 1] = Hi(a[lane][r]);
    }
    B[2 * t][g] = Lo(b[lane][0]);
    B[2 * t + 1][g] = Hi(b[lane][0]);
    B[2 * t + 8][g] = Lo(b[lane][1]);
    B[2 * t + 9][g] = Hi(b[lane][1]);
  }
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    const int rows[4] = {g, g, g + 8, g + 8}, cols[4] = {2 * t, 2 * t + 1, 2 * t, 2 * t + 1};
    for (int e = 0; e < 4; ++e) {
      for (int kk = 0; kk < 16; ++kk) c[lane][e] += A[rows[e]][kk] * B[kk][cols[e]];
    }
  }
}

// Emulates every item of a plan the way GemvKernel computes it (loads, fragments, MMAs, warp
// reduction, part reduction) and returns y[t][row].
std::vector<int64_t> EmulateGemv(const GemvPlan& p, int32_t tokens, const std::vector<uint16_t>& w,
                                 const std::vector<uint16_t>& x) {
  std::vector<int64_t> y(int64_t{tokens} * p.n, -1);
  const int32_t steps = p.k / kGemvStepK;
  for (int32_t tile = 0; tile < p.tiles; ++tile) {
    int64_t tile_sum[16][8] = {};
    for (int32_t part = 0; part < p.parts; ++part) {
      int64_t acc[kGemvWarps][32][4] = {};
      for (int32_t warp = 0; warp < kGemvWarps; ++warp) {
        const GemvStepRange r = GemvWarpSteps(steps, p.parts, part, warp);
        for (int32_t s = r.begin; s < r.end; ++s) {
          uint32_t wa[32][4], wb[32][4], xv[32][4];
          for (int lane = 0; lane < 32; ++lane) {
            const int g = lane / 4, c = lane % 4;
            const int64_t k = int64_t{s} * kGemvStepK + 8 * c;
            const int64_t ra = std::min(GemvRow(p.group_rows, tile, g), p.n - 1);
            const int64_t rb = std::min(GemvRow(p.group_rows, tile, g + 8), p.n - 1);
            for (int i = 0; i < 4; ++i) {
              wa[lane][i] = Word(w, ra * p.k + k + 2 * i);
              wb[lane][i] = Word(w, rb * p.k + k + 2 * i);
              xv[lane][i] = g < tokens ? Word(x, int64_t{g} * p.k + k + 2 * i) : 0u;
            }
          }
          for (int h = 0; h < 2; ++h) {
            uint32_t fa[32][4], fb[32][2];
            for (int lane = 0; lane < 32; ++lane) {
              GemvFragA(wa[lane], wb[lane], h, fa[lane]);
              GemvFragB(xv[lane], h, fb[lane]);
            }
            EmulatedMma(fa, fb, acc[warp]);
          }
        }
      }
      for (int slot = 0; slot < 16; ++slot) {
        for (int t = 0; t < 8; ++t) {
          for (int warp = 0; warp < kGemvWarps; ++warp) {
            tile_sum[slot][t] += acc[warp][GemvAccLane(slot, t)][GemvAccElem(slot, t)];
          }
        }
      }
    }
    for (int slot = 0; slot < 16; ++slot) {
      const int32_t row = GemvRow(p.group_rows, tile, slot);
      for (int t = 0; t < tokens && row < p.n; ++t) y[int64_t{t} * p.n + row] = tile_sum[slot][t];
    }
  }
  return y;
}

TEST(GemvEmulationTest, FragmentAlgebraComputesTheDotProducts) {
  std::mt19937 rng(11);
  // Small SM counts force split-K plans; odd n masks the last tile.
  struct Case {
    int32_t n, k, group, sms, parts;
  };
  for (const Case& cs : std::vector<Case>{{16, 32, 16, 132, 1},
                                          {40, 96, 16, 1, 1},
                                          {64, 2048, 16, 8, 4},
                                          {37, 1024, 16, 6, 2},
                                          {48, 1536, 16, 5, 3},
                                          {128, 64, 64, 132, 1},
                                          {96, 512, 96, 3, 1}}) {
    const GemvPlan p = *PlanGemv(cs.n, cs.k, cs.group, GemvDevice{cs.sms, 1});
    ASSERT_EQ(p.parts, cs.parts) << "n " << cs.n << " k " << cs.k;
    for (int32_t tokens : {1, 3, 8}) {
      std::vector<uint16_t> w(int64_t{cs.n} * cs.k), x(int64_t{tokens} * cs.k);
      for (uint16_t& v : w) v = static_cast<uint16_t>(rng() % 2000);
      for (uint16_t& v : x) v = static_cast<uint16_t>(rng() % 2000);
      const std::vector<int64_t> y = EmulateGemv(p, tokens, w, x);
      for (int32_t t = 0; t < tokens; ++t) {
        for (int32_t n = 0; n < cs.n; ++n) {
          int64_t want = 0;
          for (int32_t k = 0; k < cs.k; ++k) {
            want += int64_t{w[int64_t{n} * cs.k + k]} * x[int64_t{t} * cs.k + k];
          }
          ASSERT_EQ(y[int64_t{t} * cs.n + n], want) << "n " << cs.n << " k " << cs.k << " parts "
                                                    << p.parts << " t " << t << " row " << n;
        }
      }
    }
  }
}

// The staged span of every CTA covers the k of every item it takes, and the staged bytes cover
// the widest span; rows padded to 4 mod 8 vectors (bank-conflict-free quarter warps).
TEST(GemvStageTest, SpansCoverEachCtasItems) {
  struct Case {
    int32_t n, k, sms;
    GemvWeightFormat format;
  };
  for (const Case& cs : std::vector<Case>{{4096, 4096, 132, GemvWeightFormat::kDense},
                                          {4096, 14336, 132, GemvWeightFormat::kInt4},
                                          {1000, 4096, 64, GemvWeightFormat::kDense},
                                          {1000, 4096, 66, GemvWeightFormat::kDense},
                                          {2048, 2048, 132, GemvWeightFormat::kFp8},
                                          {37, 1024, 3, GemvWeightFormat::kDense}}) {
    const GemvPlan p = *PlanGemv(cs.n, cs.k, 16, GemvDevice{cs.sms, 3}, cs.format);
    const int32_t unit_k = kGemvStepK * GemvUnitSteps(p.format);
    int32_t widest = 0;
    for (int32_t cta = 0; cta < p.grid; ++cta) {
      const GemvKSpan span = GemvStageSpan(p, cta);
      widest = std::max(widest, span.len);
      EXPECT_EQ(GemvStageRowVecs(span.len) % 8, 4);
      EXPECT_GE(GemvStageRowVecs(span.len), span.len / 8);
      for (int32_t item = cta; item < p.items; item += p.grid) {
        const int32_t part = item % p.parts;
        for (int32_t warp = 0; warp < kGemvWarps; ++warp) {
          const GemvStepRange r = GemvWarpSteps(p.units, p.parts, part, warp);
          if (r.begin == r.end) continue;
          ASSERT_GE(r.begin * unit_k, span.begin) << "n " << cs.n << " cta " << cta;
          ASSERT_LE(r.end * unit_k, span.begin + span.len) << "n " << cs.n << " cta " << cta;
        }
      }
    }
    for (int32_t tokens : {1, 8}) {
      EXPECT_EQ(GemvStageBytes(p, tokens), int64_t{tokens} * GemvStageRowVecs(widest) * 16);
    }
  }
  // 1B o_proj (3 parts, grid 384): each CTA stages a third of k (21 of 64 steps for part 1).
  const GemvPlan o = *PlanGemv(2048, 2048, 16, GemvDevice{132, 3});
  ASSERT_EQ(o.parts, 3);
  EXPECT_EQ(GemvStageSpan(o, 1).begin, 21 * 32);
  EXPECT_EQ(GemvStageSpan(o, 1).len, 21 * 32);
  const GemvPlan qkv = *PlanGemv(6144, 4096, 128, GemvDevice{132, 3});
  EXPECT_EQ(GemvStageBytes(qkv, 8), 8 * 516 * 16);
}

// The staging rule's worked examples (gemv_plan.h: ChooseGemvStageX).
TEST(GemvStageTest, RuleWorkedExamples) {
  const GemvDevice h200{132, 3, 71632};
  const GemvPlan qkv = *PlanGemv(6144, 4096, 128, h200);  // one item a CTA
  EXPECT_TRUE(ChooseGemvStageX(qkv, 1, /*normalized_input=*/true));
  EXPECT_TRUE(ChooseGemvStageX(qkv, 2, true));
  EXPECT_FALSE(ChooseGemvStageX(qkv, 4, true));
  EXPECT_FALSE(ChooseGemvStageX(qkv, 1, false));                 // plain dense
  const GemvPlan gate_up = *PlanGemv(28672, 4096, 28672, h200);  // 1792 items on 396 CTAs
  EXPECT_TRUE(ChooseGemvStageX(gate_up, 4, true));               // 32.2 KB
  EXPECT_FALSE(ChooseGemvStageX(gate_up, 8, true));              // 64.5 KB
  const GemvPlan gate_up4 = *PlanGemv(28672, 4096, 28672, h200, GemvWeightFormat::kInt4);
  EXPECT_TRUE(ChooseGemvStageX(gate_up4, 8, true));
  const GemvPlan down4 = *PlanGemv(4096, 14336, 16, h200, GemvWeightFormat::kInt4);
  EXPECT_TRUE(ChooseGemvStageX(down4, 1, false));
  EXPECT_FALSE(ChooseGemvStageX(down4, 2, false));
  const GemvPlan o8 = *PlanGemv(4096, 4096, 16, h200, GemvWeightFormat::kFp8);
  EXPECT_FALSE(ChooseGemvStageX(o8, 1, false));
}

}  // namespace
}  // namespace pkv::gpu
