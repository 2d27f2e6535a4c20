// pkv-tp-bench cpu|nccl|cuda [flags]; see tp_bench.h.
//   pkv-tp-bench cpu  [--model DIR | --shape tiny] [--layers N] [--tp 1,2,4] [--batch 8]
//                     [--context 128] [--steps 32]
//   pkv-tp-bench nccl [--gpus 0,1,2,3] [--tp 1,2,4] [--shape llama3-8b] [--batch 1,8,32,128]
//                     [--dtype bfloat16] [--iters 50]
//   pkv-tp-bench cuda [--gpus 0,1,2,3 | --gpus 0 --share_gpu] [--tp 1,2,4] [--shape llama3-8b]
//                     [--layers N] [--batch 1,8,32,64] [--context 512] [--steps 32]
//                     [--timed_steps 8] [--fused]
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "bench/tp/tp_bench.h"

ABSL_FLAG(std::string, model, "", "cpu: model directory (default: random weights of --shape)");
ABSL_FLAG(std::string, shape, "",
          "model shape (pkv-make-model's): cpu default tiny, nccl "
          "default llama3-8b");
ABSL_FLAG(int32_t, layers, 0, "cpu: override the shape's layer count (0: keep)");
ABSL_FLAG(std::vector<std::string>, tp, {},
          "tensor-parallel sizes (cpu default 1,2,4; nccl "
          "default 1,2)");
ABSL_FLAG(std::vector<std::string>, batch, {},
          "decode rows (cpu: one value, default 8; nccl: "
          "list, default 1,8,32,128)");
ABSL_FLAG(int32_t, context, 128, "cpu: prompt tokens per row before decoding");
ABSL_FLAG(int32_t, steps, 32, "cpu: decode steps measured");
ABSL_FLAG(std::vector<std::string>, gpus, {},
          "nccl: CUDA devices (default 0,1); tp uses the first tp");
ABSL_FLAG(std::string, dtype, "bfloat16", "nccl: activation dtype all-reduced");
ABSL_FLAG(int32_t, iters, 50, "nccl: timed steps per configuration");
ABSL_FLAG(bool, share_gpu, false, "cuda: every rank on the first of --gpus (single-GPU runs)");
ABSL_FLAG(int32_t, timed_steps, 8, "cuda: eager steps with CUDA-event-timed collectives");
ABSL_FLAG(bool, fused, false, "cuda: TP=1 with the fused small-batch path (TP ranks never)");
ABSL_FLAG(std::string, policy_dir, "policies", "cuda: decode-route policy directory");

namespace {

std::vector<int> Ints(const std::vector<std::string>& v, std::vector<int> fallback) {
  if (v.empty()) return fallback;
  std::vector<int> out;
  for (const std::string& s : v) out.push_back(std::stoi(s));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("pkv-tp-bench cpu|nccl|cuda [flags] (see bench/tp)");
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  const std::string mode = args.size() > 1 ? args[1] : "";
  const std::string shape = absl::GetFlag(FLAGS_shape);
  if (mode == "cpu") {
    pkv::tp_bench::CpuBenchOptions o;
    o.model_dir = absl::GetFlag(FLAGS_model);
    if (!shape.empty()) o.shape = shape;
    o.layers = absl::GetFlag(FLAGS_layers);
    o.tps = Ints(absl::GetFlag(FLAGS_tp), o.tps);
    o.batch = Ints(absl::GetFlag(FLAGS_batch), {o.batch})[0];
    o.context = absl::GetFlag(FLAGS_context);
    o.steps = absl::GetFlag(FLAGS_steps);
    return pkv::tp_bench::RunCpuBench(o);
  }
  if (mode == "nccl") {
    pkv::tp_bench::NcclBenchOptions o;
    if (!shape.empty()) o.shape = shape;
    o.gpus = Ints(absl::GetFlag(FLAGS_gpus), o.gpus);
    o.tps = Ints(absl::GetFlag(FLAGS_tp), o.tps);
    o.batches = Ints(absl::GetFlag(FLAGS_batch), o.batches);
    o.dtype = absl::GetFlag(FLAGS_dtype);
    o.iters = absl::GetFlag(FLAGS_iters);
    return pkv::tp_bench::RunNcclBench(o);
  }
  if (mode == "cuda") {
    pkv::tp_bench::CudaBenchOptions o;
    if (!shape.empty()) o.shape = shape;
    o.layers = absl::GetFlag(FLAGS_layers);
    o.gpus = Ints(absl::GetFlag(FLAGS_gpus), o.gpus);
    o.share_gpu = absl::GetFlag(FLAGS_share_gpu);
    o.tps = Ints(absl::GetFlag(FLAGS_tp), o.tps);
    o.batches = Ints(absl::GetFlag(FLAGS_batch), o.batches);
    o.context = absl::GetFlag(FLAGS_context);
    o.steps = absl::GetFlag(FLAGS_steps);
    o.timed_steps = absl::GetFlag(FLAGS_timed_steps);
    o.dtype = absl::GetFlag(FLAGS_dtype);
    o.fused = absl::GetFlag(FLAGS_fused);
    o.policy_dir = absl::GetFlag(FLAGS_policy_dir);
    return pkv::tp_bench::RunCudaBench(o);
  }
  std::fprintf(stderr, "usage: pkv-tp-bench cpu|nccl|cuda [flags]; --help lists the flags\n");
  return 2;
}
