// FP8 coding (kernels/common/fp8.h) and the FP8 KV reference (kernels/attention/fp8_kv.h): every
// one of the 256 codes of both formats against an independent decoding, rounding and saturation,
// NaN policy, and the FP8 reference attention against the exact reference over dequantized pages.
#include "kernels/attention/fp8_kv.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/attention/reference.h"
#include "kernels/common/float16.h"
#include "kernels/common/fp8.h"

namespace pkv {
namespace {

TEST(E4M3Test, DecodesTheFormatsLandmarks) {
  EXPECT_EQ(E4M3ToFloat(0x00), 0.0f);
  EXPECT_EQ(E4M3ToFloat(0x38), 1.0f);    // exponent 7 = bias
  EXPECT_EQ(E4M3ToFloat(0x7e), 448.0f);  // largest finite
  EXPECT_EQ(E4M3ToFloat(0xfe), -448.0f);
  EXPECT_EQ(E4M3ToFloat(0x01), std::ldexp(1.0f, -9));  // smallest subnormal
  EXPECT_EQ(E4M3ToFloat(0x08), std::ldexp(1.0f, -6));  // smallest normal
  EXPECT_EQ(E4M3ToFloat(0x3c), 1.5f);
  EXPECT_TRUE(std::isnan(E4M3ToFloat(0x7f)));
  EXPECT_TRUE(std::isnan(E4M3ToFloat(0xff)));
}

TEST(E4M3Test, EveryFiniteCodeRoundTrips) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) continue;
    const float v = E4M3ToFloat(static_cast<uint8_t>(c));
    if (c == 0x80) {
      EXPECT_EQ(FloatToE4M3(v), 0x80);  // -0 keeps its sign
      continue;
    }
    EXPECT_EQ(FloatToE4M3(v), c) << "code " << c << " value " << v;
  }
}

TEST(E4M3Test, RoundsToNearestEvenAndSaturates) {
  EXPECT_EQ(FloatToE4M3(1.0625f), 0x38);  // halfway 1 and 1.125: even mantissa (1.0)
  EXPECT_EQ(FloatToE4M3(1.1875f), 0x3a);  // halfway 1.125 and 1.25: even (1.25)
  EXPECT_EQ(FloatToE4M3(1.07f), 0x39);    // nearer 1.125
  EXPECT_EQ(FloatToE4M3(1000.0f), 0x7e);  // no infinity: saturate
  EXPECT_EQ(FloatToE4M3(-1e30f), 0xfe);
  EXPECT_EQ(FloatToE4M3(INFINITY), 0x7e);
  EXPECT_EQ(FloatToE4M3(NAN), 0x7f);
  EXPECT_EQ(FloatToE4M3(std::ldexp(1.0f, -10)), 0x00);   // halfway 0 and 2^-9: even (0)
  EXPECT_EQ(FloatToE4M3(std::ldexp(3.0f, -10)), 0x02);   // halfway 2^-9 and 2^-8: even (2)
  EXPECT_EQ(FloatToE4M3(std::ldexp(15.5f, -10)), 0x08);  // rounds up into the normals
  EXPECT_EQ(FloatToE4M3(15.5f), 0x58);  // halfway 15 (0x57) and 16 (0x58): even mantissa, 16
}

// An independent decoding of all 256 E4M3 codes: sign * 2^(e-7) * (1 + m/8), subnormal m * 2^-9.
TEST(E4M3Test, TableOfAllCodesIsExact) {
  for (int c = 0; c < 256; ++c) {
    const int e = (c >> 3) & 15, m = c & 7;
    const double sign = (c & 0x80) ? -1.0 : 1.0;
    const float got = E4M3ToFloat(static_cast<uint8_t>(c));
    if (e == 15 && m == 7) {
      EXPECT_TRUE(std::isnan(got)) << c;
      continue;
    }
    const double want =
        e == 0 ? sign * m * std::ldexp(1.0, -9) : sign * std::ldexp(1.0 + m / 8.0, e - 7);
    EXPECT_EQ(got, static_cast<float>(want)) << "code " << c;
    EXPECT_EQ(Fp8ToFloat(static_cast<uint8_t>(c), Fp8Format::kE4M3), got);
  }
}

// E5M2 is the top byte of an IEEE fp16: the fp16 decoder is an independent check of all codes.
TEST(E5M2Test, TableOfAllCodesMatchesFp16TopByte) {
  for (int c = 0; c < 256; ++c) {
    const float want = ToFloat(Half{static_cast<uint16_t>(c << 8)});
    const float got = E5M2ToFloat(static_cast<uint8_t>(c));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << c;
    } else {
      EXPECT_EQ(got, want) << "code " << c;
    }
  }
  EXPECT_EQ(E5M2ToFloat(0x7b), 57344.0f);
  EXPECT_EQ(E5M2ToFloat(0x01), std::ldexp(1.0f, -16));
  EXPECT_TRUE(std::isinf(E5M2ToFloat(0x7c)));
}

TEST(E5M2Test, EveryFiniteCodeRoundTripsAndInfSaturates) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) >= 0x7c) continue;
    const float v = E5M2ToFloat(static_cast<uint8_t>(c));
    EXPECT_EQ(FloatToE5M2(v), c) << "code " << c << " value " << v;
  }
  EXPECT_EQ(FloatToE5M2(INFINITY), 0x7b);  // satfinite: no inf in the cache
  EXPECT_EQ(FloatToE5M2(-1e9f), 0xfb);
  EXPECT_EQ(FloatToE5M2(61439.0f), 0x7b);  // just under the halfway point to 2^16: saturates
  EXPECT_EQ(FloatToE5M2(NAN), 0x7f);
  EXPECT_TRUE(std::isnan(E5M2ToFloat(FloatToE5M2(NAN))));
  EXPECT_EQ(FloatToE5M2(1.125f), 0x3c);                 // halfway 1 and 1.25: even mantissa (1.0)
  EXPECT_EQ(FloatToE5M2(1.375f), 0x3e);                 // halfway 1.25 and 1.5: even (1.5)
  EXPECT_EQ(FloatToE5M2(std::ldexp(1.0f, -17)), 0x00);  // halfway 0 and 2^-16: even (0)
}

TEST(E4M3Test, RoundingJustBelowSaturationStaysFinite) {
  EXPECT_EQ(FloatToE4M3(447.9f), 0x7e);
  EXPECT_EQ(FloatToE4M3(464.0f), 0x7e);  // halfway 448 and 480 (not a code): saturates
  EXPECT_EQ(FloatToE4M3(-0.0f), 0x80);
}

TEST(KvCacheDtypeTest, ParsesNamesAndRejectsOthers) {
  EXPECT_EQ(*ParseKvCacheDtype("auto"), KvCacheDtype::kAuto);
  EXPECT_EQ(*ParseKvCacheDtype("fp8_e4m3"), KvCacheDtype::kFp8E4M3);
  EXPECT_EQ(*ParseKvCacheDtype("fp8_e5m2"), KvCacheDtype::kFp8E5M2);
  const auto bad = ParseKvCacheDtype("fp8");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("fp8_e4m3"), std::string::npos);
}

TEST(Fp8KvTest, ScaleMapsAbsMaxOntoTheLargestCode) {
  EXPECT_FLOAT_EQ(Fp8ScaleForAbsMax(896.0f, Fp8Format::kE4M3), 2.0f);
  EXPECT_EQ(Fp8ScaleForAbsMax(0.0f, Fp8Format::kE4M3), 1.0f);
  EXPECT_EQ(Fp8ScaleForAbsMax(NAN, Fp8Format::kE5M2), 1.0f);
  const float x[3] = {896.0f, -2000.0f, 1.0f};
  uint8_t q[3];
  QuantizeFp8(x, 3, 2.0f, Fp8Format::kE4M3, q);
  EXPECT_EQ(q[0], 0x7e);
  EXPECT_EQ(q[1], 0xfe);  // beyond the calibrated range: saturates, never NaN
  EXPECT_EQ(q[2], FloatToE4M3(0.5f));
}

// Random FP8 pages in a shuffled block table: the FP8 reference equals the float reference over
// the dequantized pages bit for bit (same loops, same float values), for both formats.
class Fp8ReferenceTest : public ::testing::TestWithParam<Fp8Format> {};

TEST_P(Fp8ReferenceTest, EqualsFloatReferenceOverDequantizedPages) {
  const Fp8Format fmt = GetParam();
  const KvShape s{8, 2, 64, 4, 1};
  const int32_t lengths[3] = {0, 7, 13};
  const int32_t indptr[4] = {0, 0, 2, 6};
  const int32_t pages[6] = {5, 1, 0, 3, 4, 2};
  const BlockTableView table{indptr, pages, lengths, 3};
  const int64_t elems = 6 * s.page_elems();
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> kf(elems), vf(elems);
  for (auto& x : kf) x = normal(rng);
  for (auto& x : vf) x = normal(rng);
  const Fp8KvScales scales{0.05f, 0.02f};
  std::vector<uint8_t> kq(elems), vq(elems);
  QuantizeFp8(kf.data(), elems, scales.k, fmt, kq.data());
  QuantizeFp8(vf.data(), elems, scales.v, fmt, vq.data());
  std::vector<float> kd(elems), vd(elems);
  for (int64_t i = 0; i < elems; ++i) {
    kd[i] = Fp8ToFloat(kq[i], fmt) * scales.k;
    vd[i] = Fp8ToFloat(vq[i], fmt) * scales.v;
    // Quantization error: half a step of the format at that magnitude, or saturation.
    EXPECT_LE(std::fabs(kd[i] - kf[i]),
              std::fabs(kf[i]) * (fmt == Fp8Format::kE4M3 ? 0.0625f : 0.125f) + 1e-3f);
  }
  std::vector<float> q(20 * s.num_q_heads * s.head_dim);
  for (auto& x : q) x = normal(rng);
  const float scale = 0.125f;
  const Fp8PagedKvView fp8{{kq.data(), vq.data(), 6, s}, fmt, scales};
  const PagedKvView<const float> ref{kd.data(), vd.data(), 6, s};
  const int64_t out_elems = 3 * s.num_q_heads * s.head_dim;
  std::vector<float> out(out_elems), want(out_elems), lse(3 * s.num_q_heads), want_lse(lse.size());
  ReferenceDecodeAttentionFp8(q.data(), fp8, table, scale, out.data(), lse.data());
  ReferenceDecodeAttention(q.data(), ref, table, scale, want.data(), want_lse.data());
  EXPECT_EQ(out, want);
  for (size_t i = 0; i < lse.size(); ++i) EXPECT_EQ(lse[i], want_lse[i]) << i;
  EXPECT_TRUE(std::isinf(lse[0]));  // row 0 has no tokens
  // Prefill: 1 and 4 new tokens of rows 1 and 2.
  const int32_t qo[4] = {0, 0, 1, 5};
  std::vector<float> pout(5 * s.num_q_heads * s.head_dim), pwant(pout.size());
  ReferencePrefillAttentionFp8(q.data(), qo, fp8, table, scale, pout.data());
  ReferencePrefillAttention(q.data(), qo, ref, table, scale, pwant.data());
  EXPECT_EQ(pout, pwant);
}

INSTANTIATE_TEST_SUITE_P(Formats, Fp8ReferenceTest,
                         ::testing::Values(Fp8Format::kE4M3, Fp8Format::kE5M2));

}  // namespace
}  // namespace pkv
