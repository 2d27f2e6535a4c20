#include "kernels/model/gemv_quant.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/common/float16.h"

namespace pkv::gpu {
namespace {

using decode::DType;

uint16_t ToBits(float v, DType dtype) {
  return dtype == DType::kBFloat16 ? ToBFloat16(v).bits : ToHalf(v).bits;
}
float FromBits(uint16_t b, DType dtype) {
  return dtype == DType::kBFloat16 ? ToFloat(BFloat16{b}) : ToFloat(Half{b});
}
// The exponent pattern that turns a nibble q in the low mantissa bits into magic + q.
float Int4Magic(DType dtype) { return dtype == DType::kBFloat16 ? 128.f : 1024.f; }

uint32_t Nibble(const uint32_t* q, int64_t k, int64_t r, int64_t j) {
  return (q[r * (k / 8) + j / 8] >> (4 * (j % 8))) & 0xfu;
}

absl::Status CheckScales(const float* scale, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    if (!std::isfinite(scale[i])) {
      return absl::InvalidArgumentError(absl::StrCat("gemv quant: scale ", i, " is not finite"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

float E4m3ToFloat(uint8_t bits) {
  const int exp = (bits >> 3) & 0xf, mant = bits & 7;
  const float sign = (bits & 0x80) != 0 ? -1.f : 1.f;
  if (exp == 0xf && mant == 7) return std::nanf("");
  if (exp == 0) return sign * std::ldexp(static_cast<float>(mant), -9);  // subnormal: m/8 * 2^-6
  return sign * std::ldexp(static_cast<float>(8 + mant), exp - 10);      // (1 + m/8) * 2^(e-7)
}

absl::StatusOr<GemvInt4Weights> RepackInt4ForGemv(int64_t n, int64_t k, int32_t group,
                                                  const uint32_t* q, const float* scale,
                                                  const uint8_t* zero, DType dtype) {
  if (n <= 0 || k <= 0 || k % 128 != 0 || group <= 0 || group % 128 != 0 || k % group != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("gemv int4: [", n, "][", k, "] with group ", group,
                     " needs k a multiple of 128 and the group a multiple of 128 dividing k"));
  }
  const int64_t groups = k / group;
  PKV_RETURN_IF_ERROR(CheckScales(scale, n * groups));
  for (int64_t i = 0; i < n * groups; ++i) {
    if (zero[i] > 15) {
      return absl::InvalidArgumentError(
          absl::StrCat("gemv int4: zero point ", int{zero[i]}, " at ", i, " exceeds 15"));
    }
  }
  GemvInt4Weights out;
  out.q.assign(n * (k / 8), 0u);
  out.scales.resize(n * (k / 128));
  const float magic = Int4Magic(dtype);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = 0; j < k; ++j) {
      const int64_t b = j / 128, u = (j % 128) / 32, c = (j % 32) / 8, i = j % 8;
      const int64_t word = r * (k / 8) + 16 * b + 4 * c + u;
      out.q[word] |= Nibble(q, k, r, j) << (4 * (i / 2 + 4 * (i % 2)));
    }
    for (int64_t b = 0; b < k / 128; ++b) {
      const int64_t g = r * groups + b * 128 / group;
      out.scales[r * (k / 128) + b] =
          uint32_t{ToBits(scale[g], dtype)} | uint32_t{ToBits(magic + zero[g], dtype)} << 16;
    }
  }
  return out;
}

absl::StatusOr<GemvFp8Weights> RepackFp8ForGemv(int64_t n, int64_t k, const uint8_t* q,
                                                const float* scale, int64_t scale_count) {
  if (n <= 0 || k <= 0 || k % 64 != 0 || (scale_count != n && scale_count != 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("gemv fp8: [", n, "][", k, "] with ", scale_count,
                     " scales needs k a multiple of 64 and n or 1 scales"));
  }
  PKV_RETURN_IF_ERROR(CheckScales(scale, scale_count));
  GemvFp8Weights out;
  out.q.resize(n * k);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = 0; j < k; ++j) {
      const uint8_t v = q[r * k + j];
      if ((v & 0x7f) == 0x7f) {
        return absl::InvalidArgumentError(
            absl::StrCat("gemv fp8: weight [", r, "][", j, "] is an e4m3 NaN"));
      }
      const int64_t b = j / 64, u = (j % 64) / 32, c = (j % 32) / 8, i = j % 8;
      out.q[r * k + 64 * b + 16 * c + 8 * u + i] = v;
    }
  }
  out.scales.assign(scale, scale + scale_count);
  return out;
}

std::vector<float> DequantizeInt4Host(int64_t n, int64_t k, int32_t group, const uint32_t* q,
                                      const float* scale, const uint8_t* zero) {
  std::vector<float> w(n * k);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = 0; j < k; ++j) {
      const int64_t g = r * (k / group) + j / group;
      w[r * k + j] = (static_cast<float>(Nibble(q, k, r, j)) - zero[g]) * scale[g];
    }
  }
  return w;
}

std::vector<float> DequantizeFp8Host(int64_t n, int64_t k, const uint8_t* q, const float* scale,
                                     int64_t scale_count) {
  std::vector<float> w(n * k);
  for (int64_t r = 0; r < n; ++r) {
    const float s = scale[scale_count == 1 ? 0 : r];
    for (int64_t j = 0; j < k; ++j) w[r * k + j] = E4m3ToFloat(q[r * k + j]) * s;
  }
  return w;
}

std::vector<uint16_t> DequantizeInt4ToDtype(int64_t n, int64_t k, int32_t group, const uint32_t* q,
                                            const float* scale, const uint8_t* zero, DType dtype) {
  std::vector<uint16_t> w(n * k);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = 0; j < k; ++j) {
      const int64_t g = r * (k / group) + j / group;
      const float s = FromBits(ToBits(scale[g], dtype), dtype);
      // (q - zero) * s is exact in float (a 4-bit by 11-bit product): one rounding, to dtype.
      w[r * k + j] = ToBits((static_cast<float>(Nibble(q, k, r, j)) - zero[g]) * s, dtype);
    }
  }
  return w;
}

std::vector<uint16_t> DequantizeFp8ToDtype(int64_t n, int64_t k, const uint8_t* q,
                                           const float* scale, int64_t scale_count, DType dtype) {
  const std::vector<float> f = DequantizeFp8Host(n, k, q, scale, scale_count);
  std::vector<uint16_t> w(f.size());
  for (size_t i = 0; i < f.size(); ++i) w[i] = ToBits(f[i], dtype);
  return w;
}

}  // namespace pkv::gpu
