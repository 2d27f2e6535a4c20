// pkv-tp-bench: measurements for tensor parallelism.
//   cpu   decode tokens/s and time inside collectives per step of the tensor-parallel CPU backend
//         (tp_cpu_backend.h) for each --tp, on a model directory or a random model of a shape;
//   nccl  the collectives one decode step of a tensor-parallel Llama issues (2 all-reduces of
//         [batch][hidden] per layer + the embedding's, one all-gather of the vocab-parallel
//         logits), over NCCL on the first tp GPUs of --gpus, timed with CUDA events: the
//         all-reduce time per step TP adds to a GPU decode step. Built only with NCCL;
//   cuda  decode tokens/s of the CUDA backend itself for each --tp (tp_cuda_backend.h; TP = 1 is
//         the one-GPU backend) and the CUDA-event time inside its collectives per step (eager
//         steps), on random weights of a shape. Built only with CUDA.
// Output: one TSV row per configuration on stdout (header first); progress and the transport log
// line on stderr. Benchmark code: allocates freely; not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pkv::tp_bench {

struct CpuBenchOptions {
  std::string model_dir;  // empty: random weights of `shape`
  std::string shape = "tiny";
  int32_t layers = 0;  // > 0: override the shape's layer count (keeps big shapes affordable)
  std::vector<int> tps = {1, 2, 4};
  int32_t batch = 8;
  int32_t context = 128;  // prompt tokens per row before decoding
  int32_t steps = 32;     // decode steps measured
  int32_t warmup = 3;
  uint64_t seed = 1;
};
int RunCpuBench(const CpuBenchOptions& options);

struct NcclBenchOptions {
  std::vector<int> gpus = {0, 1};
  std::vector<int> tps = {1, 2};
  std::string shape = "llama3-8b";  // hidden, layers, vocab come from it
  std::vector<int32_t> batches = {1, 8, 32, 128};
  std::string dtype = "bfloat16";  // activations all-reduced: bfloat16 | float16 | float32
  int32_t iters = 50;
  int32_t warmup = 5;
};
int RunNcclBench(const NcclBenchOptions& options);

struct CudaBenchOptions {
  std::string shape = "llama3-8b";
  int32_t layers = 0;             // > 0: override the shape's layer count
  std::vector<int> gpus = {0};    // tp > 1 uses the first tp (or only the first: share_gpu)
  bool share_gpu = false;         // every rank on gpus[0] (the shared-device communicator)
  std::vector<int> tps = {1, 2};  // 1: the one-GPU backend (the baseline)
  std::vector<int32_t> batches = {1, 8, 32, 64};
  int32_t context = 512;  // KV tokens per row before the measured steps (random values)
  int32_t warmup = 5;
  int32_t steps = 32;       // timed decode steps (graphs as the backend runs them)
  int32_t timed_steps = 8;  // eager steps with CUDA-event-timed collectives
  std::string dtype = "bfloat16";
  bool fused = false;  // TP = 1 with the fused small-batch path (TP ranks never use it)
  std::string policy_dir = "policies";
  double kv_memory_fraction = 0.5;
  uint64_t seed = 1;
};
// Built with CUDA only (the stub says so elsewhere).
int RunCudaBench(const CudaBenchOptions& options);

}  // namespace pkv::tp_bench
