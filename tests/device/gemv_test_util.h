// Host data, device staging and references of the fused-GEMV device tests (gemv_test.cc,
// gemv_quant_test.cc): one projection's random weights in a weight format (dense, 4-bit, fp8),
// its input, and the reference the kernel is checked against.
//
// The oracle of a quantized projection is the float32 dequantization of its canonical weights
// (gemv_quant.h), rounded to the activation dtype (Problem::wf): what the dequantize kernel writes
// (scales are drawn representable in the dtype, as a checkpoint's are when its dtype matches),
// and within one rounding of the weight (2^-9 relative in bf16, 2^-12 in fp16) of the exact
// (q - z) * scale and e4m3 * scale the 4-bit and fp8 GEMVs apply in fp32. Bound of every check:
// 4e-3 * sum |x w| (the weight rounding above plus fp32 accumulation, far under) plus the output's
// rounding.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/model/gemv.h"
#include "worker/cuda_backend/device_buffer.h"

namespace pkv::gemv_test {

using cuda_backend::DeviceBuffer;

struct GemvCase {
  bool bf16 = true;
  gpu::GemvWeightFormat format = gpu::GemvWeightFormat::kDense;
};
std::string CaseName(const GemvCase& c);
// Every (dtype, format) pair.
std::vector<GemvCase> AllCases();

uint16_t To16(float v, bool bf16);
float From16(uint16_t b, bool bf16);
float Round16(float v, bool bf16);
double Ulp16(double v, bool bf16);

template <typename T>
DeviceBuffer Upload(const std::vector<T>& v) {
  DeviceBuffer b = *DeviceBuffer::Allocate(static_cast<int64_t>(v.size() * sizeof(T)) + 64);
  cudaMemcpy(b.get(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice);
  return b;
}
DeviceBuffer Poisoned(int64_t bytes);
template <typename T>
std::vector<uint8_t> Bytes(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}
template <typename T>
std::vector<T> Download(const DeviceBuffer& b, int64_t n) {
  std::vector<T> v(n);
  cudaMemcpy(v.data(), b.get(), n * sizeof(T), cudaMemcpyDeviceToHost);
  return v;
}

// QueryGemvDevice for the case, with a 64 KB x staging budget when the build gives none.
gpu::GemvDevice RealDevice(const GemvCase& c);
// k rounded up to a multiple the format supports (GemvKMultiple).
int32_t KFor(const GemvCase& c, int32_t k);

// One projection's host data: weights, the input as the MMA sees it, and references.
struct Problem {
  GemvCase cs;
  bool bf16 = true;
  int32_t n = 0, k = 0, tokens = 0;
  std::vector<float> wf;               // [n][k] the oracle's weights (see above)
  std::vector<uint8_t> packed;         // the weights as the kernel reads them
  std::vector<uint8_t> packed_scales;  // 4-bit scale words / fp8 float scales
  int32_t scale_count = 0;             // fp8: n or 1
  std::vector<float> xin;              // [tokens][k]: the 16-bit input values the kernel multiplies
  std::vector<uint16_t> x16;           // kPlain input
  std::vector<float> residual;         // kRmsNorm input [tokens][k]
  std::vector<float> norm_w;           // [k]
  std::vector<float> sum_sq;           // [k / 16][8] parts

  double Ref(int32_t t, int32_t row, double* mag) const;
};

Problem MakeProblem(const GemvCase& cs, int32_t n, int32_t k, int32_t tokens, bool rmsnorm,
                    std::mt19937* rng);

// Device copies of a problem's inputs, and GemvArgs pointing at them.
struct DeviceProblem {
  DeviceBuffer w, w_scales, x, norm_w, sum_sq, partials, tickets;
  gpu::GemvArgs args;
};
DeviceProblem Stage(const Problem& p, int32_t group, const gpu::GemvDevice& dev);

std::string What(const Problem& p, const gpu::GemvArgs& a, const char* mode);

// Checks `rows` of a kStore output (tokens x n, 16-bit or float) against the reference; returns
// the number of mismatches (the first few reported as failures).
int CheckRows(const Problem& p, const std::vector<uint8_t>& got, bool f32,
              const std::vector<int32_t>& rows, const std::string& what);
// CheckRows over every row.
int CheckStore(const Problem& p, const std::vector<uint8_t>& got, bool f32,
               const std::string& what);

}  // namespace pkv::gemv_test
