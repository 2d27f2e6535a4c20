// The skinny GEMM kernel (1..4 tokens against a weight matrix) against a double-precision host
// reference and against cuBLAS through the backend's Gemm, on fresh random data with the output
// poisoned first; odd row counts, short rows, both dtypes, fp32 and 16-bit outputs.
#include <cuda_runtime_api.h>

#include <cmath>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/common/float16.h"
#include "kernels/model/model_kernels.h"
#include "tests/harness/test_seed.h"
#include "worker/cuda_backend/device_buffer.h"
#include "worker/cuda_backend/gemm.h"

namespace pkv {
namespace {

using cuda_backend::DeviceBuffer;

uint16_t To16(float v, bool bf16) { return bf16 ? ToBFloat16(v).bits : ToHalf(v).bits; }
float From16(uint16_t b, bool bf16) { return bf16 ? ToFloat(BFloat16{b}) : ToFloat(Half{b}); }

void Check(int32_t tokens, int32_t out, int32_t in, bool bf16, bool y_f32, std::mt19937* rng) {
  const std::string what = absl::StrCat("T=", tokens, " N=", out, " K=", in,
                                        bf16 ? " bf16" : " fp16", y_f32 ? " f32-out" : " 16-out");
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<uint16_t> x(int64_t{tokens} * in), w(int64_t{out} * in);
  for (uint16_t& v : x) v = To16(u(*rng), bf16);
  for (uint16_t& v : w) v = To16(u(*rng), bf16);
  const int64_t y_elems = int64_t{tokens} * out, y_bytes = y_elems * (y_f32 ? 4 : 2);
  auto dev = [](int64_t bytes) { return *DeviceBuffer::Allocate(bytes); };
  DeviceBuffer dx = dev(x.size() * 2), dw = dev(w.size() * 2), dy = dev(y_bytes + 64),
               dc = dev(y_elems * 4);
  cudaMemcpy(dx.get(), x.data(), x.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(dw.get(), w.data(), w.size() * 2, cudaMemcpyHostToDevice);
  cudaMemset(dy.get(), 0xff, y_bytes + 64);  // NaN poison, plus a guard band past the end
  gpu::SkinnyGemmArgs a;
  a.dtype = bf16 ? gpu::DType::kBFloat16 : gpu::DType::kFloat16;
  a.x = dx.get();
  a.num_tokens = tokens;
  a.in = in;
  a.w = dw.get();
  a.out = out;
  a.y = dy.get();
  a.y_f32 = y_f32;
  ASSERT_TRUE(gpu::SkinnyGemmSupported(tokens, in, dx.get(), dw.get()));
  ASSERT_TRUE(gpu::LaunchSkinnyGemm(a, nullptr).ok()) << what;
  auto gemm = cuda_backend::Gemm::Create(int64_t{4} << 20);
  ASSERT_TRUE(gemm.ok());
  ASSERT_TRUE(
      (*gemm)->Linear(a.dtype, dx.get(), tokens, in, dw.get(), out, dc.get(), true, nullptr).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
  std::vector<uint8_t> y(y_bytes + 64);
  std::vector<float> c(y_elems);
  cudaMemcpy(y.data(), dy.get(), y.size(), cudaMemcpyDeviceToHost);
  cudaMemcpy(c.data(), dc.get(), y_elems * 4, cudaMemcpyDeviceToHost);
  for (int i = 0; i < 64; ++i) ASSERT_EQ(y[y_bytes + i], 0xff) << what << ": wrote past the end";
  int64_t bad = 0;
  for (int32_t t = 0; t < tokens; ++t) {
    for (int32_t n = 0; n < out; ++n) {
      double ref = 0, mag = 0;
      for (int32_t k = 0; k < in; ++k) {
        const double p =
            double(From16(x[int64_t{t} * in + k], bf16)) * From16(w[int64_t{n} * in + k], bf16);
        ref += p;
        mag += std::abs(p);
      }
      const int64_t i = int64_t{t} * out + n;
      float got;
      if (y_f32) {
        std::memcpy(&got, &y[4 * i], 4);
      } else {
        uint16_t b;
        std::memcpy(&b, &y[2 * i], 2);
        got = From16(b, bf16);
      }
      const double tol =
          y_f32 ? 1e-4 * mag + 1e-6 : (bf16 ? 8e-3 : 1e-3) * std::abs(ref) + 1e-5 * mag;
      if (!(std::abs(got - ref) <= tol) || !(std::abs(c[i] - ref) <= 1e-4 * mag + 1e-6)) {
        if (bad++ < 3)
          ADD_FAILURE() << what << " t=" << t << " n=" << n << " skinny " << got << " cublas "
                        << c[i] << " ref " << ref;
      }
    }
  }
  EXPECT_EQ(bad, 0) << what;
}

TEST(SkinnyGemmTest, MatchesReferenceAndCublas) {
  std::mt19937 rng(::pkv::testing::TestSeed());
  const std::vector<std::pair<int32_t, int32_t>> shapes = {{1, 8},      {7, 64},      {33, 136},
                                                           {4097, 256}, {6144, 4096}, {512, 14336}};
  for (auto [out, in] : shapes) {
    for (int32_t tokens = 1; tokens <= gpu::kSkinnyGemmMaxTokens; ++tokens) {
      for (bool bf16 : {true, false}) {
        Check(tokens, out, in, bf16, /*y_f32=*/(tokens + out) % 2 == 0, &rng);
      }
    }
  }
}

TEST(SkinnyGemmTest, RejectsUnsupportedShapes) {
  EXPECT_FALSE(gpu::SkinnyGemmSupported(5, 64, nullptr, nullptr));
  EXPECT_FALSE(gpu::SkinnyGemmSupported(1, 12, nullptr, nullptr));
  EXPECT_FALSE(gpu::SkinnyGemmSupported(0, 64, nullptr, nullptr));
  gpu::SkinnyGemmArgs a;
  a.num_tokens = 5;
  a.in = 64;
  a.out = 8;
  EXPECT_EQ(gpu::LaunchSkinnyGemm(a, nullptr).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pkv
