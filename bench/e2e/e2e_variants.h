// The backend configurations `pkv-bench e2e` compares on every decode line (--variants):
//   cublas         CUDA graphs, cuBLAS projections + the unfused kernels (the default backend)
//   skinny         cublas with the skinny GEMM for 1..4-token steps
//   pdl            cublas with programmatic dependent launch on the model's own kernels
//   fused          the fused small-batch path (<= 8 tokens): 5 launches a layer
//   fused+pdl      fused with programmatic dependent launch between the GEMVs
//   fused+pdl+pfN  fused+pdl, each GEMV prefetching N K-steps per warp into L2 before its wait
//   fused+pdl+prenormN  fused+pdl, steps of >= N tokens normalizing the q/k/v and gate/up inputs
//                  in one RMSNorm launch each (plain-input GEMVs; fused_prenorm_min_tokens);
//                  fused+pdl+prenorm: the worker's default N (kFusedPrenormAuto). The other
//                  fused variants run without it
//   lt             cublas with each projection's cuBLASLt algorithm autotuned at its batch bucket
//   lt+pdl         lt with programmatic dependent launch
//   eager          cublas without CUDA graphs
//   det            deterministic (batch-invariant) mode with PDL in its first form: fixed-row
//                  cuBLAS GEMMs and the whole-row prefill kernel for every attention row;
//                  compare with pdl (the 8B worker's default) and fused+pdl (the 1B worker's)
//   det-split      det with split attention tiles (DeterministicForm::split_tiles; the mode's
//                  default)
//   det-pinned     det with pinned GEMMs (DeterministicForm::pinned_gemm)
//   det-fast       det with both
// A variant that cannot run on a line (batch too large, shape unsupported, PDL unavailable) is
// reported as skipped with the reason. Benchmark code: not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/cuda_backend/cuda_backend.h"

namespace pkv::bench {

struct Variant {
  std::string name;
  bool graphs = true;
  bool skinny = false;
  bool fused = false;
  bool pdl = false;
  int32_t prefetch_steps = 0;
  int32_t prenorm_min_tokens =
      0;               // fused+pdl+prenormN: CudaBackendOptions::fused_prenorm_min_tokens
  bool tuned = false;  // autotuned cuBLASLt GEMMs
  bool deterministic = false;
  DeterministicForm det_form;    // det-split, det-pinned, det-fast
  bool workqueue_waves = false;  // "+waves": the decode workqueue's wave-model layout
  // "+w8" / "+w4": 16-bit pages' w8s3 for 1-2 row steps on / off (DecodePolicyOptions::few_row_w8)
  bool few_row_w8 = CudaBackendOptions{}.decode_few_row_w8;
  // "+bulk" (gate/up and down) or "+bulk:P.P..": CudaBackendOptions::fused_gemv_bulk
  uint32_t gemv_bulk = CudaBackendOptions{}.fused_gemv_bulk;
  bool overlap = false;         // "+overlap": steps pipelined (RunDecode's overlap)
  bool compact_pages = false;   // "+compact": pages in order from 0 (RunDecode's compact_pages)
  bool skip_attention = false;  // "+noattn": no attention launched (timing knockout)
};

// Comma-separated names as above; INVALID_ARGUMENT naming an unknown one.
absl::StatusOr<std::vector<Variant>> ParseVariants(const std::string& list);

// Why `v` cannot run a batch of `batch` rows on `b` ("" when it can).
std::string VariantSkipReason(const Variant& v, int32_t batch, const CudaModelBackend& b);

// Configures `b` for `v` (the first tuned variant tunes the GEMMs: seconds).
absl::Status ApplyVariant(const Variant& v, CudaModelBackend* b);

}  // namespace pkv::bench
