// The canonical quantized matrices: 4-bit dequantization at group boundaries,
// tensor-parallel slices, and the AWQ / GPTQ packings against hand-packed words.
#include "worker/model/quant_matrix.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "worker/model/awq.h"
#include "worker/model/gptq.h"

namespace pkv {
namespace {

Int4GroupMatrix CountingMatrix() {
  // 2 rows, k = 16, group 8: q[r][j] = (j + r) % 16; distinct zero/scale per group.
  Int4GroupMatrix m = MakeInt4GroupMatrix(2, 16, 8);
  for (int r = 0; r < 2; ++r) {
    for (int j = 0; j < 16; ++j) OrInt4(&m, r, j, (j + r) % 16);
  }
  m.zero = {1, 2, 3, 4};
  m.scale = {0.5f, 0.25f, 2.0f, 1.0f};
  return m;
}

TEST(Int4GroupMatrixTest, NibbleLayoutAndGroupBoundaries) {
  const Int4GroupMatrix m = CountingMatrix();
  ASSERT_TRUE(CheckInt4GroupMatrix(m).ok());
  EXPECT_EQ(m.q[0], 0x76543210u);  // row 0, columns 0..7: nibble j%8 holds column j
  EXPECT_EQ(m.q[1], 0xfedcba98u);
  EXPECT_EQ(m.q[2], 0x87654321u);
  std::vector<float> w(32);
  DequantizeInt4(m, w.data());
  EXPECT_EQ(w[0], (0 - 1) * 0.5f);
  EXPECT_EQ(w[7], (7 - 1) * 0.5f);
  EXPECT_EQ(w[8], (8 - 2) * 0.25f);  // first column of the second group
  EXPECT_EQ(w[16 + 7], (8 - 3) * 2.0f);
  EXPECT_EQ(w[16 + 15], (0 - 4) * 1.0f);  // (15 + 1) % 16
}

TEST(Int4GroupMatrixTest, SlicesRowsAndGroupAlignedColumns) {
  const Int4GroupMatrix m = CountingMatrix();
  std::vector<float> full(32), part(16);
  DequantizeInt4(m, full.data());
  const Int4GroupMatrix rows = SliceInt4Rows(m, 1, 2);
  DequantizeInt4(rows, part.data());
  for (int j = 0; j < 16; ++j) EXPECT_EQ(part[j], full[16 + j]);
  absl::StatusOr<Int4GroupMatrix> cols = SliceInt4Columns(m, 8, 16);
  ASSERT_TRUE(cols.ok());
  DequantizeInt4(*cols, part.data());
  for (int r = 0; r < 2; ++r) {
    for (int j = 0; j < 8; ++j) EXPECT_EQ(part[r * 8 + j], full[r * 16 + 8 + j]);
  }
  absl::StatusOr<Int4GroupMatrix> bad = SliceInt4Columns(m, 4, 12);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(bad.status().message()).find("group"), std::string::npos);
}

TEST(Fp8MatrixTest, PerChannelAndPerTensorScalesAndSlices) {
  Fp8Matrix m;
  m.n = 2;
  m.k = 2;
  m.q = {0x38, 0xb8, 0x40, 0x00};  // 1, -1, 2, 0
  m.scale = {0.5f, 3.0f};
  std::vector<float> w(4);
  DequantizeFp8(m, w.data());
  EXPECT_EQ(w, (std::vector<float>{0.5f, -0.5f, 6.0f, 0.0f}));
  m.scale = {2.0f};
  DequantizeFp8(m, w.data());
  EXPECT_EQ(w, (std::vector<float>{2.0f, -2.0f, 4.0f, 0.0f}));
  const Fp8Matrix col = SliceFp8Columns(m, 1, 2);
  EXPECT_EQ(col.q, (std::vector<uint8_t>{0xb8, 0x00}));
  m.scale = {0.5f, 3.0f};
  const Fp8Matrix row = SliceFp8Rows(m, 1, 2);
  EXPECT_EQ(row.scale, std::vector<float>{3.0f});
  EXPECT_TRUE(CheckFp8Matrix(row).ok());
}

// 8 outputs x 8 inputs, group 8: q[r][j] = (r + 2 * j) % 16, zero[r] = r + 1, scale[r] = r + 1.
Int4GroupMatrix EightByEight() {
  Int4GroupMatrix m = MakeInt4GroupMatrix(8, 8, 8);
  for (int r = 0; r < 8; ++r) {
    for (int j = 0; j < 8; ++j) OrInt4(&m, r, j, (r + 2 * j) % 16);
    m.zero[r] = static_cast<uint8_t>(r + 1);
    m.scale[r] = static_cast<float>(r + 1);
  }
  return m;
}

TEST(AwqPackingTest, InterleavesOutputColumnsInAwqOrder) {
  const Int4GroupMatrix m = EightByEight();
  const PackedInt4Tensors p = PackAwq(m);
  ASSERT_EQ(p.qweight.size(), 8u);  // [k = 8][n / 8 = 1]
  // Input row 0 holds q[r][0] = r; nibble i holds output AWQ_ORDER[i] = 0, 2, 4, 6, 1, 3, 5, 7.
  EXPECT_EQ(static_cast<uint32_t>(p.qweight[0]), 0x75316420u);
  // Zero points r + 1 in the same interleave.
  ASSERT_EQ(p.qzeros.size(), 1u);
  EXPECT_EQ(static_cast<uint32_t>(p.qzeros[0]), 0x86427531u);
  EXPECT_EQ(p.scales[3], 4.0f);  // [group 0][output 3]
  const Int4GroupMatrix back = UnpackAwq(p, 8, 8, 8);
  EXPECT_EQ(back.q, m.q);
  EXPECT_EQ(back.zero, m.zero);
  EXPECT_EQ(back.scale, m.scale);
}

TEST(GptqPackingTest, PacksAlongInputsAndStoresZeroMinusOneInV1) {
  const Int4GroupMatrix m = EightByEight();
  const PackedInt4Tensors v1 = PackGptq(m, /*v2=*/false);
  ASSERT_EQ(v1.qweight.size(), 8u);  // [k / 8 = 1][n = 8]
  // Output row 1: q[1][j] = 1 + 2j -> nibbles 1, 3, 5, ..., 15 from the low end.
  EXPECT_EQ(static_cast<uint32_t>(v1.qweight[1]), 0xfdb97531u);
  EXPECT_EQ(static_cast<uint32_t>(v1.qzeros[0]), 0x76543210u);  // zero r + 1 stored as r
  const PackedInt4Tensors v2 = PackGptq(m, /*v2=*/true);
  EXPECT_EQ(static_cast<uint32_t>(v2.qzeros[0]), 0x87654321u);
  for (bool is_v2 : {false, true}) {
    const Int4GroupMatrix back = UnpackGptq(is_v2 ? v2 : v1, 8, 8, 8, is_v2);
    EXPECT_EQ(back.q, m.q);
    EXPECT_EQ(back.zero, m.zero);
  }
  // v1's zero point 0 is stored as 0xf (zero - 1 in four bits) and read back as 0.
  Int4GroupMatrix z = m;
  z.zero[0] = 0;
  const PackedInt4Tensors pz = PackGptq(z, false);
  EXPECT_EQ(static_cast<uint32_t>(pz.qzeros[0]) & 0xf, 0xfu);
  EXPECT_EQ(UnpackGptq(pz, 8, 8, 8, false).zero[0], 0);
  // Symmetric v1 checkpoints: every zero 8 is the word 0x77777777.
  Int4GroupMatrix sym = m;
  for (uint8_t& zp : sym.zero) zp = 8;
  EXPECT_EQ(static_cast<uint32_t>(PackGptq(sym, false).qzeros[0]), 0x77777777u);
}

}  // namespace
}  // namespace pkv
