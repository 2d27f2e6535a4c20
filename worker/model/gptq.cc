#include "worker/model/gptq.h"

#include "common/status_macros.h"

namespace pkv {

Int4GroupMatrix UnpackGptq(const PackedInt4Tensors& p, int64_t n, int64_t k, int32_t group,
                           bool v2) {
  PKV_CHECK(n % 8 == 0);
  Int4GroupMatrix m = MakeInt4GroupMatrix(n, k, group);
  const int64_t groups = k / group, zero_words = n / 8;
  PKV_CHECK(static_cast<int64_t>(p.qweight.size()) == (k / 8) * n);
  PKV_CHECK(static_cast<int64_t>(p.qzeros.size()) == groups * zero_words);
  PKV_CHECK(static_cast<int64_t>(p.scales.size()) == groups * n);
  // GPTQ packs along k like the canonical form, so row r's word b is qweight[b][r].
  for (int64_t b = 0; b < k / 8; ++b) {
    for (int64_t r = 0; r < n; ++r)
      m.q[r * (k / 8) + b] = static_cast<uint32_t>(p.qweight[b * n + r]);
  }
  const uint32_t offset = v2 ? 0 : 1;
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t c = 0; c < zero_words; ++c) {
      const auto word = static_cast<uint32_t>(p.qzeros[g * zero_words + c]);
      for (int i = 0; i < 8; ++i) {
        m.zero[(8 * c + i) * groups + g] = static_cast<uint8_t>(((word >> (4 * i)) + offset) & 0xf);
      }
    }
    for (int64_t r = 0; r < n; ++r) m.scale[r * groups + g] = p.scales[g * n + r];
  }
  return m;
}

PackedInt4Tensors PackGptq(const Int4GroupMatrix& m, bool v2) {
  PKV_CHECK(m.n % 8 == 0);
  const int64_t groups = m.k / m.group, zero_words = m.n / 8;
  PackedInt4Tensors p;
  p.qweight.resize(static_cast<size_t>((m.k / 8) * m.n));
  p.qzeros.assign(static_cast<size_t>(groups * zero_words), 0);
  p.scales.resize(static_cast<size_t>(groups * m.n));
  for (int64_t b = 0; b < m.k / 8; ++b) {
    for (int64_t r = 0; r < m.n; ++r)
      p.qweight[b * m.n + r] = static_cast<int32_t>(m.q[r * (m.k / 8) + b]);
  }
  const uint32_t offset = v2 ? 0 : 1;
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t c = 0; c < zero_words; ++c) {
      uint32_t word = 0;
      for (int i = 0; i < 8; ++i) {
        word |= ((uint32_t{m.zero[(8 * c + i) * groups + g]} - offset) & 0xf) << (4 * i);
      }
      p.qzeros[g * zero_words + c] = static_cast<int32_t>(word);
    }
    for (int64_t r = 0; r < m.n; ++r) p.scales[g * m.n + r] = m.scale[r * groups + g];
  }
  return p;
}

}  // namespace pkv
