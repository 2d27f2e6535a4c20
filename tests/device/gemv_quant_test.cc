// Quantized weights in the fused GEMV at the real model shapes, and the dequantize kernel.
//   ModelShapes: every projection of the 8B (hidden 4096, 32/8 heads of 128, intermediate 14336)
//     and 1B (2048, 32/8 heads of 64, 8192) Llama shapes, tokens cycling 1..8, in every weight
//     format, against the dequantized-weight reference (gemv_test_util.h). fp16 runs the 1B
//     shapes only (the 8B ones add CPU reference time, not coverage).
//   Dequantize: LaunchDequantizeGemvWeights bit-exact against DequantizeInt4ToDtype /
//     DequantizeFp8ToDtype, with scales not representable in the dtype (the documented rounding
//     of 4-bit scales), per-row and per-tensor fp8 scales, groups of 128 and 256.
#include "kernels/model/gemv_quant.h"

#include <cuda_runtime_api.h>

#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/device/gemv_test_util.h"
#include "tests/harness/test_seed.h"

namespace pkv::gemv_test {
namespace {

using gpu::GemvWeightFormat;

class GemvModelShapesTest : public ::testing::TestWithParam<GemvCase> {
 protected:
  std::mt19937 rng_{::pkv::testing::TestSeed()};
};

TEST_P(GemvModelShapesTest, ProjectionsMatchDequantizedReference) {
  struct Shape {
    const char* name;
    int32_t n, k;
    bool rms;  // the projection's input is the normalised residual
  };
  std::vector<Shape> shapes = {{"1B qkv", 3072, 2048, true},
                               {"1B o", 2048, 2048, false},
                               {"1B gate/up", 16384, 2048, true},
                               {"1B down", 2048, 8192, false}};
  if (GetParam().bf16) {
    shapes.insert(shapes.end(), {{"8B qkv", 6144, 4096, true},
                                 {"8B o", 4096, 4096, false},
                                 {"8B gate/up", 28672, 4096, true},
                                 {"8B down", 4096, 14336, false}});
  }
  const gpu::GemvDevice dev = RealDevice(GetParam());
  int32_t tokens = 1;
  for (const Shape& sh : shapes) {
    const Problem p = MakeProblem(GetParam(), sh.n, sh.k, tokens, sh.rms, &rng_);
    DeviceProblem d = Stage(p, 16, dev);
    const int64_t out_bytes = int64_t{tokens} * sh.n * 4;
    DeviceBuffer y = Poisoned(out_bytes + 64);
    d.args.y = y.get();
    d.args.y_f32 = true;
    const std::string what = absl::StrCat(sh.name, " ", What(p, d.args, "store"));
    ASSERT_TRUE(gpu::LaunchGemv(d.args, nullptr).ok()) << what;
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
    const std::vector<uint8_t> got = Download<uint8_t>(y, out_bytes + 64);
    for (int i = 0; i < 64; ++i) ASSERT_EQ(got[out_bytes + i], 0xff) << what << ": overrun";
    EXPECT_EQ(CheckStore(p, got, /*f32=*/true, what), 0) << what;
    tokens = tokens % gpu::kGemvMaxTokens + 1;
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, GemvModelShapesTest, ::testing::ValuesIn(AllCases()),
                         [](const ::testing::TestParamInfo<GemvCase>& i) {
                           return CaseName(i.param);
                         });

class GemvDequantizeTest : public ::testing::TestWithParam<bool> {
 protected:
  bool bf16() const { return GetParam(); }
  gpu::DType dtype() const { return bf16() ? gpu::DType::kBFloat16 : gpu::DType::kFloat16; }
  std::mt19937 rng_{::pkv::testing::TestSeed()};
};

// Runs the dequantize kernel on packed weights; returns the [n][k] 16-bit output.
std::vector<uint16_t> RunDequantize(gpu::GemvDequantArgs a, const std::vector<uint8_t>& packed,
                                    const std::vector<uint8_t>& scales) {
  DeviceBuffer w = Upload(packed), s = Upload(scales);
  const int64_t bytes = a.n * a.k * 2;
  DeviceBuffer out = Poisoned(bytes + 64);
  a.w = w.get();
  a.w_scales = s.get();
  a.out = out.get();
  EXPECT_TRUE(gpu::LaunchDequantizeGemvWeights(a, nullptr).ok());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<uint16_t> got = Download<uint16_t>(out, a.n * a.k + 32);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(got[a.n * a.k + i], 0xffff) << "overrun";
  return std::vector<uint16_t>(got.begin(), got.begin() + a.n * a.k);
}

int CountMismatches(const std::vector<uint16_t>& got, const std::vector<uint16_t>& want,
                    const std::string& what) {
  int bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i] != want[i] && bad++ < 3) {
      ADD_FAILURE() << what << " element " << i << " got 0x" << std::hex << got[i] << " want 0x"
                    << want[i];
    }
  }
  return bad;
}

TEST_P(GemvDequantizeTest, Int4BitExact) {
  struct Shape {
    int64_t n, k;
    int32_t group;
  };
  for (const Shape& sh : std::vector<Shape>{{37, 128, 128}, {300, 1024, 256}, {64, 4096, 128}}) {
    std::vector<uint32_t> q(sh.n * sh.k / 8);
    for (uint32_t& v : q) v = rng_();
    std::vector<uint8_t> zero(sh.n * sh.k / sh.group);
    std::vector<float> scale(zero.size());
    std::uniform_real_distribution<float> u(1e-4f, 0.3f);
    for (size_t i = 0; i < zero.size(); ++i) {
      zero[i] = static_cast<uint8_t>(rng_() % 16);
      scale[i] = u(rng_);  // float: rounded to the dtype by the repack
    }
    absl::StatusOr<gpu::GemvInt4Weights> packed =
        gpu::RepackInt4ForGemv(sh.n, sh.k, sh.group, q.data(), scale.data(), zero.data(), dtype());
    ASSERT_TRUE(packed.ok()) << packed.status();
    gpu::GemvDequantArgs a;
    a.dtype = dtype();
    a.format = GemvWeightFormat::kInt4;
    a.n = sh.n;
    a.k = sh.k;
    const std::vector<uint16_t> got = RunDequantize(a, Bytes(packed->q), Bytes(packed->scales));
    const std::vector<uint16_t> want = gpu::DequantizeInt4ToDtype(
        sh.n, sh.k, sh.group, q.data(), scale.data(), zero.data(), dtype());
    EXPECT_EQ(CountMismatches(got, want, absl::StrCat("int4 n=", sh.n, " k=", sh.k)), 0);
  }
}

TEST_P(GemvDequantizeTest, Fp8BitExact) {
  for (int64_t n : {37, 300, 64}) {
    const int64_t k = n == 64 ? 4096 : 192;
    std::vector<uint8_t> q(n * k);
    for (uint8_t& v : q) {
      do {
        v = static_cast<uint8_t>(rng_());
      } while ((v & 0x7f) == 0x7f);
    }
    const int64_t count = n == 300 ? 1 : n;
    std::vector<float> scale(count);
    std::uniform_real_distribution<float> u(1e-3f, 2.f);
    for (float& v : scale) v = u(rng_);
    absl::StatusOr<gpu::GemvFp8Weights> packed =
        gpu::RepackFp8ForGemv(n, k, q.data(), scale.data(), count);
    ASSERT_TRUE(packed.ok()) << packed.status();
    gpu::GemvDequantArgs a;
    a.dtype = dtype();
    a.format = GemvWeightFormat::kFp8;
    a.n = n;
    a.k = k;
    a.w_scale_count = count;
    const std::vector<uint16_t> got = RunDequantize(a, packed->q, Bytes(packed->scales));
    const std::vector<uint16_t> want =
        gpu::DequantizeFp8ToDtype(n, k, q.data(), scale.data(), count, dtype());
    EXPECT_EQ(CountMismatches(got, want, absl::StrCat("fp8 n=", n, " k=", k)), 0);
  }
}

TEST_P(GemvDequantizeTest, RejectsBadArguments) {
  gpu::GemvDequantArgs a;
  a.dtype = dtype();
  a.n = 16;
  a.k = 96;  // not a multiple of 128
  DeviceBuffer buf = Poisoned(1 << 16);
  a.w = a.w_scales = a.out = buf.get();
  EXPECT_EQ(gpu::LaunchDequantizeGemvWeights(a, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  a.k = 128;
  a.format = GemvWeightFormat::kDense;
  EXPECT_EQ(gpu::LaunchDequantizeGemvWeights(a, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  a.format = GemvWeightFormat::kFp8;
  a.w_scale_count = 3;  // neither 1 nor n
  EXPECT_EQ(gpu::LaunchDequantizeGemvWeights(a, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
}

INSTANTIATE_TEST_SUITE_P(DTypes, GemvDequantizeTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return std::string(i.param ? "bf16" : "fp16");
                         });

}  // namespace
}  // namespace pkv::gemv_test
