// The CUDA model backend: the Llama-family forward pass of worker/model/cpu_backend.h on one GPU,
// with the CPU backend as its oracle.
//
// Per step (ModelBackend::Step):
//   host: StepBuilder validates the batch and writes the staging image (token ids, positions, KV
//         slots, block tables, prefill tiles, sampling parameters) into pinned memory; the decode
//         engine plans the decode rows (graph-sized for the batch bucket);
//   GPU:  one H2D copy of the image (+ the plan's), then
//         embed+norm -> per layer { QKV GEMM (fused weights, fp32 out) -> bias / q-k norm / RoPE
//         + K/V page write -> attention (decode rows: kernels/decode; prefill rows: the mma.sync
//         prefill kernel; head dims without tensor-core kernels: the generic kernel) -> o GEMM ->
//         residual add + RMSNorm -> gate/up GEMM -> SiLU*mul -> down GEMM -> residual add +
//         RMSNorm (the last layer: final norm of the sampled tokens only) } -> LM head (fp32
//         logits of sampled rows) -> sampling kernel;
//   back: one D2H copy of the chosen ids (+ log-probabilities when asked), one stream sync.
// Decode-only steps pad to a batch bucket (1, 2, 4, ..., 256, max_rows) and replay that bucket's
// CUDA graph (captured on the bucket's second use, after one eager warm-up run); the host work of
// the step (validation, staging, planning) happens before the replay is enqueued and its time is
// reported by last_timing(). Mixed and prefill steps run eagerly. Nothing is allocated after
// start-up and the only synchronisation is the wait for the sampled ids.
//
// Memory: weights (device_weights.h), activations for max_step_tokens tokens and max_rows rows,
// decode workspaces per bucket, then the KV pool: num_kv_pages if given, else
// kv_memory_fraction of the free memory left (within gpu_memory_limit_bytes when set).
// Thread-safety: not thread-safe (ModelBackend contract); owns its CUDA stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/attention/fp8_kv.h"
#include "worker/cuda_backend/fused_bulk.h"
#include "worker/model/model_backend.h"

namespace pkv {

// The deterministic mode's faster parts (docs/DESIGN.md, "Deterministic mode"), each off until a
// GPU has run it: written in the fifteenth session without one (bench/device/detsplit.sh runs
// both; predicted 8B B=1 2.1x -> ~1.1x of pdl, prefill 2048 2.6x -> ~1.2-1.5x).
inline constexpr int32_t kFusedPrenormAuto = -1;  // CudaBackendOptions::fused_prenorm_min_tokens

struct DeterministicForm {
  // Attention rows as split tiles (up to 16 CTAs a q head for a decode row, kv_attention.h)
  // instead of one CTA a q head reading the row whole. On by default since the H200 run of
  // 2026-12-05 (bench/NOTES.md "Sixteenth session": 8B B=1 10.87 -> 5.74 ms, bimodal B=64 97.5
  // -> 31.1; every determinism and prefill device test passes).
  bool split_tiles = true;
  // One cuBLASLt algorithm per projection shape at every token count (gemm.h, pinned form)
  // instead of deterministic_gemm_rows-row chunks that each re-read the weights. Off: faster
  // prompts but 2.6x slower one-token steps on the H200 (gemm.h, 2026-12-05).
  bool pinned_gemm = false;
};

struct CudaBackendOptions {
  int32_t page_size = 16;
  int64_t num_kv_pages = 0;         // 0: kv_memory_fraction of the free memory after the rest
  double kv_memory_fraction = 0.9;  // in (0, 1]
  // 0: the whole GPU. Otherwise the bytes this backend may allocate on its device after its CUDA
  // context is up (weights, buffers, workspaces and the KV pool; the context itself, ~0.3-0.5
  // GiB, is not counted): e.g. 11.5 GiB on an H200 behaves like a 12 GB card. The KV pool takes
  // kv_memory_fraction of what the limit leaves (or of the free memory, when that is less); an
  // explicit num_kv_pages above the limit is refused. Per rank under tensor parallelism.
  int64_t gpu_memory_limit_bytes = 0;
  int32_t max_step_tokens = 8192;  // tokens one Step() may feed (activation buffers)
  int32_t max_rows = 256;          // rows one Step() may hold
  bool cuda_graphs = true;         // replay decode-only steps from per-bucket CUDA graphs
  // Steps of 1..4 tokens run their projections through the skinny GEMM kernel instead of cuBLAS.
  bool skinny_gemm = false;
  // Steps of at most fused_max_tokens tokens (after graph padding) run each layer as the fused
  // GEMV kernels (fused_plan.h: 5 launches a layer instead of 9, norm / RoPE / KV write / SiLU /
  // residual in the projections' prologue and epilogues). Shapes the kernels do not support keep
  // the cuBLAS path, and so do models wider than fused_max_hidden (see below).
  bool fused_small_batch = true;
  int32_t fused_max_tokens = 8;  // 1..8
  // At load, a model with hidden_size > fused_max_hidden keeps the fused path only for steps of
  // at most fused_wide_max_tokens tokens (0: cuBLAS for every step; fused_max_hidden 0: no limit;
  // SetFusedSmallBatch(true) still forces it on up to fused_max_tokens). Measured on the H200
  // with pdl: llama3-1b (hidden 2048) fused is 2-14% faster than cuBLAS at B = 1..8
  // (bench/results/norm-rope-2026-11-29-h200); llama3-8b (4096) fused 4.58 ms vs cuBLAS 5.05 at
  // B = 1, cuBLAS 9.39 vs 9.70 at B = 8 (bench/results/2026-12-03-h200-served). With the
  // normalized inputs done once (fused_prenorm_min_tokens) the 8B fused path beats cuBLAS at B = 4
  // (5.01 vs 5.28 ms) and B = 8 (5.48 vs 5.80; 2026-12-05), so the default limit is the whole
  // fused range.
  int32_t fused_max_hidden = 2048;
  int32_t fused_wide_max_tokens = 8;
  // Programmatic dependent launch between the per-layer kernels (sm_90+ running sm_90 code;
  // ignored elsewhere): each kernel starts while the previous one drains. On: 2-6% faster than
  // without it in the same run (bench/results/final-2026-11-29-h200/README.md).
  bool pdl = true;
  // With pdl: K steps per warp of its first weight tile each fused GEMV prefetches into L2
  // before waiting for the previous kernel (0: only the first register batch).
  int32_t fused_prefetch_steps = 0;
  // The projections (FusedBulk bits) that one-token fused steps run on the bulk-copy GEMV
  // (gpu::GemvArgs::bulk, kernels/model/gemv_bulk.cuh; sm_90 code only; a projection whose rows
  // the bulk kernel cannot take runs on the register-batch one). kFusedBulkAuto: every projection.
  // Why all or none: a bulk kernel leaves its SM's shared-memory carveout large, and a
  // register-batch GEMV after it (launched early by PDL onto that SM) streams with a small L1, so
  // mixed sets lose what the bulk projections gain (a step timeline: the 8B qkv GEMV 2.7 us a
  // layer slower after a bulk down; bench/NOTES.md, twenty-fourth session). Measured end to end
  // on an H100 (call31, `pkv-bench e2e` suffix "+bulk:qkv.o.gateup.down"), two orders: 8B B=1
  // 5.878 -> 5.710 / 5.698 ms (-2.9%) against gate/up and down alone, 1B B=1 1.272 -> 1.238 /
  // 1.240 (-2.7%) against none, B=8 unchanged (one-token steps only). Mixed sets measured
  // earlier: gate/up+down 8B -2.7% on the H200, o alone +5..21% (twenty-third session).
  uint32_t fused_gemv_bulk = kFusedBulkAuto;
  // Fused steps of at least this many tokens (0: never) normalize the block inputs of q/k/v and
  // gate/up in one RMSNorm launch each and feed the GEMVs the normalized rows (plain input)
  // instead of normalizing inside every GEMV step or staging x per CTA. On the H200 a
  // normalized-input 8B gate/up GEMV at 8 tokens takes 57 us (fp8) / 73.6 (bf16) against 40 /
  // 60 for the same plain-input GEMV (bench/NOTES.md, "Fourteenth session"); off until measured
  // end to end (pkv-bench e2e variant fused+pdl+prenormN). kFusedPrenormAuto: from 4 tokens,
  // or 8 with 4-bit weights (H200, 2026-12-05: at 8 tokens every format gains 6-14%, at 4 tokens
  // dense and FP8 gain 2-4% and 4-bit loses 2%; bench/NOTES.md "Sixteenth session").
  int32_t fused_prenorm_min_tokens = kFusedPrenormAuto;
  // Time cuBLASLt's candidate algorithms against cublasGemmEx for every projection at every
  // graph batch bucket at load, and run the fastest (gemm.h). Adds seconds to the load of an 8B
  // model. Off: measured -0.9% at B=8 and +0.25% at B=64 on the H200 (final-2026-11-29-h200).
  bool gemm_autotune = false;
  // Batch-invariant decoding (docs/DESIGN.md, "Deterministic mode"): every row's logits are a
  // function of its own tokens only, whatever else shares the step, how its prompt was chunked
  // or whether its KV came from prefill or decode. Every projection runs as cuBLAS GEMMs of
  // exactly deterministic_gemm_rows rows (gemm.h), every attention row through the one mma.sync
  // prefill kernel (a decode row is a one-query tile; with deterministic_form.split_tiles, split
  // tiles whose keys are cut at positions fixed by the query's own position, kv_attention.h; the
  // decode engine's batch-dependent split is bypassed; the generic kernel for every row where the
  // prefill kernel has no head dim), and
  // the fused small-batch path, the skinny GEMM and tuned GEMMs are off. Single GPU only.
  bool deterministic = false;
  DeterministicForm deterministic_form;
  // Rows of every GEMM in deterministic mode: one cuBLAS call covers the decode batches up to it
  // (B = 64 in the bimodal benchmark); larger steps take ceil(T / rows) calls, each re-reading
  // the weights.
  int32_t deterministic_gemm_rows = 64;
  int device = 0;
  std::string dtype = "auto";  // auto | bfloat16 | float16
  KvCacheDtype kv_cache_dtype = KvCacheDtype::kAuto;
  // auto: tensor-core kernels where compiled (decode engine, prefill kernel), generic otherwise;
  // generic: the generic kernel for every row (a debugging and testing aid).
  std::string attention = "auto";
  // Decode-route policy (kernels/policy/policy_loader.h): this file if given, else
  // <policy_dir>/<gpu name>-<sms>sm.json, else an on-start calibration (<= 30 s) cached there;
  // decode_policy picks learned | threshold | fixed:<route>[:<min_split_tokens>] (empty: the
  // file's own kind).
  std::string policy_file;
  std::string policy_dir = "policies";
  std::string decode_policy;
  // 16-bit pages: one- and two-row decode steps run the 8-warp, 3-stage attention config
  // (decode::ChooseKernelConfig; head dim <= 128). Its kernel-level held-out rule passed on the
  // H200 (results/2026-12-05-h200-call20) and so did the end-to-end A/B (bench/device/cfg16.sh,
  // results/2026-12-06-h200-call22: 8B B=1 -1.2% in both rounds, no line slower); `pkv-bench
  // e2e` variant suffixes "+w8" / "+w4" compare the two. A GPU whose SM cannot hold the 8-warp
  // ring skips it (DecodeAttention::Create).
  bool decode_few_row_w8 = true;
};

// Host-side timing of the last Step(), in microseconds.
struct StepTiming {
  double prep_us = 0;    // validation, staging, planning, uploads enqueued; of which
  double build_us = 0;   //   validating and building the step on the host (StepBuilder)
  double plan_us = 0;    //   the decode route, plan and its upload (DecodeAttention::Prepare)
  double launch_us = 0;  // enqueueing the forward pass (a graph launch, or every kernel)
  double wait_us = 0;    // until the sampled ids are back on the host
  double post_us = 0;    // unpacking results and statistics
  bool graph = false;    // replayed a CUDA graph
  int32_t bucket = 0;    // the batch bucket (0: eager, unpadded)
  double host_us() const { return prep_us + launch_us + post_us; }
};

class CudaModelBackend : public ModelBackend {
 public:
  // Loads <model_dir> (config.json, generation_config.json, safetensors) onto the GPU.
  static absl::StatusOr<std::unique_ptr<CudaModelBackend>> Load(const std::string& model_dir,
                                                                const CudaBackendOptions& options);
  // Random weights of `config`'s shapes generated on the GPU (benchmarks: no checkpoint to write
  // or read). options.dtype "float16" picks fp16, anything else bf16.
  static absl::StatusOr<std::unique_ptr<CudaModelBackend>> LoadRandom(
      const ModelConfig& config, uint64_t seed, const CudaBackendOptions& options);
  ~CudaModelBackend() override;

  const ModelConfig& config() const override;
  int32_t page_size() const override;
  int64_t num_kv_pages() const override;
  std::string backend_name() const override { return "cuda"; }
  std::string dtype_name() const override;
  KvCacheDtype kv_cache_dtype() const override;  // ModelInfo, metrics, the prefix-cache salt
  bool batch_invariant() const override { return deterministic(); }

  absl::Status Step(absl::Span<const BatchRow> rows, std::vector<SampleResult>* samples,
                    StepStats* stats) override;
  absl::Status Forward(absl::Span<const BatchRow> rows, std::vector<float>* logits) override;
  // Step pipelining: Launch enqueues the step (staging, plan, forward, sampling, the results'
  // copy) and returns; feedback rows read their token from the previous step's device results.
  absl::Status Launch(absl::Span<const BatchRow> rows, StepStats* stats) override;
  absl::Status Finish(std::vector<SampleResult>* samples) override;
  bool overlaps_steps() const override { return true; }

  // Overwrites every KV page with random values (benchmarks: attention over realistic data
  // without running prefill first). Synchronous.
  absl::Status FillKvCacheRandom(uint64_t seed);

  // Turn CUDA-graph replay of decode-only steps, and the skinny GEMM for steps of 1..4 tokens, on
  // or off (benchmarks compare them).
  void SetCudaGraphs(bool enabled);
  void SetSkinnyGemm(bool enabled);
  // The fused small-batch path and programmatic dependent launch (benchmarks compare them; see
  // CudaBackendOptions). fused_available(): the model shape is supported; pdl_available(): the
  // device and the compiled kernels allow PDL.
  void SetFusedSmallBatch(bool enabled);
  // Deterministic (batch-invariant) mode on or off (CudaBackendOptions::deterministic).
  // FAILED_PRECONDITION under tensor parallelism; form: the faster parts (DeterministicForm).
  absl::Status SetDeterministic(bool enabled, DeterministicForm form = {});
  bool deterministic() const;
  void SetPdl(bool enabled);
  // The decode workqueue's layout (decode::PlanOptions::workqueue_balanced). REQUIRES: loaded.
  void SetWorkqueueBalanced(bool on);
  // 16-bit pages' w8s3 config for one- and two-row steps (CudaBackendOptions::decode_few_row_w8).
  // REQUIRES: loaded; on only takes effect when loaded with decode_few_row_w8.
  void SetFewRowW8(bool on);
  // Benchmarks only: steps launch no attention (outputs wrong), to time attention's share of the
  // critical path by its absence.
  void SetSkipAttentionForTiming(bool skip);
  void SetFusedPrefetchSteps(int32_t steps);
  void SetFusedGemvBulk(uint32_t projections);    // CudaBackendOptions::fused_gemv_bulk
  void SetFusedPrenormMinTokens(int32_t tokens);  // CudaBackendOptions::fused_prenorm_min_tokens
  // Turns tuned GEMM algorithms on (tuning first if not done yet: synchronous, seconds) or off.
  absl::Status SetGemmAutotune(bool enabled);
  bool fused_available() const;
  bool pdl_available() const;

  const StepTiming& last_timing() const;
  // Bytes of weights a decode step reads, and KV bytes per cached token (all layers, K and V).
  int64_t weight_read_bytes() const;
  int64_t kv_bytes_per_token() const;
  cudaStream_t stream() const;

  class Impl;

 private:
  explicit CudaModelBackend(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Whether a CUDA device is present and usable (for --backend=auto).
bool CudaDeviceUsable();

absl::StatusOr<std::unique_ptr<ModelBackend>> LoadCudaBackend(const std::string& model_dir,
                                                              const CudaBackendOptions& options);

}  // namespace pkv
