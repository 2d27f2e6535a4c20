// The packed (fused-GEMV) form of a quantized checkpoint's projections for DeviceWeights
// (device_weights.h): how large each packed projection is, packing a fused projection's members
// (whole checkpoint modules, or a tensor-parallel rank's slices of them) on the host
// (kernels/model/gemv_quant.h's repack, rows concatenated), the host dequantization of members that
// end up dense, and random packed weights for benchmarks. Thread-safety: pure functions
// (FillRandomPacked enqueues on `stream` and synchronises it).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/decode/decode_params.h"
#include "kernels/model/gemv_plan.h"
#include "worker/model/quant_config.h"
#include "worker/model/quant_linear.h"

namespace pkv::cuda_backend {

// One fused projection's packed sizes: rows n (the members' rows concatenated) over k inputs.
struct PackedLayout {
  gpu::GemvWeightFormat format = gpu::GemvWeightFormat::kDense;
  int64_t q_bytes = 0;      // packed weights
  int64_t scale_bytes = 0;  // kInt4: uint32 [n][k / 128]; kFp8: float [scale_count]
  int32_t scale_count = 0;  // kFp8: n, or 1 for a lone per-tensor member
};

// The layout of `members` quantized members with n rows in all over k inputs. INVALID_ARGUMENT
// naming the quantization_config field when the kernels cannot run it: 4-bit group_size not a
// multiple of 128 (or k not one of 128), fp8 k not a multiple of 64. REQUIRES: quant.quantized().
absl::StatusOr<PackedLayout> PackedLayoutOf(const QuantConfig& quant, const std::string& module,
                                            int members, int64_t n, int64_t k);

struct PackedHost {
  std::vector<uint8_t> q;       // PackedLayout::q_bytes
  std::vector<uint8_t> scales;  // PackedLayout::scale_bytes
};

// Packs a fused projection's members (canonical matrices, rows in order: a whole checkpoint
// module or a tensor-parallel rank's slice of one, all over the same k inputs) for activations of
// `dtype`; consumes them. INVALID_ARGUMENT naming `module` (the first member, for messages) from
// the repack or when a member's k differs.
absl::StatusOr<PackedHost> PackProjection(std::vector<QuantizedLinear> members, int64_t k,
                                          decode::DType dtype, const std::string& module);

// `linear` dequantized in float32 (the CPU oracle's values), rounded to `dtype`: [n][k].
std::vector<uint16_t> DequantizeToDType(const QuantizedLinear& linear, decode::DType dtype);

// Random packed weights at q / scales (device) for an n x k projection of `layout`: a 4 MiB host
// block of valid codes tiled over q (4-bit: uniform nibbles, scale 0.0047, zero point 8: weight
// std ~0.02; fp8: e4m3 of U(+-0.035) / s with s = 0.035 / 448 per row), as benchmarks need.
absl::Status FillRandomPacked(const PackedLayout& layout, int64_t n, int64_t k, decode::DType dtype,
                              uint64_t seed, void* q, void* scales, cudaStream_t stream);

}  // namespace pkv::cuda_backend
