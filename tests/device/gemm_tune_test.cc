// Gemm's cuBLASLt autotuning (worker/cuda_backend/gemm.h): after Tune(), Linear() with tuning on
// runs the chosen algorithm (cuBLASLt or cublasGemmEx) and must still compute y = x . w^T, checked
// against a double-precision host reference on fresh random data with the output poisoned, for
// decode-sized token counts, both dtypes and both output types. Problems never tuned keep
// cublasGemmEx.
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/common/float16.h"
#include "tests/harness/test_seed.h"
#include "worker/cuda_backend/device_buffer.h"
#include "worker/cuda_backend/gemm.h"

namespace pkv {
namespace {

using cuda_backend::DeviceBuffer;
using cuda_backend::Gemm;

uint16_t To16(float v, bool bf16) { return bf16 ? ToBFloat16(v).bits : ToHalf(v).bits; }
float From16(uint16_t b, bool bf16) { return bf16 ? ToFloat(BFloat16{b}) : ToFloat(Half{b}); }

TEST(GemmTuneTest, TunedLinearMatchesReference) {
  std::mt19937 rng(::pkv::testing::TestSeed());
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  absl::StatusOr<std::unique_ptr<Gemm>> gemm = Gemm::Create(int64_t{32} << 20);
  ASSERT_TRUE(gemm.ok()) << gemm.status();
  struct Case {
    int64_t tokens, out, in;
  };
  int tuned = 0;
  for (const Case& cs : std::vector<Case>{{8, 512, 1024}, {33, 768, 256}, {64, 4096, 512}}) {
    for (bool bf16 : {true, false}) {
      const bool f32 = (cs.tokens + (bf16 ? 1 : 0)) % 2 == 0;
      const std::string what = absl::StrCat("T=", cs.tokens, " out=", cs.out, " in=", cs.in,
                                            bf16 ? " bf16" : " fp16", f32 ? " f32-out" : "");
      std::vector<uint16_t> x(cs.tokens * cs.in), w(cs.out * cs.in);
      for (uint16_t& v : x) v = To16(u(rng), bf16);
      for (uint16_t& v : w) v = To16(u(rng), bf16);
      const int64_t y_bytes = cs.tokens * cs.out * (f32 ? 4 : 2);
      DeviceBuffer dx = *DeviceBuffer::Allocate(x.size() * 2);
      DeviceBuffer dw = *DeviceBuffer::Allocate(w.size() * 2);
      DeviceBuffer dw2 = *DeviceBuffer::Allocate(w.size() * 2);  // a second "layer" for timing
      DeviceBuffer dy = *DeviceBuffer::Allocate(y_bytes);
      cudaMemcpy(dx.get(), x.data(), x.size() * 2, cudaMemcpyHostToDevice);
      cudaMemcpy(dw.get(), w.data(), w.size() * 2, cudaMemcpyHostToDevice);
      cudaMemcpy(dw2.get(), w.data(), w.size() * 2, cudaMemcpyHostToDevice);
      const decode::DType dt = bf16 ? decode::DType::kBFloat16 : decode::DType::kFloat16;
      Gemm::TuneProblem p{dt,       cs.tokens, cs.in, cs.out, f32, {dw.get(), dw2.get()},
                          dx.get(), dy.get()};
      ASSERT_TRUE((*gemm)->Tune(p, nullptr).ok()) << what;
      ++tuned;
      (*gemm)->set_tuned(true);
      cudaMemset(dy.get(), 0xff, y_bytes);  // NaN poison
      ASSERT_TRUE(
          (*gemm)
              ->Linear(dt, dx.get(), cs.tokens, cs.in, dw.get(), cs.out, dy.get(), f32, nullptr)
              .ok())
          << what;
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
      std::vector<uint8_t> y(y_bytes);
      cudaMemcpy(y.data(), dy.get(), y_bytes, cudaMemcpyDeviceToHost);
      int bad = 0;
      for (int64_t t = 0; t < cs.tokens; ++t) {
        for (int64_t n = 0; n < cs.out; ++n) {
          double ref = 0, mag = 0;
          for (int64_t k = 0; k < cs.in; ++k) {
            const double v =
                double(From16(x[t * cs.in + k], bf16)) * From16(w[n * cs.in + k], bf16);
            ref += v;
            mag += std::abs(v);
          }
          const int64_t i = t * cs.out + n;
          float got;
          if (f32) {
            std::memcpy(&got, &y[4 * i], 4);
          } else {
            uint16_t b;
            std::memcpy(&b, &y[2 * i], 2);
            got = From16(b, bf16);
          }
          const double tol =
              1e-3 * mag + (f32 ? 1e-5 : std::abs(ref) * (bf16 ? 1.0 / 128 : 1.0 / 1024));
          if (!(std::abs(got - ref) <= tol) && bad++ < 3) {
            ADD_FAILURE() << what << " t=" << t << " n=" << n << " got " << got << " ref " << ref;
          }
        }
      }
      EXPECT_EQ(bad, 0) << what;
    }
  }
  EXPECT_EQ((*gemm)->num_tuned(), tuned);
  std::printf("%d of %d tuned problems run a cuBLASLt algorithm\n", (*gemm)->num_lt(), tuned);
}

TEST(GemmTuneTest, RejectsEmptyProblems) {
  absl::StatusOr<std::unique_ptr<Gemm>> gemm = Gemm::Create(int64_t{4} << 20);
  ASSERT_TRUE(gemm.ok());
  Gemm::TuneProblem p;
  p.tokens = 8;
  EXPECT_EQ((*gemm)->Tune(p, nullptr).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pkv
