#include "worker/service/worker_flags.h"

#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/time/time.h"

// Every default comes from WorkerOptions (worker_options.h), the one place they are kept.
static const pkv::WorkerOptions kDefaults;

ABSL_FLAG(std::string, listen, kDefaults.listen, "gRPC address (pkv.v1.Worker + grpc.health.v1)");
ABSL_FLAG(std::string, metrics_listen, kDefaults.metrics_listen, "Prometheus /metrics address");
ABSL_FLAG(std::string, worker_id, kDefaults.worker_id,
          "Name in logs, metrics and responses (default worker-<port>)");
ABSL_FLAG(std::string, model, kDefaults.model_dir,
          "Hugging Face model folder (config.json, "
          "*.safetensors, tokenizer.json)");
ABSL_FLAG(std::string, backend, kDefaults.backend,
          "auto | cpu | cuda (auto: cuda when a GPU is usable)");
ABSL_FLAG(int32_t, page_size, kDefaults.page_size, "KV tokens per page");
ABSL_FLAG(int64_t, kv_pages, kDefaults.kv_pages, "KV pages in the pool (0: backend default)");
ABSL_FLAG(std::string, kv_cache_dtype, kDefaults.kv_cache_dtype,
          "What KV pages store: auto (the model's dtype) | fp8_e4m3 | fp8_e5m2 (half the bytes "
          "of 16-bit KV, per-layer K/V scales from the checkpoint's k_scale/v_scale, else 1.0)");
ABSL_FLAG(double, kv_memory_fraction, kDefaults.kv_memory_fraction,
          "CUDA backend with --kv_pages=0: share of the GPU "
          "memory left free after weights and buffers that the KV pool takes");
ABSL_FLAG(double, gpu_memory_limit_gib, kDefaults.gpu_memory_limit_gib,
          "CUDA: GiB this worker may allocate on its GPU after its CUDA context is up (weights, "
          "buffers and the KV pool; 0: the whole GPU), e.g. 11.5 to run as on a 12 GB card; the "
          "KV pool takes --kv_memory_fraction of what the limit leaves");
ABSL_FLAG(std::string, policy_file, kDefaults.policy_file,
          "CUDA: decode-route policy file (pkv-bench calibrate); "
          "empty: <policy_dir>/<gpu>-<sms>sm.json, else an on-start calibration cached there");
ABSL_FLAG(std::string, policy_dir, kDefaults.policy_dir,
          "CUDA: per-GPU decode-route policy files and the "
          "on-start calibration cache");
ABSL_FLAG(bool, fused_small_batch, kDefaults.fused_small_batch,
          "CUDA: run steps of <= 8 tokens through the fused GEMV "
          "layer (5 launches a layer instead of 9)");
ABSL_FLAG(int32_t, fused_max_hidden, kDefaults.fused_max_hidden,
          "CUDA: models with a larger hidden size keep the cuBLAS path for steps of more than "
          "--fused_wide_max_tokens tokens (faster there on the H200); 0: no limit");
ABSL_FLAG(
    int32_t, fused_wide_max_tokens, kDefaults.fused_wide_max_tokens,
    "CUDA: steps of up to this many tokens (0..8) run the fused GEMV layer even for models "
    "wider than --fused_max_hidden (8B on the H200: fused 4.57 / 5.01 / 5.48 ms at B = 1 / 4 / 8 "
    "against cuBLAS 4.95 / 5.28 / 5.80)");
ABSL_FLAG(int32_t, fused_prenorm_min_tokens, kDefaults.fused_prenorm_min_tokens,
          "CUDA: fused steps of at least this many tokens normalize the q/k/v and gate/up inputs "
          "once (one RMSNorm launch each) instead of inside every GEMV step; -1: auto (4, or 8 "
          "with 4-bit weights), 0: never");
ABSL_FLAG(std::string, fused_gemv_bulk, kDefaults.fused_gemv_bulk,
          "CUDA (sm_90): the projections one-token fused steps stream through the bulk-copy GEMV: "
          "auto (all four: 8B and 1B B=1 ~3% faster on an H100; mixed sets lose), none, or some "
          "of qkv,o,gateup,down");
ABSL_FLAG(bool, pdl, kDefaults.pdl,
          "CUDA (sm_90+): programmatic dependent launch between layer kernels");
ABSL_FLAG(bool, deterministic, kDefaults.deterministic,
          "CUDA: batch-invariant decoding: a request's greedy and seeded outputs do not depend on "
          "which other requests share its steps (fixed-shape GEMMs, one attention kernel for "
          "every row); costs speed, single GPU only");
ABSL_FLAG(
    bool, deterministic_split_tiles, kDefaults.deterministic_split_tiles,
    "CUDA, with --deterministic: attention rows as split tiles (up to 16 CTAs a query head "
    "for a decode row, same bits) instead of whole rows (8B B=1 on the H200: 5.7 vs 10.9 ms)");
ABSL_FLAG(bool, deterministic_pinned_gemm, kDefaults.deterministic_pinned_gemm,
          "CUDA, with --deterministic: one cuBLASLt algorithm per projection at every token "
          "count instead of 64-row GEMM chunks (a prompt reads the weights once: 8B prefill 2048 "
          "103 vs 156 ms on the H200, but decode steps 2.6x slower)");
ABSL_FLAG(bool, gemm_autotune, kDefaults.gemm_autotune,
          "CUDA: time cuBLASLt algorithms per projection at load");
ABSL_FLAG(std::string, decode_policy, kDefaults.decode_policy,
          "CUDA: learned | threshold | fixed:<route>[:<min_split_tokens>] (empty: the "
          "policy file's kind, learned by default)");
ABSL_FLAG(int32_t, tp, kDefaults.tp,
          "Tensor-parallel ranks the model is split over (CPU backend: in-process "
          "rank threads); the model's KV heads and intermediate size must divide by it, and "
          "a 4-bit model's per-rank o_proj/down_proj inputs by its group size (quantized and "
          "FP8-KV models split on both backends)");
ABSL_FLAG(std::vector<std::string>, tp_devices, kDefaults.tp_devices,
          "CUDA with --tp N: the GPU of each rank, e.g. 0,1 (default: --gpu, --gpu + 1, ...); "
          "one GPU repeated (0,0) runs the ranks on that GPU without NCCL (tests, experiments)");
ABSL_FLAG(std::string, tp_comm, kDefaults.tp_comm,
          "CUDA with --tp N: auto | nccl | shared (auto: NCCL for "
          "distinct GPUs, the shared-device communicator for one GPU)");
ABSL_FLAG(int32_t, gpu, kDefaults.gpu,
          "CUDA device of this worker, one worker per GPU (-1: device 0 of "
          "CUDA_VISIBLE_DEVICES); made current before anything else touches CUDA");
ABSL_FLAG(int32_t, max_model_len, kDefaults.max_model_len,
          "Max prompt+generated tokens (0: the model's maximum); the "
          "worker refuses to start if it exceeds the model's max_position_embeddings or one "
          "such sequence cannot fit the KV pool");
ABSL_FLAG(int32_t, max_batch_tokens, kDefaults.max_batch_tokens,
          "Tokens fed per step (chunked-prefill budget)");
ABSL_FLAG(int32_t, max_running, kDefaults.max_running, "Sequences in the running batch");
ABSL_FLAG(int32_t, max_waiting, kDefaults.max_waiting, "Queued requests before RESOURCE_EXHAUSTED");
ABSL_FLAG(int64_t, max_queued_tokens, kDefaults.max_queued_tokens,
          "Queued prompt tokens before RESOURCE_EXHAUSTED");
ABSL_FLAG(bool, prefix_caching, kDefaults.prefix_caching,
          "Automatic prefix caching: reuse the KV pages of prompt prefixes seen before");
ABSL_FLAG(std::string, overlap_steps, kDefaults.overlap_steps,
          "auto | on | off. Launch step N+1 before step N finishes, so the host's work between "
          "steps (stop checks, streaming, scheduling, the next step's staging) overlaps the "
          "device's; a request that stops at step N computes one more token in vain. auto: where "
          "the backend overlaps steps (CUDA, tensor parallel 1); on: always (the CPU and tensor "
          "parallel backends run a step inside its launch, so each token arrives a step late)");
ABSL_FLAG(bool, prefix_wait_in_flight, kDefaults.prefix_wait_in_flight,
          "With prefix caching: a request whose next prompt page another request is prefilling "
          "waits for it instead of computing it too");
ABSL_FLAG(absl::Duration, drain_timeout, kDefaults.drain_timeout,
          "On SIGTERM/Drain: time in-flight requests get to finish, e.g. 30s");
ABSL_FLAG(absl::Duration, engine_stall_timeout, kDefaults.engine_stall_timeout,
          "Readiness NOT_SERVING while requests are in "
          "flight and no engine step finished for this long (a hung GPU); 0 = off");
ABSL_FLAG(int64_t, max_message_bytes, kDefaults.max_message_bytes,
          "Largest accepted request message");
ABSL_FLAG(bool, insecure, false, "Serve plaintext when no --tls_cert is given (local use only)");
ABSL_FLAG(std::string, tls_cert, "", "PEM certificate chain of the worker port (mutual TLS)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM CA bundle; clients (the router) must show a certificate "
          "it signed");
ABSL_FLAG(std::vector<std::string>, tls_client_names, {},
          "With mTLS: certificate identities "
          "(DNS SAN, or CN) allowed to call pkv.v1.Worker; empty = any the CA signed");
ABSL_FLAG(int32_t, max_metadata_bytes, kDefaults.max_metadata_bytes,
          "Largest accepted request metadata per call");
ABSL_FLAG(bool, enable_test_faults, kDefaults.enable_test_faults,
          "Allow --test_fault (tests only)");
ABSL_FLAG(std::string, test_fault, kDefaults.test_fault,
          "Fault hooks for tests, e.g. fail_forward_after:10");

namespace pkv {

WorkerOptions WorkerOptionsFromFlags() {
  WorkerOptions o;  // every field is set from its flag below
  o.listen = absl::GetFlag(FLAGS_listen);
  o.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  o.worker_id = absl::GetFlag(FLAGS_worker_id);
  o.model_dir = absl::GetFlag(FLAGS_model);
  o.backend = absl::GetFlag(FLAGS_backend);
  o.page_size = absl::GetFlag(FLAGS_page_size);
  o.kv_pages = absl::GetFlag(FLAGS_kv_pages);
  o.kv_cache_dtype = absl::GetFlag(FLAGS_kv_cache_dtype);
  o.kv_memory_fraction = absl::GetFlag(FLAGS_kv_memory_fraction);
  o.gpu_memory_limit_gib = absl::GetFlag(FLAGS_gpu_memory_limit_gib);
  o.policy_file = absl::GetFlag(FLAGS_policy_file);
  o.policy_dir = absl::GetFlag(FLAGS_policy_dir);
  o.decode_policy = absl::GetFlag(FLAGS_decode_policy);
  o.fused_small_batch = absl::GetFlag(FLAGS_fused_small_batch);
  o.fused_max_hidden = absl::GetFlag(FLAGS_fused_max_hidden);
  o.fused_wide_max_tokens = absl::GetFlag(FLAGS_fused_wide_max_tokens);
  o.fused_prenorm_min_tokens = absl::GetFlag(FLAGS_fused_prenorm_min_tokens);
  o.fused_gemv_bulk = absl::GetFlag(FLAGS_fused_gemv_bulk);
  o.pdl = absl::GetFlag(FLAGS_pdl);
  o.deterministic = absl::GetFlag(FLAGS_deterministic);
  o.deterministic_split_tiles = absl::GetFlag(FLAGS_deterministic_split_tiles);
  o.deterministic_pinned_gemm = absl::GetFlag(FLAGS_deterministic_pinned_gemm);
  o.gemm_autotune = absl::GetFlag(FLAGS_gemm_autotune);
  o.tp = absl::GetFlag(FLAGS_tp);
  o.gpu = absl::GetFlag(FLAGS_gpu);
  o.tp_devices = absl::GetFlag(FLAGS_tp_devices);
  o.tp_comm = absl::GetFlag(FLAGS_tp_comm);
  o.max_model_len = absl::GetFlag(FLAGS_max_model_len);
  o.max_batch_tokens = absl::GetFlag(FLAGS_max_batch_tokens);
  o.max_running = absl::GetFlag(FLAGS_max_running);
  o.max_waiting = absl::GetFlag(FLAGS_max_waiting);
  o.max_queued_tokens = absl::GetFlag(FLAGS_max_queued_tokens);
  o.prefix_caching = absl::GetFlag(FLAGS_prefix_caching);
  o.prefix_wait_in_flight = absl::GetFlag(FLAGS_prefix_wait_in_flight);
  o.overlap_steps = absl::GetFlag(FLAGS_overlap_steps);
  o.drain_timeout = absl::GetFlag(FLAGS_drain_timeout);
  o.engine_stall_timeout = absl::GetFlag(FLAGS_engine_stall_timeout);
  o.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  o.security.insecure = absl::GetFlag(FLAGS_insecure);
  o.security.tls = {absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key),
                    absl::GetFlag(FLAGS_tls_ca)};
  o.security.client_names = absl::GetFlag(FLAGS_tls_client_names);
  o.max_metadata_bytes = absl::GetFlag(FLAGS_max_metadata_bytes);
  o.enable_test_faults = absl::GetFlag(FLAGS_enable_test_faults);
  o.test_fault = absl::GetFlag(FLAGS_test_fault);
  return o;
}

}  // namespace pkv
