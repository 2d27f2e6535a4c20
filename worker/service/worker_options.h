// Configuration of one pkv-worker process, with every default in this one place: the binary's
// flags take their defaults from a default-constructed WorkerOptions (worker_flags.cc), tests fill
// it directly, and ValidateWorkerOptions checks it apart from flag parsing (as the router's
// router_options.h does). Plain value type.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/engine/engine.h"
#include "worker/scheduler/scheduler.h"
#include "worker/service/worker_security.h"

namespace pkv {

struct WorkerOptions {
  std::string listen = "127.0.0.1:50061";
  std::string metrics_listen = "127.0.0.1:9101";
  std::string worker_id;  // default: "worker-" + port
  std::string model_dir = "models/tiny";
  std::string backend = "auto";  // auto | cpu | cuda
  int32_t page_size = 16;
  int64_t kv_pages = 0;  // 0: backend default
  // What KV pages store: auto (the model's dtype) | fp8_e4m3 | fp8_e5m2 (ParseKvCacheDtype).
  std::string kv_cache_dtype = "auto";
  double kv_memory_fraction = 0.9;  // cuda, kv_pages == 0: share of free GPU memory for KV pages
  // cuda: GiB this worker may allocate on its GPU, context excluded (0: the whole GPU);
  // CudaBackendOptions::gpu_memory_limit_bytes. E.g. 11.5 on an H200 to size like a 12 GB card.
  double gpu_memory_limit_gib = 0;
  // cuda: decode-route policy (CudaBackendOptions::policy_file / policy_dir / decode_policy)
  std::string policy_file;
  std::string policy_dir = "policies";
  std::string decode_policy;
  bool fused_small_batch = true;    // CUDA: fused GEMV layer for steps of <= 8 tokens
  int32_t fused_max_hidden = 2048;  // CUDA: wider models keep cuBLAS (CudaBackendOptions)
  int32_t fused_wide_max_tokens = 8;
  int32_t fused_prenorm_min_tokens = -1;  // CUDA: kFusedPrenormAuto (CudaBackendOptions)  // CUDA:
                                          // ... except for steps of up to this many tokens
  std::string fused_gemv_bulk = "auto";   // CUDA: CudaBackendOptions::fused_gemv_bulk
  bool pdl = true;                        // CUDA: programmatic dependent launch
  bool gemm_autotune = false;             // CUDA: cuBLASLt algorithm search at load
  // CUDA: batch-invariant decoding (CudaBackendOptions::deterministic): greedy and seeded outputs
  // do not depend on the other requests of a step. Off by default: it costs more than 5% (see
  // bench/results/*-determinism). The CPU backend is batch-invariant either way. Needs --tp 1.
  bool deterministic = false;
  // CUDA: the mode's faster parts (CudaBackendOptions::deterministic_form: split attention tiles,
  // pinned GEMMs), each off until a GPU has run it.
  bool deterministic_split_tiles = true;
  bool deterministic_pinned_gemm = false;
  int32_t tp = 1;    // tensor-parallel ranks (CPU backend: in-process rank threads)
  int32_t gpu = -1;  // CUDA device ordinal of this worker; -1: device 0 of CUDA_VISIBLE_DEVICES
  // cuda, tp > 1: the device of each rank (empty: gpu, gpu + 1, ...; all equal: ranks share one
  // GPU) and the communicator (auto | nccl | shared; tp_cuda_backend.h).
  std::vector<std::string> tp_devices;
  std::string tp_comm = "auto";
  int32_t max_model_len = 0;  // 0: the model's max_position_embeddings
  // The scheduler's limits (worker/scheduler/scheduler.h owns their defaults); page_size above is
  // the one the scheduler gets.
  int32_t max_batch_tokens = SchedulerConfig{}.max_batch_tokens;
  int32_t max_running = SchedulerConfig{}.max_running;
  int32_t max_waiting = SchedulerConfig{}.max_waiting;
  int64_t max_queued_tokens = SchedulerConfig{}.max_queued_tokens;
  // Automatic prefix caching: full KV pages shared across requests by prefix hash.
  bool prefix_caching = SchedulerConfig{}.prefix_caching;
  // A request waits for a prefix page another is prefilling rather than computing it too.
  bool prefix_wait_in_flight = SchedulerConfig{}.prefix_wait_in_flight;
  // Step pipelining (EngineOptions::overlap_steps): step N+1 is launched before step N is
  // finished. auto: where the backend overlaps them (CUDA; measured -0.5..-4.6% a step on an
  // H100, bench/results/2026-12-05-h100-overlap18); on: always (a backend whose launch runs the
  // step, CPU or tensor parallel, then delivers each token a step late: for tests); off.
  std::string overlap_steps = "auto";
  // On SIGTERM or Drain, in-flight requests get this long to finish (zero: aborted at once).
  absl::Duration drain_timeout = absl::Seconds(30);
  // Readiness NOT_SERVING while requests are in flight and no engine step finished for this long
  // (a hung GPU); zero turns the watchdog off.
  absl::Duration engine_stall_timeout = absl::Seconds(60);
  int64_t max_message_bytes = 4 << 20;
  WorkerSecurity security;  // mTLS or --insecure plaintext (worker_security.h)
  int32_t max_metadata_bytes = 8 << 10;
  bool enable_test_faults = false;
  std::string test_fault;

  // The scheduler's configuration for a backend with `page_size`-token pages.
  SchedulerConfig Scheduler(int32_t backend_page_size) const;
};

// Ranges and choices (positive limits, a known backend, a KV fraction in (0, 1], finite
// non-negative timeouts, ...);
// INVALID_ARGUMENT naming the flag and the value.
absl::Status ValidateWorkerOptions(const WorkerOptions& options);

// Whether the engine pipelines steps under --overlap_steps `mode` (auto | on | off) with a
// backend that does (`backend_overlaps`) or does not overlap them; INVALID_ARGUMENT otherwise.
absl::StatusOr<bool> PipelineSteps(const std::string& mode, bool backend_overlaps);

}  // namespace pkv
