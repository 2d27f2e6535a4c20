// The model's weights on the GPU, in one device arena: matrices in the compute dtype (fp16 or
// bf16, uploaded as they are when the checkpoint already has that type, converted on the host
// otherwise, e.g. from a float32 checkpoint), norms and biases in float32. Projections that read
// the same input are fused at load by concatenating their rows:
//   qkv     [(H_q + 2 H_kv) * D][hidden]  = q_proj ; k_proj ; v_proj   (+ bias the same way)
//   gate_up [2 I][hidden]                 = gate_proj ; up_proj
// so one GEMM produces q, k and v (and one produces gate and up) per layer.
//
// Quantized checkpoints (config.quant, worker/model/quant_weights.h): a fused projection whose
// members are all quantized is stored packed for the fused GEMV (kernels/model/gemv_quant.h:
// 4-bit groups or fp8 e4m3, rows concatenated like the dense form; per-tensor fp8 scales of fused
// members become per-row scales), so device memory and the decode byte floor are the packed size.
// Paths other than the fused GEMV run the quantized-weight GEMM on the packed bytes, or for
// large steps dequantize one projection at a time into `dequant_scratch` (sized for the largest
// packed projection, allocated with the weights, before the KV pool takes the free memory) and
// run the dense GEMM on it (packed_linear.h; the GEMM's split partials use the scratch too). A
// fused projection mixing dense and quantized members, and a quantized lm_head (FP8 checkpoints),
// are dequantized on the host to the compute dtype at load (dense, full size). A
// tensor-parallel rank's shard (UploadWeightRuns) takes the same layouts and paths, on its slices.
//
// Upload streams each tensor through two pinned staging buffers (host conversion and the copy of
// the previous chunk overlap), so an 8B checkpoint never needs a second host copy.
// Thread-safety: immutable after UploadWeights.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/decode/decode_params.h"
#include "kernels/model/gemv_plan.h"
#include "worker/cuda_backend/device_buffer.h"
#include "worker/model/checkpoint.h"
#include "worker/model/model_config.h"
#include "worker/model/quant_linear.h"

namespace pkv::cuda_backend {

// One (fused) projection's [n][k] weights: dense in the compute dtype, or packed for the GEMV.
struct ProjectionWeights {
  const void* w = nullptr;  // kDense: [n][k] dtype; else the packed weights (gemv_quant.h)
  gpu::GemvWeightFormat format = gpu::GemvWeightFormat::kDense;
  const void* scales = nullptr;  // kInt4: uint32 [n][k / 128]; kFp8: float [scale_count]
  int32_t scale_count = 0;       // kFp8: n or 1
  int64_t n = 0, k = 0;
  bool packed() const { return format != gpu::GemvWeightFormat::kDense; }
};

struct LayerWeights {
  ProjectionWeights qkv;              // [(H_q + 2 H_kv) * D][hidden]
  const float* qkv_bias = nullptr;    // [(H_q + 2 H_kv) * D] or nullptr
  ProjectionWeights o;                // [hidden][H_q * D]
  const float* o_bias = nullptr;      // [hidden] or nullptr
  ProjectionWeights gate_up;          // [2 I][hidden]
  ProjectionWeights down;             // [hidden][I]
  const float* input_norm = nullptr;  // [hidden]
  const float* post_norm = nullptr;   // [hidden]
  const float* q_norm = nullptr;      // [D] or nullptr (Qwen3)
  const float* k_norm = nullptr;      // [D] or nullptr
};

struct DeviceWeights {
  DeviceBuffer arena;
  decode::DType dtype = decode::DType::kBFloat16;
  const void* embed = nullptr;        // [V][hidden] dtype
  const void* lm_head = nullptr;      // [V][hidden] dtype (== embed when tied)
  const float* final_norm = nullptr;  // [hidden]
  std::vector<LayerWeights> layers;
  int64_t arena_bytes = 0;
  // [largest packed projection's n * k] dtype: where the non-GEMV paths dequantize one packed
  // projection before its GEMM (written by the kernels on the backend's stream); empty when
  // nothing is packed.
  DeviceBuffer dequant_scratch;
  int64_t dequant_scratch_bytes = 0;
  // Bytes one decode step must read: every layer's tensors, the final norm and the LM head
  // (the embedding table only contributes the fed rows, so it is not counted).
  int64_t step_read_bytes = 0;
};

// The dtype the backend computes in for `requested` ("auto", "bfloat16", "float16"): auto keeps a
// 16-bit checkpoint's type and picks bf16 for float32 checkpoints. INVALID_ARGUMENT otherwise.
absl::StatusOr<decode::DType> ChooseComputeDType(const std::string& requested,
                                                 const Checkpoint& checkpoint);

// Validates the checkpoint against the config (ValidateLlamaCheckpoint) and uploads it, packing
// quantized projections (see above). RESOURCE_EXHAUSTED when the weights do not fit the GPU;
// INVALID_ARGUMENT naming the quantization_config field when the kernels cannot run the format
// (4-bit group_size not a multiple of 128, an input size not a multiple of 128 (4-bit) or 64
// (fp8)).
absl::StatusOr<DeviceWeights> UploadWeights(const ModelConfig& config, const Checkpoint& checkpoint,
                                            decode::DType dtype, cudaStream_t stream);

// Which elements of a checkpoint tensor a tensor-parallel shard holds: `runs` runs of `width`
// elements, run i starting at element first + i * stride (row-major). A whole tensor is one run of
// all its elements; a row slice of a [rows][cols] matrix one run; a column slice one run a row.
struct TensorRuns {
  int64_t first = 0;
  int64_t stride = 0;
  int64_t runs = 1;
  int64_t width = 0;
};

// The canonical matrix of quantized linear `module` (e.g. "model.layers.0.mlp.down_proj") as the
// upload holds it: the whole checkpoint module, or a tensor-parallel rank's slice of it
// (LoadQuantizedShard in worker/model/tp_shard.h, the CPU ranks' shard rule).
using QuantizedSource = std::function<absl::StatusOr<QuantizedLinear>(const std::string& module)>;

// A shard's upload: `config` is the shard's config (local heads, intermediate size and vocabulary:
// ShardConfig in worker/model/tp_shard.h), whose tensor specs size the arena; runs_of(name) says
// which elements of dense checkpoint tensor `name` the shard holds (only those bytes are read);
// quantized_of(module) gives the shard's slice of each quantized module, which is packed (or, for
// a mixed fused projection or an FP8 lm_head, dequantized) exactly as UploadWeights packs a whole
// module, so the rank's GEMV and dequantize + GEMM paths run unchanged on the slice. The caller
// validated the checkpoint against the whole model. INVALID_ARGUMENT when a slice does not fit its
// tensor or does not fill the shard's shape, or when the kernels cannot run a slice's packed form
// (PackedLayoutOf: e.g. an FP8 row-parallel slice of an input size that is not a multiple of 64).
absl::StatusOr<DeviceWeights> UploadWeightRuns(
    const ModelConfig& config, const Checkpoint& checkpoint,
    const std::function<TensorRuns(const std::string& name)>& runs_of,
    const QuantizedSource& quantized_of, decode::DType dtype, cudaStream_t stream);

// Random weights with the config's shapes, generated on the GPU from `seed` (benchmarks of real
// model shapes without writing or reading a checkpoint). With config.quant set, the projections it
// quantizes are packed as a checkpoint's would be (4-bit: random nibbles, one scale 0.0047 and
// zero point 8, so weights have std ~0.02; fp8: random finite e4m3 codes of |w| <= ~0.06 with
// scale 1/4096): the bytes a step reads are those of the real format.
absl::StatusOr<DeviceWeights> RandomDeviceWeights(const ModelConfig& config, decode::DType dtype,
                                                  uint64_t seed, cudaStream_t stream);

}  // namespace pkv::cuda_backend
