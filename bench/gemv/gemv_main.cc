// pkv-bench gemv: the fused few-token GEMV (kernels/model/gemv.h) side by side for dense, 4-bit
// and fp8 weights at the Llama 8B and 1B projection shapes, 1..8 tokens. Per cell: GPU time by
// CUDA events (median of --iters launches, the L2 flushed before each, so every launch streams
// its weights from memory as a decode step's layers do), the bytes it must move (packed weights,
// scales, activations in, outputs), the achieved GB/s, its fraction of the streaming-read
// bandwidth measured in the same run, and the speedup over dense at the same shape and tokens.
// Second time per cell, `chain`: the launch's share of a chain of back-to-back PDL launches over
// distinct copies of the weights (together >= kChainBytes, several times the L2, so every launch
// still streams from memory), as a decode step's projections run. The single event-timed launch
// pays the ~6 us event/launch floor each time; the chain shows what a kernel costs in the step.
// The input is the plain activation and the epilogue a 16-bit store (the fused norm / RoPE /
// SiLU / residual variants differ by a few hundred bytes per tile). See bench/NOTES.md.
//
// Column `xs KB`: the x bytes each CTA staged in shared memory (0: x read per step; gemv.h).
//
//   pkv-bench gemv [--dtype bf16|fp16] [--tokens 1,2,4,8] [--iters 200] [--out FILE.tsv]
//                  [--x_stage_max_bytes -1|0|N] [--prefetch_steps 0|N]
//                  [--stage_x auto|always|never] [--input plain|rmsnorm] [--parts 0|1..4]
//                  [--bulk]
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/bench_flags.h"
#include "bench/kernels/gpu_util.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "kernels/common/float16.h"
#include "kernels/model/gemv.h"

ABSL_FLAG(std::string, tokens, "1,2,4,8", "gemv: token counts (rows) timed, comma-separated");
ABSL_FLAG(
    int32_t, x_stage_max_bytes, -1,
    "gemv: shared memory a CTA may stage x in (gemv_plan.h); -1: QueryGemvDevice's figure "
    "(0 when built with -DPKV_GEMV_X_STAGE=OFF), 0: never stage, N: N bytes (H200: 71632 keeps "
    "3 CTAs per SM)");

ABSL_FLAG(int32_t, prefetch_steps, 0,
          "gemv: GemvArgs::prefetch_steps of every launch (L2 prefetch of later units before the "
          "PDL wait and of each next item's first batch; 0: none)");

ABSL_FLAG(bool, bulk, false,
          "gemv: GemvArgs::bulk on every launch (one-token dense launches take the bulk-copy "
          "kernel, gemv_bulk.cuh)");

ABSL_FLAG(std::string, stage_x, "auto",
          "gemv: x staging (gemv.h GemvStageX): auto (ChooseGemvStageX), always (when it fits), "
          "never");
ABSL_FLAG(std::string, input, "plain",
          "gemv: the input mode: plain (16-bit x) or rmsnorm (float x normalized in the kernel)");
ABSL_FLAG(int32_t, parts, 0, "gemv: split-K factor of every plan (0: the planner's)");
ABSL_FLAG(int32_t, grid_ctas_per_sm, 0,
          "gemv: grid of every plan capped at num_sms * N CTAs (0: the planner's, all resident "
          "slots); N below the resident CTAs per SM leaves slots for the next launch's CTAs");
ABSL_FLAG(std::string, formats, "dense,int4,fp8", "gemv: weight formats timed (dense first)");
ABSL_FLAG(std::string, gemv_shapes, "",
          "gemv: only the shapes whose name contains this (empty: all)");

namespace pkv::bench {
namespace {

using gpu::GemvWeightFormat;

struct Shape {
  const char* name;
  int32_t n, k;
};
constexpr Shape kShapes[] = {
    {"8B qkv", 6144, 4096},      {"8B o", 4096, 4096},    {"8B gate/up", 28672, 4096},
    {"8B down", 4096, 14336},    {"1B qkv", 3072, 2048},  {"1B o", 2048, 2048},
    {"1B gate/up", 16384, 2048}, {"1B down", 2048, 8192},
};
constexpr GemvWeightFormat kFormats[] = {GemvWeightFormat::kDense, GemvWeightFormat::kInt4,
                                         GemvWeightFormat::kFp8};
const char* FormatName(GemvWeightFormat f) {
  return f == GemvWeightFormat::kInt4 ? "int4" : f == GemvWeightFormat::kFp8 ? "fp8" : "dense";
}

// The weight copies a chain cycles through, together at least this many bytes (H200 L2: 60 MB).
constexpr int64_t kChainBytes = int64_t{256} << 20;
constexpr int kChainReps = 20;  // chains timed per cell (median)

// Device memory freed with the bench.
struct DevMem {
  void* p = nullptr;
  ~DevMem() { cudaFree(p); }
};

// One projection's device operands in one weight format: random weights (any bits are valid
// 4-bit codes; fp8 codes are random bytes), valid scale words / scales, random activations.
struct Operands {
  DevMem w, scales, x, y, partials, tickets, norm, sum_sq;
  gpu::GemvArgs args;   // copy 0
  int32_t copies = 1;   // weight (and scale) copies, each w_bytes / scale_bytes apart
  int64_t w_bytes = 0;  // one copy's packed weights
  int64_t scale_bytes = 0;
  gpu::GemvArgs Copy(int32_t i) const {
    gpu::GemvArgs a = args;
    a.w = static_cast<const char*>(args.w) + i * w_bytes;
    if (scale_bytes > 0) a.w_scales = static_cast<const char*>(args.w_scales) + i * scale_bytes;
    return a;
  }
};

absl::Status Prepare(const Shape& sh, GemvWeightFormat f, bool bf16, const gpu::GemvDevice& dev,
                     cudaStream_t stream, Operands* o) {
  gpu::GemvArgs& a = o->args;
  a.dtype = bf16 ? gpu::DType::kBFloat16 : gpu::DType::kFloat16;
  PKV_ASSIGN_OR_RETURN(a.plan, gpu::PlanGemv(sh.n, sh.k, 16, dev, f));
  if (const int32_t parts = absl::GetFlag(FLAGS_parts); parts > 0) {
    if (parts > gpu::kGemvMaxParts) return absl::InvalidArgumentError("--parts: 0..4");
    a.plan.parts = parts;  // the planner's other fields, as PlanGemv derives them
    a.plan.items = a.plan.tiles * parts;
    a.plan.grid = std::min(a.plan.items, dev.num_sms * dev.ctas_per_sm);
  }
  if (const int32_t cap = absl::GetFlag(FLAGS_grid_ctas_per_sm); cap > 0) {
    a.plan.grid = std::min(a.plan.items, dev.num_sms * std::min(cap, dev.ctas_per_sm));
  }
  const int64_t w_bytes = int64_t{sh.n} * sh.k *
                          (f == GemvWeightFormat::kInt4  ? 1
                           : f == GemvWeightFormat::kFp8 ? 2
                                                         : 4) /
                          2;
  o->w_bytes = w_bytes;
  o->copies = static_cast<int32_t>(std::max<int64_t>(2, (kChainBytes + w_bytes - 1) / w_bytes));
  PKV_CUDA_RETURN_IF_ERROR(cudaMalloc(&o->w.p, w_bytes * o->copies));
  PKV_RETURN_IF_ERROR(policy::FillRandom16(o->w.p, w_bytes * o->copies / 2, 7, bf16, stream));
  std::mt19937 rng(11);
  if (f == GemvWeightFormat::kInt4) {
    std::vector<uint32_t> words(int64_t{sh.n} * (sh.k / 128) * o->copies);
    o->scale_bytes = int64_t{sh.n} * (sh.k / 128) * 4;
    for (uint32_t& v : words) {
      const float scale = 0.01f + 0.001f * (rng() % 100);
      const float magic_zero = (bf16 ? 128.f : 1024.f) + rng() % 16;
      v = bf16 ? ToBFloat16(scale).bits | uint32_t{ToBFloat16(magic_zero).bits} << 16
               : ToHalf(scale).bits | uint32_t{ToHalf(magic_zero).bits} << 16;
    }
    PKV_CUDA_RETURN_IF_ERROR(cudaMalloc(&o->scales.p, words.size() * 4));
    PKV_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(o->scales.p, words.data(), words.size() * 4, cudaMemcpyHostToDevice));
  } else if (f == GemvWeightFormat::kFp8) {
    std::vector<float> s(int64_t{sh.n} * o->copies);
    o->scale_bytes = int64_t{sh.n} * 4;
    for (float& v : s) v = 1e-3f * (1 + rng() % 100);
    PKV_CUDA_RETURN_IF_ERROR(cudaMalloc(&o->scales.p, s.size() * 4));
    PKV_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(o->scales.p, s.data(), s.size() * 4, cudaMemcpyHostToDevice));
    a.w_scale_count = sh.n;
  }
  if (absl::GetFlag(FLAGS_input) == "rmsnorm") {
    // x: float residual rows; norm weight and one sum-of-squares part per token (any positive
    // values: the kernel's work does not depend on them).
    std::vector<float> x(int64_t{gpu::kGemvMaxTokens} * sh.k), nw(sh.k);
    std::vector<float> sum_sq(gpu::kGemvMaxTokens, static_cast<float>(sh.k));
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    for (float& v : x) v = u(rng);
    for (float& v : nw) v = 1.f + 0.1f * u(rng);
    PKV_CUDA_RETURN_IF_ERROR(cudaMalloc(&o->x.p, x.size() * 4));
    PKV_CUDA_RETURN_IF_ERROR(cudaMemcpy(o->x.p, x.data(), x.size() * 4, cudaMemcpyHostToDevice));
    PKV_CUDA_RETURN_IF_ERROR(cudaMalloc(&o->norm.p, nw.size() * 4));
    PKV_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(o->norm.p, nw.data(), nw.size() * 4, cudaMemcpyHostToDevice));
    PKV_CUDA_RETURN_IF_ERROR(cudaMalloc(&o->sum_sq.p, sum_sq.size() * 4));
    PKV_CUDA_RETURN_IF_ERROR(
        cudaMemcpy(o->sum_sq.p, sum_sq.data(), sum_sq.size() * 4, cudaMemcpyHostToDevice));
    a.input = gpu::GemvInput::kRmsNorm;
    a.norm_weight = static_cast<const float*>(o->norm.p);
    a.sum_sq_parts = static_cast<const float*>(o->sum_sq.p);
    a.num_sum_sq_parts = 1;
  } else {
    PKV_CUDA_RETURN_IF_ERROR(cudaMalloc(&o->x.p, int64_t{gpu::kGemvMaxTokens} * sh.k * 2));
    PKV_RETURN_IF_ERROR(
        policy::FillRandom16(o->x.p, int64_t{gpu::kGemvMaxTokens} * sh.k, 3, bf16, stream));
  }
  PKV_CUDA_RETURN_IF_ERROR(cudaMalloc(&o->y.p, int64_t{gpu::kGemvMaxTokens} * sh.n * 2));
  PKV_CUDA_RETURN_IF_ERROR(cudaMalloc(&o->partials.p, a.plan.partial_floats() * 4 + 16));
  PKV_CUDA_RETURN_IF_ERROR(cudaMalloc(&o->tickets.p, int64_t{a.plan.num_tickets()} * 4 + 16));
  PKV_CUDA_RETURN_IF_ERROR(cudaMemset(o->tickets.p, 0, int64_t{a.plan.num_tickets()} * 4 + 16));
  a.w = o->w.p;
  a.w_scales = o->scales.p;
  a.x = o->x.p;
  a.y = o->y.p;
  a.partials = static_cast<float*>(o->partials.p);
  a.tickets = static_cast<int32_t*>(o->tickets.p);
  return absl::OkStatus();
}

absl::Status Run() {
  const std::string dtype = absl::GetFlag(FLAGS_dtype);
  if (!dtype.empty() && dtype != "bf16" && dtype != "fp16") {
    return absl::InvalidArgumentError("--dtype: supported bf16, fp16");
  }
  const bool bf16 = dtype != "fp16";
  const std::string stage_flag = absl::GetFlag(FLAGS_stage_x), input = absl::GetFlag(FLAGS_input);
  if (stage_flag != "auto" && stage_flag != "always" && stage_flag != "never") {
    return absl::InvalidArgumentError("--stage_x: supported auto, always, never");
  }
  if (input != "plain" && input != "rmsnorm") {
    return absl::InvalidArgumentError("--input: supported plain, rmsnorm");
  }
  const gpu::GemvStageX stage_x = stage_flag == "always"  ? gpu::GemvStageX::kAlways
                                  : stage_flag == "never" ? gpu::GemvStageX::kNever
                                                          : gpu::GemvStageX::kAuto;
  const int64_t x_elem_bytes = input == "rmsnorm" ? 4 : 2;
  std::vector<int32_t> tokens;
  for (absl::string_view t : absl::StrSplit(absl::GetFlag(FLAGS_tokens), ',', absl::SkipEmpty())) {
    int32_t n = 0;
    if (!absl::SimpleAtoi(t, &n) || n < 1) {
      return absl::InvalidArgumentError(absl::StrCat("--tokens: '", t, "' is not a count >= 1"));
    }
    tokens.push_back(n);
  }
  bool timed[3] = {false, false, false};
  for (absl::string_view name :
       absl::StrSplit(absl::GetFlag(FLAGS_formats), ',', absl::SkipEmpty())) {
    bool found = false;
    for (int f = 0; f < 3; ++f) {
      if (name == FormatName(kFormats[f])) timed[f] = found = true;
    }
    if (!found) {
      return absl::InvalidArgumentError(
          absl::StrCat("--formats: '", name, "' is not one of dense, int4, fp8"));
    }
  }
  const int iters = std::max(1, absl::GetFlag(FLAGS_iters).value_or(200));
  PKV_ASSIGN_OR_RETURN(const bool pdl, gpu::PdlUsable(0));
  cudaStream_t stream;
  PKV_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  PKV_ASSIGN_OR_RETURN(const double stream_gbps,
                       MeasureStreamReadGBps(int64_t{4} << 30, 20, stream));
  PKV_ASSIGN_OR_RETURN(std::unique_ptr<policy::L2Flusher> flusher,
                       policy::L2Flusher::Create(int64_t{256} << 20, /*write=*/false));
  PKV_ASSIGN_OR_RETURN(std::unique_ptr<policy::EventTimer> timer,
                       policy::EventTimer::Create(iters));
  std::string tsv =
      "shape\tn\tk\ttokens\tformat\tparts\tgrid\tus\tbytes\tgbps\tfrac_stream\tspeedup_vs_"
      "dense\tchain_us\tchain_frac_stream\tchain_speedup_vs_dense\tx_stage_bytes\n";
  std::printf("streaming read: %.0f GB/s; dtype %s; median of %d launches, L2 flushed\n",
              stream_gbps, bf16 ? "bf16" : "fp16", iters);
  std::printf(
      "| shape | T | format | parts | us | MB moved | GB/s | of stream | vs dense | chain us | "
      "chain of stream | chain vs dense | xs KB |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Shape& sh : kShapes) {
    if (!absl::StrContains(sh.name, absl::GetFlag(FLAGS_gemv_shapes))) continue;
    std::unique_ptr<Operands> ops[3];
    for (int f = 0; f < 3; ++f) {
      if (!timed[f]) continue;
      PKV_ASSIGN_OR_RETURN(
          gpu::GemvDevice dev,
          gpu::QueryGemvDevice(0, bf16 ? gpu::DType::kBFloat16 : gpu::DType::kFloat16,
                               kFormats[f]));
      if (const int32_t cap = absl::GetFlag(FLAGS_x_stage_max_bytes); cap >= 0) {
        dev.x_stage_max_bytes = cap;
      }
      ops[f] = std::make_unique<Operands>();
      PKV_RETURN_IF_ERROR(Prepare(sh, kFormats[f], bf16, dev, stream, ops[f].get()));
    }
    for (int32_t t : tokens) {
      double dense_us = 0, dense_chain_us = 0;
      for (int f = 0; f < 3; ++f) {
        if (!timed[f]) continue;
        gpu::GemvArgs a = ops[f]->args;
        a.tokens = t;
        a.prefetch_steps = absl::GetFlag(FLAGS_prefetch_steps);
        a.stage_x = stage_x;
        a.bulk = absl::GetFlag(FLAGS_bulk);
        for (int w = 0; w < 3; ++w) PKV_RETURN_IF_ERROR(gpu::LaunchGemv(a, stream));  // warm-up
        PKV_ASSIGN_OR_RETURN(std::vector<double> us,
                             timer->Time(
                                 iters, flusher.get(), stream, [](int) { return absl::OkStatus(); },
                                 [&](int) { return gpu::LaunchGemv(a, stream); }));
        const double med = policy::Percentile(us, 0.5);
        // The chain: copies launches back to back, each on its own weights, PDL as in a step.
        const int32_t copies = ops[f]->copies;
        PKV_ASSIGN_OR_RETURN(
            std::vector<double> chain,
            timer->Time(
                kChainReps, flusher.get(), stream, [](int) { return absl::OkStatus(); },
                [&](int) -> absl::Status {
                  for (int32_t i = 0; i < copies; ++i) {
                    gpu::GemvArgs ai = ops[f]->Copy(i);
                    ai.tokens = t;
                    ai.pdl = pdl;
                    ai.prefetch_steps = a.prefetch_steps;
                    ai.stage_x = a.stage_x;
                    ai.bulk = a.bulk;
                    PKV_RETURN_IF_ERROR(gpu::LaunchGemv(ai, stream));
                  }
                  return absl::OkStatus();
                }));
        const double chain_us = policy::Percentile(chain, 0.5) / copies;
        if (f == 0) {
          dense_us = med;
          dense_chain_us = chain_us;
        }
        const int64_t bytes =
            a.plan.weight_bytes() + int64_t{t} * sh.k * x_elem_bytes + int64_t{t} * sh.n * 2;
        const int64_t staged = gpu::GemvStagedXBytes(a);
        const double gbps = bytes / (med * 1e-6) / 1e9;
        const double chain_frac = bytes / (chain_us * 1e-6) / 1e9 / stream_gbps;
        std::printf(
            "| %s | %d | %s | %d | %.2f | %.2f | %.0f | %.2f | %.2fx | %.2f | %.2f | %.2fx | %.1f "
            "|\n",
            sh.name, t, FormatName(kFormats[f]), a.plan.parts, med, bytes / 1e6, gbps,
            gbps / stream_gbps, dense_us / med, chain_us, chain_frac, dense_chain_us / chain_us,
            staged / 1024.0);
        absl::StrAppend(
            &tsv, absl::StrFormat("%s\t%d\t%d\t%d\t%s\t%d\t%d\t%.3f\t%d\t%.1f\t%.4f\t%.3f\t%.3f\t%."
                                  "4f\t%.3f\t%d\n",
                                  sh.name, sh.n, sh.k, t, FormatName(kFormats[f]), a.plan.parts,
                                  a.plan.grid, med, bytes, gbps, gbps / stream_gbps, dense_us / med,
                                  chain_us, chain_frac, dense_chain_us / chain_us, staged));
      }
    }
  }
  PKV_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  cudaStreamDestroy(stream);
  return WriteToOutFlag(tsv);
}

}  // namespace

int GemvMain() { return RunSubcommand("gemv", Run); }

}  // namespace pkv::bench
