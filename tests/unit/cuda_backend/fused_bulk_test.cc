// ParseFusedBulk / FusedBulkName: the spelling of CudaBackendOptions::fused_gemv_bulk that the
// worker's --fused_gemv_bulk and pkv-bench e2e's "+bulk:" variants read.
#include "worker/cuda_backend/fused_bulk.h"

#include "gtest/gtest.h"

namespace pkv {
namespace {

TEST(FusedBulkTest, ParsesKeywordsAndProjectionLists) {
  EXPECT_EQ(*ParseFusedBulk("auto"), kFusedBulkAuto);
  EXPECT_EQ(*ParseFusedBulk("none"), 0u);
  EXPECT_EQ(*ParseFusedBulk("gateup,down"), kBulkGateUp | kBulkDown);
  EXPECT_EQ(*ParseFusedBulk("o.down"), kBulkO | kBulkDown);  // pkv-bench's separator
  EXPECT_EQ(*ParseFusedBulk("down,qkv,o,gateup"), kBulkAll);
}

TEST(FusedBulkTest, RejectsWhatItCannotRead) {
  for (const char* bad : {"", "gate", "o,,down", "AUTO", "auto,o", "none,o"}) {
    absl::StatusOr<uint32_t> r = ParseFusedBulk(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("qkv, o, gateup, down"), absl::string_view::npos) << bad;
  }
}

TEST(FusedBulkTest, NamesReadBack) {
  for (uint32_t bits : {kFusedBulkAuto, 0u, uint32_t{kBulkO}, kBulkGateUp | kBulkDown, kBulkAll}) {
    EXPECT_EQ(*ParseFusedBulk(FusedBulkName(bits)), bits) << FusedBulkName(bits);
  }
  EXPECT_EQ(FusedBulkName(kBulkGateUp | kBulkDown), "gateup,down");
  EXPECT_EQ(FusedBulkName(kBulkAll), "qkv,o,gateup,down");  // what auto resolves to on sm_90
}

}  // namespace
}  // namespace pkv
