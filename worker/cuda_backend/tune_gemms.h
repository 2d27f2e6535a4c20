// The backend's GEMM autotuning (option gemm_autotune, gemm.h): every projection shape of `config`
// at every graph batch bucket, timed on scratch operands cycling through all layers' weights, and
// the LM head into `logits` (float [buckets.back()][V] scratch). Synchronous (load time and
// benchmarks); allocates its own scratch.
// Thread-safety: the thread that owns `gemm` and `stream`.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "worker/cuda_backend/device_weights.h"
#include "worker/cuda_backend/gemm.h"
#include "worker/model/model_config.h"

namespace pkv::cuda_backend {

absl::Status TuneGemms(const ModelConfig& config, const DeviceWeights& weights,
                       const std::vector<int32_t>& buckets, float* logits, Gemm* gemm,
                       cudaStream_t stream);

}  // namespace pkv::cuda_backend
