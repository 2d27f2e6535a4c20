// `pkv-bench e2e`: the whole model on the GPU, measured end to end through the CUDA backend's
// Step(), against the two ceilings measured in the same run:
//   - decode: per step, the byte floor (the weights a step reads plus every row's K/V) over the
//     streaming-read bandwidth; the fraction reached = floor time / measured step time. Rows come
//     from trace-grid lines (bench/traces), growing by one token a step; the host overhead per
//     step (the backend's validation + staging + planning + launch + unpacking, and the
//     scheduler's Schedule/CommitStep at the same batch size) against the step time; the decode
//     route of each step; CUDA graphs on and off.
//   - prefill: time to first token of one prompt (one Step, whole prompt as one chunk), its model
//     FLOPs (projections, causal attention, LM head row) over the time, against the cuBLAS bf16
//     GEMM rate.
// Weights are random, generated on the GPU from a seed (CudaModelBackend::LoadRandom) unless
// --model_dir names a checkpoint; the KV cache is filled with random values.
// Benchmark code: may allocate; not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/cuda_backend/cuda_backend.h"
#include "worker/model/sampling_params.h"

namespace pkv::bench {

struct Ceilings {
  double stream_gbps = 0;  // streaming read, 1e9 B/s
  double gemm_tflops = 0;  // cuBLAS bf16 8192^3, fp32 accumulation
};

struct DecodeResult {
  std::string trace;
  int32_t batch = 0;
  double mean_len = 0;
  bool graphs = false;
  bool skinny = false;  // projections through the skinny GEMM kernel
  std::string variant;  // the backend configuration (e2e_main.cc: kVariants)
  int32_t steps = 0;
  double step_ms = 0;  // median wall time of Step()
  double tokens_per_s = 0;
  double host_us = 0;  // median backend host time per step (prep + launch + post)
  // Medians of host_us's parts (StepTiming): the GPU idles through post and the next prep, and
  // through launch until the first kernel is enqueued.
  double prep_us = 0, launch_us = 0, post_us = 0;
  double build_us = 0, plan_us = 0;  // parts of prep_us (StepTiming)
  double floor_ms = 0;               // byte floor at the measured bandwidth (median step)
  double floor_frac = 0;             // floor_ms / step_ms
  int64_t weight_bytes = 0;
  int64_t kv_bytes = 0;               // K/V bytes of the median step
  std::map<std::string, int> routes;  // route -> steps
  int32_t launches = 0;               // decode-attention launches per layer (last step)
  double occupancy = 0;               // split occupancy (last step)
  std::string skipped;                // non-empty: why this line did not run
};

struct PrefillResult {
  int32_t tokens = 0;
  double ttft_ms = 0;  // median
  double tflops = 0;   // model FLOPs / ttft
  double gemm_frac = 0;
};

absl::StatusOr<Ceilings> MeasureCeilings(cudaStream_t stream);

// Every row samples with `sampling` (its seed replaced by `seed`): temperature 0 greedily; above 0
// each row draws from the whole vocabulary (the OpenAI API's default), or from what its top_k /
// top_p / min_p keep. `overlap`: each step is launched before the previous one is finished, its
// rows feeding that step's samples on the device (the worker's --overlap_steps); a step's time is
// then the interval between consecutive finishes, else the wall time of its Step().
// `compact_pages`: rows take pages in order from page 0 instead of from a random permutation of
// the whole pool (what a fresh worker's allocator hands out vs a fragmented pool's).
// `timeline_path`: the last step's per-CTA timeline goes there (e2e_timeline.h; timeline builds).
absl::StatusOr<DecodeResult> RunDecode(CudaModelBackend* backend, const std::string& trace,
                                       const std::vector<int32_t>& lengths, int32_t warmup,
                                       int32_t steps, double stream_gbps, uint32_t seed,
                                       const SamplingParams& sampling, bool overlap = false,
                                       bool compact_pages = false,
                                       const std::string& timeline_path = "");

absl::StatusOr<PrefillResult> RunPrefill(CudaModelBackend* backend, int32_t tokens, int32_t reps,
                                         double gemm_tflops, uint32_t seed);

// The scheduler's host time per decode step (Schedule + building the backend's rows +
// CommitStep) with `batch` running sequences, median over `steps`, in microseconds.
double MeasureSchedulerUs(int32_t batch, int32_t steps);

// Model FLOPs of a one-chunk prefill of `tokens` tokens (2 per multiply-add).
double PrefillFlops(const ModelConfig& c, int32_t tokens);

}  // namespace pkv::bench
