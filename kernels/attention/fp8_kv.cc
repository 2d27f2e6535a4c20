#include "kernels/attention/fp8_kv.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernels/attention/reference_internal.h"

namespace pkv {
namespace {

// Dequantizes FP8 codes through 256-entry tables (exactly Fp8ToFloat(code) * scale).
struct Fp8Kv {
  explicit Fp8Kv(const Fp8PagedKvView& v) : view(v) {
    for (int c = 0; c < 256; ++c) {
      const float x = Fp8ToFloat(static_cast<uint8_t>(c), v.format);
      k_table[c] = x * v.scales.k;
      v_table[c] = x * v.scales.v;
    }
  }
  const KvShape& shape() const { return view.codes.shape; }
  int64_t Offset(int64_t page, int32_t head, int32_t slot) const {
    return view.codes.Offset(page, head, slot);
  }
  float K(int64_t i) const { return k_table[view.codes.k[i]]; }
  float V(int64_t i) const { return v_table[view.codes.v[i]]; }

  const Fp8PagedKvView& view;
  float k_table[256];
  float v_table[256];
};

}  // namespace

const char* KvCacheDtypeName(KvCacheDtype d) {
  switch (d) {
    case KvCacheDtype::kFp8E4M3:
      return "fp8_e4m3";
    case KvCacheDtype::kFp8E5M2:
      return "fp8_e5m2";
    default:
      return "auto";
  }
}

absl::StatusOr<KvCacheDtype> ParseKvCacheDtype(const std::string& name) {
  for (KvCacheDtype d : {KvCacheDtype::kAuto, KvCacheDtype::kFp8E4M3, KvCacheDtype::kFp8E5M2}) {
    if (name == KvCacheDtypeName(d)) return d;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("kv cache dtype '", name, "'; supported: auto, fp8_e4m3, fp8_e5m2"));
}

float Fp8ScaleForAbsMax(float abs_max, Fp8Format format) {
  if (!(abs_max > 0.0f) || !std::isfinite(abs_max)) return 1.0f;
  return abs_max / Fp8MaxFinite(format);
}

void QuantizeFp8(const float* x, int64_t n, float scale, Fp8Format format, uint8_t* out) {
  const float inv = 1.0f / scale;
  for (int64_t i = 0; i < n; ++i) out[i] = FloatToFp8(x[i] * inv, format);
}

template <typename T>
void ReferenceDecodeAttentionFp8(const T* q, const Fp8PagedKvView& kv, const BlockTableView& table,
                                 float scale, float* out, float* lse) {
  internal::DecodeLoops(q, Fp8Kv(kv), table, scale, out, lse);
}

template <typename T>
void ReferencePrefillAttentionFp8(const T* q, const int32_t* qo_indptr, const Fp8PagedKvView& kv,
                                  const BlockTableView& table, float scale, float* out) {
  internal::PrefillLoops(q, qo_indptr, Fp8Kv(kv), table, scale, out);
}

#define PKV_INSTANTIATE_FP8_REFERENCE(T)                                                         \
  template void ReferenceDecodeAttentionFp8<T>(const T*, const Fp8PagedKvView&,                  \
                                               const BlockTableView&, float, float*, float*);    \
  template void ReferencePrefillAttentionFp8<T>(const T*, const int32_t*, const Fp8PagedKvView&, \
                                                const BlockTableView&, float, float*);
PKV_INSTANTIATE_FP8_REFERENCE(float)
PKV_INSTANTIATE_FP8_REFERENCE(Half)
PKV_INSTANTIATE_FP8_REFERENCE(BFloat16)

}  // namespace pkv
