// FP8 KV cache: the format choice, the per-layer scales, quantization of K/V rows into pages and
// the CPU reference attention over FP8 pages (the oracle of the FP8 decode and prefill kernels and
// of the CPU backend's FP8 mode).
//
// Scales: one float per (layer, K or V). A cached value is Fp8ToFloat(code) * scale; writing x
// stores FloatToFp8(x / scale) (round to nearest even, saturating at the format's largest finite
// value, NaN -> 0x7f). Per-layer rather than per-head scales because the kernels then fold the K
// scale into the softmax scale and the V scale into the output once per launch: no extra loads in
// the token loop. Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "kernels/attention/kv_layout.h"
#include "kernels/common/fp8.h"

namespace pkv {

// What the KV cache stores. kAuto: the model's activation dtype (today's behaviour).
enum class KvCacheDtype : int32_t { kAuto = 0, kFp8E4M3 = 1, kFp8E5M2 = 2 };

// "auto", "fp8_e4m3", "fp8_e5m2".
const char* KvCacheDtypeName(KvCacheDtype d);
// INVALID_ARGUMENT listing the supported names for anything else.
absl::StatusOr<KvCacheDtype> ParseKvCacheDtype(const std::string& name);
inline bool IsFp8(KvCacheDtype d) { return d != KvCacheDtype::kAuto; }
// REQUIRES: IsFp8(d).
inline Fp8Format Fp8FormatOf(KvCacheDtype d) {
  return d == KvCacheDtype::kFp8E4M3 ? Fp8Format::kE4M3 : Fp8Format::kE5M2;
}

struct Fp8KvScales {
  float k = 1.0f;
  float v = 1.0f;
};

// The scale that maps |x| <= abs_max onto the format's full range (abs_max / max finite), or 1 for
// abs_max == 0 or non-finite (nothing to calibrate against).
float Fp8ScaleForAbsMax(float abs_max, Fp8Format format);

// out[i] = FloatToFp8(x[i] / scale). REQUIRES: scale > 0.
void QuantizeFp8(const float* x, int64_t n, float scale, Fp8Format format, uint8_t* out);

// One layer's FP8 K and V pages ([num_pages][num_kv_heads][page_size][head_dim] codes each).
struct Fp8PagedKvView {
  PagedKvView<const uint8_t> codes;
  Fp8Format format = Fp8Format::kE4M3;
  Fp8KvScales scales;
};

// ReferenceDecodeAttention / ReferencePrefillAttention (reference.h) over dequantized FP8 pages:
// same shapes, units and length-0 conventions. T: float, Half, BFloat16 (the query's type).
template <typename T>
void ReferenceDecodeAttentionFp8(const T* q, const Fp8PagedKvView& kv, const BlockTableView& table,
                                 float scale, float* out, float* lse);
template <typename T>
void ReferencePrefillAttentionFp8(const T* q, const int32_t* qo_indptr, const Fp8PagedKvView& kv,
                                  const BlockTableView& table, float scale, float* out);

}  // namespace pkv
