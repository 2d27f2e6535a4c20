// The pkv-worker process: serve pkv.v1.Worker + grpc.health.v1 on --listen and Prometheus
// /metrics on --metrics_listen, load the model, run the engine, and drain on SIGTERM or Drain.
//
// Health (worker_health.h): "" is liveness (SERVING while the process serves gRPC, NOT_SERVING
// after a fatal error); "pkv.v1.Worker" is readiness (SERVING once the engine runs, NOT_SERVING
// from the first moment of a drain, after a fatal backend error, or while the engine is stalled
// longer than engine_stall_timeout_s).
// Drain: stop admitting (UNAVAILABLE), let in-flight requests finish for up to the drain timeout,
// abort the rest with UNAVAILABLE (the router migrates them), shut the server down, exit 0.
// A fatal backend error fails every request with INTERNAL and exits 1 for a supervisor to restart.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "worker/service/worker_security.h"

namespace pkv {

struct WorkerOptions {
  std::string listen = "127.0.0.1:50061";
  std::string metrics_listen = "127.0.0.1:9101";
  std::string worker_id;  // default: "worker-" + port
  std::string model_dir;
  std::string backend = "auto";  // auto | cpu | cuda
  int32_t page_size = 16;
  int64_t kv_pages = 0;          // 0: backend default
  double kv_memory_fraction = 0.9;  // cuda, kv_pages == 0: share of free GPU memory for KV pages
  // cuda: decode-route policy (CudaBackendOptions::policy_file / policy_dir / decode_policy)
  std::string policy_file;
  std::string policy_dir = "policies";
  std::string decode_policy;
  bool fused_small_batch = true;   // CUDA: fused GEMV layer for steps of <= 8 tokens
  int32_t fused_max_hidden = 2048;  // CUDA: wider models keep cuBLAS (CudaBackendOptions)
  bool pdl = true;                 // CUDA: programmatic dependent launch
  bool gemm_autotune = false;      // CUDA: cuBLASLt algorithm search at load
  int32_t tp = 1;    // tensor-parallel ranks (CPU backend: in-process rank threads)
  int32_t gpu = -1;  // CUDA device ordinal of this worker; -1: device 0 of CUDA_VISIBLE_DEVICES
  // cuda, tp > 1: the device of each rank (empty: gpu, gpu + 1, ...; all equal: ranks share one
  // GPU) and the communicator (auto | nccl | shared; tp_cuda_backend.h).
  std::vector<std::string> tp_devices;
  std::string tp_comm = "auto";
  int32_t max_model_len = 0;     // 0: the model's max_position_embeddings
  int32_t max_batch_tokens = 512;
  int32_t max_running = 64;
  int32_t max_waiting = 256;
  int64_t max_queued_tokens = 262144;
  double drain_timeout_s = 30;
  // Readiness NOT_SERVING while requests are in flight and no engine step finished for this long
  // (a hung GPU); <= 0 turns the watchdog off.
  double engine_stall_timeout_s = 60;
  int64_t max_message_bytes = 4 << 20;
  WorkerSecurity security;  // mTLS or --insecure plaintext (worker_security.h)
  int32_t max_metadata_bytes = 8 << 10;
  bool enable_test_faults = false;
  std::string test_fault;
};

// Runs the worker until shutdown; returns the process exit code.
int RunWorker(const WorkerOptions& options);

}  // namespace pkv
