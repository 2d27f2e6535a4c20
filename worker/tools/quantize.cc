#include "worker/tools/quantize.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernels/common/float16.h"

namespace pkv {
namespace {

float RoundToHalf(float x) { return ToFloat(ToHalf(x)); }

float RoundTo(DType dtype, float x) {
  if (dtype == DType::kF16) return ToFloat(ToHalf(x));
  if (dtype == DType::kBF16) return ToFloat(ToBFloat16(x));
  return x;
}

uint8_t Clamp15(float v) { return static_cast<uint8_t>(std::min(15.0f, std::max(0.0f, v))); }

// Fills the group's scale and zero point and its 4-bit values from the scale and zero point.
void QuantizeGroup(const float* w, int64_t r, int64_t j0, float s, uint8_t z, Int4GroupMatrix* m) {
  const int64_t g = r * (m->k / m->group) + j0 / m->group;
  m->scale[g] = s;
  m->zero[g] = z;
  for (int64_t j = j0; j < j0 + m->group; ++j) {
    OrInt4(m, r, j, Clamp15(std::nearbyint(w[r * m->k + j] / s) + static_cast<float>(z)));
  }
}

template <typename GroupParams>
Int4GroupMatrix QuantizeInt4(const float* w, int64_t n, int64_t k, int32_t group,
                             GroupParams params) {
  Int4GroupMatrix m = MakeInt4GroupMatrix(n, k, group);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j0 = 0; j0 < k; j0 += group) {
      const float* begin = w + r * k + j0;
      const auto [lo, hi] = std::minmax_element(begin, begin + group);
      float s = 0;
      uint8_t z = 0;
      params(*lo, *hi, &s, &z);
      QuantizeGroup(w, r, j0, s, z, &m);
    }
  }
  return m;
}

}  // namespace

Int4GroupMatrix QuantizeAwq(const float* w, int64_t n, int64_t k, int32_t group) {
  return QuantizeInt4(w, n, k, group, [](float lo, float hi, float* s, uint8_t* z) {
    *s = RoundToHalf(std::max(hi - lo, 1e-5f) / 15.0f);
    *z = Clamp15(-std::nearbyint(lo / *s));
  });
}

Int4GroupMatrix QuantizeGptq(const float* w, int64_t n, int64_t k, int32_t group, bool sym) {
  return QuantizeInt4(w, n, k, group, [sym](float lo, float hi, float* s, uint8_t* z) {
    lo = std::min(lo, 0.0f);
    hi = std::max(hi, 0.0f);
    if (sym) {
      hi = std::max(-lo, hi);
      if (lo < 0) lo = -hi;
    }
    if (lo == 0 && hi == 0) {
      lo = -1;
      hi = 1;
    }
    *s = RoundToHalf((hi - lo) / 15.0f);
    *z = sym ? 8 : Clamp15(std::nearbyint(-lo / *s));
  });
}

Fp8Matrix QuantizeFp8(const float* w, int64_t n, int64_t k, bool per_tensor, DType scale_dtype) {
  Fp8Matrix m;
  m.n = n;
  m.k = k;
  m.q.resize(static_cast<size_t>(n * k));
  auto scale_of = [&](int64_t r0, int64_t r1) {
    float amax = 0;
    for (int64_t i = r0 * k; i < r1 * k; ++i) amax = std::max(amax, std::fabs(w[i]));
    return RoundTo(scale_dtype, amax == 0 ? 1.0f : amax / 448.0f);
  };
  if (per_tensor) {
    m.scale = {scale_of(0, n)};
  } else {
    for (int64_t r = 0; r < n; ++r) m.scale.push_back(scale_of(r, r + 1));
  }
  for (int64_t r = 0; r < n; ++r) {
    const float s = m.scale[per_tensor ? 0 : r];
    for (int64_t j = 0; j < k; ++j) m.q[r * k + j] = FloatToE4M3(w[r * k + j] / s);
  }
  return m;
}

absl::StatusOr<QuantConfig> QuantConfigFromFlags(const QuantFlags& f) {
  QuantConfig q;
  if (f.method == "none") return q;
  if (f.method == "awq" || f.method == "gptq") {
    q.method = f.method == "awq" ? QuantMethod::kAwq : QuantMethod::kGptq;
    if (f.group_size <= 0 || f.group_size % 8 != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--group_size must be a positive multiple of 8, got ", f.group_size));
    }
    q.group_size = f.group_size;
    q.sym = q.method == QuantMethod::kGptq && f.gptq_sym;
    if (f.gptq_format != "gptq" && f.gptq_format != "gptq_v2") {
      return absl::InvalidArgumentError(
          absl::StrCat("--gptq_format must be gptq or gptq_v2, got '", f.gptq_format, "'"));
    }
    q.gptq_v2 = q.method == QuantMethod::kGptq && f.gptq_format == "gptq_v2";
    return q;
  }
  if (f.method == "fp8") {
    q.method = QuantMethod::kFp8;
    if (f.fp8_strategy != "channel" && f.fp8_strategy != "tensor") {
      return absl::InvalidArgumentError(
          absl::StrCat("--fp8_strategy must be channel or tensor, got '", f.fp8_strategy, "'"));
    }
    q.fp8_per_tensor = f.fp8_strategy == "tensor";
    q.not_converted = {"lm_head"};
    return q;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--quant must be none, awq, gptq or fp8, got '", f.method, "'"));
}

std::string QuantizationConfigJson(const QuantConfig& q) {
  switch (q.method) {
    case QuantMethod::kAwq:
      return absl::StrCat(
          "{\"bits\": 4, \"group_size\": ", q.group_size,
          ", \"modules_to_not_convert\": null, \"quant_method\": \"awq\", \"version\": \"gemm\", "
          "\"zero_point\": true}");
    case QuantMethod::kGptq:
      return absl::StrCat(
          "{\"bits\": 4, \"checkpoint_format\": \"", q.gptq_v2 ? "gptq_v2" : "gptq",
          "\", \"damp_percent\": 0.01, \"desc_act\": false, \"group_size\": ", q.group_size,
          ", \"model_file_base_name\": null, \"model_name_or_path\": null, \"quant_method\": "
          "\"gptq\", \"static_groups\": false, \"sym\": ",
          q.sym ? "true" : "false", ", \"true_sequential\": true}");
    case QuantMethod::kFp8:
      return absl::StrCat(
          "{\"config_groups\": {\"group_0\": {\"input_activations\": {\"actorder\": null, "
          "\"block_structure\": null, \"dynamic\": true, \"group_size\": null, \"num_bits\": 8, "
          "\"observer\": null, \"observer_kwargs\": {}, \"strategy\": \"token\", \"symmetric\": "
          "true, \"type\": \"float\"}, \"output_activations\": null, \"targets\": [\"Linear\"], "
          "\"weights\": {\"actorder\": null, \"block_structure\": null, \"dynamic\": false, "
          "\"group_size\": null, \"num_bits\": 8, \"observer\": \"minmax\", \"observer_kwargs\": "
          "{}, \"strategy\": \"",
          q.fp8_per_tensor ? "tensor" : "channel",
          "\", \"symmetric\": true, \"type\": \"float\"}}}, \"format\": \"float-quantized\", "
          "\"global_compression_ratio\": null, \"ignore\": [\"lm_head\"], \"kv_cache_scheme\": "
          "null, \"quant_method\": \"compressed-tensors\", \"quantization_status\": "
          "\"compressed\"}");
    case QuantMethod::kNone:
      break;
  }
  return "null";
}

}  // namespace pkv
