#include "worker/model/awq.h"

#include "common/status_macros.h"

namespace pkv {

Int4GroupMatrix UnpackAwq(const PackedInt4Tensors& p, int64_t n, int64_t k, int32_t group) {
  PKV_CHECK(n % 8 == 0);
  Int4GroupMatrix m = MakeInt4GroupMatrix(n, k, group);
  const int64_t words = n / 8, groups = k / group;
  PKV_CHECK(static_cast<int64_t>(p.qweight.size()) == k * words);
  PKV_CHECK(static_cast<int64_t>(p.qzeros.size()) == groups * words);
  PKV_CHECK(static_cast<int64_t>(p.scales.size()) == groups * n);
  for (int64_t j = 0; j < k; ++j) {
    for (int64_t c = 0; c < words; ++c) {
      const auto word = static_cast<uint32_t>(p.qweight[j * words + c]);
      for (int i = 0; i < 8; ++i) OrInt4(&m, 8 * c + kAwqOrder[i], j, word >> (4 * i));
    }
  }
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t c = 0; c < words; ++c) {
      const auto word = static_cast<uint32_t>(p.qzeros[g * words + c]);
      for (int i = 0; i < 8; ++i) {
        m.zero[(8 * c + kAwqOrder[i]) * groups + g] = static_cast<uint8_t>((word >> (4 * i)) & 0xf);
      }
    }
    for (int64_t r = 0; r < n; ++r) m.scale[r * groups + g] = p.scales[g * n + r];
  }
  return m;
}

PackedInt4Tensors PackAwq(const Int4GroupMatrix& m) {
  PKV_CHECK(m.n % 8 == 0);
  const int64_t words = m.n / 8, groups = m.k / m.group;
  PackedInt4Tensors p;
  p.qweight.assign(static_cast<size_t>(m.k * words), 0);
  p.qzeros.assign(static_cast<size_t>(groups * words), 0);
  p.scales.resize(static_cast<size_t>(groups * m.n));
  for (int64_t j = 0; j < m.k; ++j) {
    for (int64_t c = 0; c < words; ++c) {
      uint32_t word = 0;
      for (int i = 0; i < 8; ++i) word |= uint32_t{Int4At(m, 8 * c + kAwqOrder[i], j)} << (4 * i);
      p.qweight[j * words + c] = static_cast<int32_t>(word);
    }
  }
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t c = 0; c < words; ++c) {
      uint32_t word = 0;
      for (int i = 0; i < 8; ++i)
        word |= uint32_t{m.zero[(8 * c + kAwqOrder[i]) * groups + g]} << (4 * i);
      p.qzeros[g * words + c] = static_cast<int32_t>(word);
    }
    for (int64_t r = 0; r < m.n; ++r) p.scales[g * m.n + r] = m.scale[r * groups + g];
  }
  return p;
}

}  // namespace pkv
