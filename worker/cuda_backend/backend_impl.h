// CudaModelBackend's state and step machinery (internal to worker/cuda_backend): the buffers, the
// per-step device view of the staging image (DeviceStep), and the enqueue functions shared by the
// eager path and CUDA-graph capture. cuda_backend.cc builds it and runs steps; forward.cc
// enqueues the forward pass and sampling.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "kernels/model/sampling_types.h"
#include "kernels/prefill/prefill_plan.h"
#include "worker/cuda_backend/cuda_backend.h"
#include "worker/cuda_backend/decode_attention.h"
#include "worker/cuda_backend/device_buffer.h"
#include "worker/cuda_backend/device_step.h"
#include "worker/cuda_backend/device_stream.h"
#include "worker/cuda_backend/device_weights.h"
#include "worker/cuda_backend/forward.h"
#include "worker/cuda_backend/fused_path.h"
#include "worker/cuda_backend/gemm.h"
#include "worker/cuda_backend/graph_cache.h"
#include "worker/cuda_backend/kv_attention.h"
#include "worker/cuda_backend/step_buffers.h"
#include "worker/cuda_backend/step_builder.h"
#include "worker/cuda_backend/tp_hooks.h"
#include "worker/model/model_config.h"

namespace pkv {

class CudaModelBackend::Impl {
 public:
  ~Impl();

  // step_runner.cc: the forward pass of step `s` over this backend's parts, with the fused path
  // and PDL as the options and the device allow.
  cuda_backend::ForwardPass Forward(const DeviceStep& s);
  bool UseFused(const DeviceStep& s) const;
  bool UsePdl() const { return options.pdl && fused.pdl_usable(); }
  // Bits of the graph key for what the fused path, PDL and GEMM tuning bake into a capture.
  uint64_t FusedSignature(const DeviceStep& s) const;
  // tune_gemms.cc: cuBLASLt autotuning of every projection at every graph bucket (synchronous).
  absl::Status TuneGemms();

  // cuda_backend.cc: host half of a step.
  absl::Status Prepare(absl::Span<const BatchRow> rows, bool need_params, bool allow_graph,
                       DeviceStep* s);
  // The part of Prepare after the batch is built into `host` (padding, staging upload, decode
  // plan): a tensor-parallel rank stages the batch its backend built and validated once.
  absl::Status Stage(bool allow_graph, DeviceStep* s);
  absl::Status Run(const DeviceStep& s, bool sample);
  absl::Status CollectSamples(std::vector<SampleResult>* samples);
  void FillStats(absl::Span<const BatchRow> rows, StepStats* stats) const;

  ModelConfig config;
  CudaBackendOptions options;
  cuda_backend::DeviceStream device_stream;  // first member: the last destroyed
  int device() const { return device_stream.device(); }
  cudaStream_t stream() const { return device_stream.get(); }
  cuda_backend::DeviceWeights weights;
  std::unique_ptr<cuda_backend::Gemm> gemm;
  std::unique_ptr<cuda_backend::KvAttention> kv;  // the KV pool and attention over it
  cuda_backend::StepBuffers buffers;    // activations, logits, sampling results
  cuda_backend::DeviceBuffer staging;   // the staging image on the device
  cuda_backend::PinnedBuffer staging_host;

  cuda_backend::FusedPath fused;  // the fused small-batch path and PDL on this device
  bool gemms_tuned = false;

  std::unique_ptr<cuda_backend::StepBuilder> builder;
  cuda_backend::StepHost host;
  std::vector<int32_t> buckets;
  cuda_backend::GraphCache graphs;
  StepTiming timing;
  int32_t current_bucket = 0;

  // Tensor parallelism (tp_hooks.h): this rank's collectives; null on one GPU. Not owned.
  cuda_backend::TpHooks* tp = nullptr;
};

namespace cuda_backend {

// cuda_backend.cc: the two halves of a load around the weights upload (a tensor-parallel backend
// uploads each rank's shard in between). StartLoad validates the options, makes options.device
// current and creates the stream; FinishLoad sets up cuBLAS, attention, activations, the KV pool
// and the step machinery.
absl::StatusOr<std::unique_ptr<CudaModelBackend::Impl>> StartLoad(
    const CudaBackendOptions& options);
absl::Status FinishLoad(CudaModelBackend::Impl* m, const std::string& source);

}  // namespace cuda_backend

}  // namespace pkv
