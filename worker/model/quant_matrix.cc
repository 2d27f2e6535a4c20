#include "worker/model/quant_matrix.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pkv {
namespace {

absl::Status SizeError(const char* what, size_t got, int64_t want) {
  return absl::InternalError(absl::StrCat(what, " has ", got, " entries, expected ", want));
}

}  // namespace

Int4GroupMatrix MakeInt4GroupMatrix(int64_t n, int64_t k, int32_t group) {
  PKV_CHECK(n > 0 && k > 0 && group > 0 && group % 8 == 0 && k % group == 0);
  Int4GroupMatrix m;
  m.n = n;
  m.k = k;
  m.group = group;
  m.q.assign(static_cast<size_t>(n * (k / 8)), 0);
  m.scale.assign(static_cast<size_t>(n * (k / group)), 0.0f);
  m.zero.assign(static_cast<size_t>(n * (k / group)), 0);
  return m;
}

absl::Status CheckInt4GroupMatrix(const Int4GroupMatrix& m) {
  if (m.n <= 0 || m.k <= 0 || m.group <= 0 || m.group % 8 != 0 || m.k % m.group != 0) {
    return absl::InternalError(absl::StrCat("int4 matrix n=", m.n, " k=", m.k, " group=", m.group,
                                            ": need n, k > 0, group % 8 == 0, k % group == 0"));
  }
  if (static_cast<int64_t>(m.q.size()) != m.n * (m.k / 8)) {
    return SizeError("int4 q", m.q.size(), m.n * (m.k / 8));
  }
  const int64_t groups = m.n * (m.k / m.group);
  if (static_cast<int64_t>(m.scale.size()) != groups)
    return SizeError("int4 scale", m.scale.size(), groups);
  if (static_cast<int64_t>(m.zero.size()) != groups)
    return SizeError("int4 zero", m.zero.size(), groups);
  for (uint8_t z : m.zero) {
    if (z > 15) return absl::InternalError(absl::StrCat("int4 zero point ", z, " > 15"));
  }
  return absl::OkStatus();
}

absl::Status CheckFp8Matrix(const Fp8Matrix& m) {
  if (m.n <= 0 || m.k <= 0) {
    return absl::InternalError(absl::StrCat("fp8 matrix n=", m.n, " k=", m.k, " is empty"));
  }
  if (static_cast<int64_t>(m.q.size()) != m.n * m.k)
    return SizeError("fp8 q", m.q.size(), m.n * m.k);
  if (m.scale.size() != 1 && static_cast<int64_t>(m.scale.size()) != m.n) {
    return SizeError("fp8 scale", m.scale.size(), m.n);
  }
  return absl::OkStatus();
}

void DequantizeInt4(const Int4GroupMatrix& m, float* out) {
  const int64_t groups_per_row = m.k / m.group;
  for (int64_t r = 0; r < m.n; ++r) {
    for (int64_t j = 0; j < m.k; ++j) {
      const int64_t g = r * groups_per_row + j / m.group;
      const int v = static_cast<int>(Int4At(m, r, j)) - static_cast<int>(m.zero[g]);
      out[r * m.k + j] = static_cast<float>(v) * m.scale[g];
    }
  }
}

void DequantizeFp8(const Fp8Matrix& m, float* out) {
  const bool per_tensor = m.scale.size() == 1;
  for (int64_t r = 0; r < m.n; ++r) {
    const float s = m.scale[per_tensor ? 0 : r];
    for (int64_t j = 0; j < m.k; ++j) out[r * m.k + j] = E4M3ToFloat(m.q[r * m.k + j]) * s;
  }
}

Int4GroupMatrix SliceInt4Rows(const Int4GroupMatrix& m, int64_t begin, int64_t end) {
  PKV_CHECK(0 <= begin && begin < end && end <= m.n);
  Int4GroupMatrix s = MakeInt4GroupMatrix(end - begin, m.k, m.group);
  const int64_t words = m.k / 8, groups = m.k / m.group;
  std::copy(m.q.begin() + begin * words, m.q.begin() + end * words, s.q.begin());
  std::copy(m.scale.begin() + begin * groups, m.scale.begin() + end * groups, s.scale.begin());
  std::copy(m.zero.begin() + begin * groups, m.zero.begin() + end * groups, s.zero.begin());
  return s;
}

absl::StatusOr<Int4GroupMatrix> SliceInt4Columns(const Int4GroupMatrix& m, int64_t begin,
                                                 int64_t end) {
  PKV_CHECK(0 <= begin && begin < end && end <= m.k);
  if (begin % m.group != 0 || end % m.group != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input columns [", begin, ", ", end, ") of a 4-bit matrix do not fall on its group size ",
        m.group, ": tensor parallelism must split quantized tensors on group boundaries"));
  }
  Int4GroupMatrix s = MakeInt4GroupMatrix(m.n, end - begin, m.group);
  const int64_t words = m.k / 8, groups = m.k / m.group;
  const int64_t s_words = s.k / 8, s_groups = s.k / s.group;
  for (int64_t r = 0; r < m.n; ++r) {
    std::copy_n(m.q.begin() + r * words + begin / 8, s_words, s.q.begin() + r * s_words);
    const int64_t g0 = r * groups + begin / m.group;
    std::copy_n(m.scale.begin() + g0, s_groups, s.scale.begin() + r * s_groups);
    std::copy_n(m.zero.begin() + g0, s_groups, s.zero.begin() + r * s_groups);
  }
  return s;
}

Fp8Matrix SliceFp8Rows(const Fp8Matrix& m, int64_t begin, int64_t end) {
  PKV_CHECK(0 <= begin && begin < end && end <= m.n);
  Fp8Matrix s;
  s.n = end - begin;
  s.k = m.k;
  s.q.assign(m.q.begin() + begin * m.k, m.q.begin() + end * m.k);
  if (m.scale.size() == 1) {
    s.scale = m.scale;
  } else {
    s.scale.assign(m.scale.begin() + begin, m.scale.begin() + end);
  }
  return s;
}

Fp8Matrix SliceFp8Columns(const Fp8Matrix& m, int64_t begin, int64_t end) {
  PKV_CHECK(0 <= begin && begin < end && end <= m.k);
  Fp8Matrix s;
  s.n = m.n;
  s.k = end - begin;
  s.scale = m.scale;  // per output channel or per tensor: unchanged by a column split
  s.q.resize(static_cast<size_t>(s.n * s.k));
  for (int64_t r = 0; r < m.n; ++r) {
    std::copy_n(m.q.begin() + r * m.k + begin, s.k, s.q.begin() + r * s.k);
  }
  return s;
}

}  // namespace pkv
