// pkv-bench qgemm: the quantized-weight GEMM (kernels/model/qgemm.h) side by side with what it
// replaces, dequantize into scratch + cuBLAS, and with bf16 cuBLAS on dense weights, at the Llama
// 8B projection shapes and 16..256 tokens, 4-bit and fp8 weights, bf16 activations.
// Every variant is timed as the share of one launch in a chain over distinct weight copies
// (together >= 256 MB, several times the L2, so each launch streams its weights from memory as a
// step's layers do; the L2 flushed before each chain; median of --iters chains). cuBLAS runs the
// backend's autotuned choice (Gemm::Tune) for each exact problem, dequantize + cuBLAS the same on
// the dense scratch. Bytes: what each variant must move (packed weights and scales, x, y; the
// dequantize pass adds 2 bytes written and read per weight); "of stream" is the qgemm's bytes per
// second against the streaming-read bandwidth measured in the same run. With --qgemm_parts the
// qgemm is also timed at each listed split factor (the planner's rule's measurement), with
// --qgemm_variants at each listed memory-pipeline variant (QGemmArgs: L2 hint, stagger, prefetch).
//
// The first warm-up op of each chain runs inside an NVTX range named for its variant ("dense",
// "dequant", "qgemm"), so a profiler picks one launch per cell (ncu --nvtx --nvtx-include qgemm/).
//
//   pkv-bench qgemm [--qgemm_tokens 16,32,64,128,256] [--qgemm_parts 1,2,4,8,16]
//                   [--qgemm_variants base,l2,stagger,pf4,all,pf8,ring2,ring4]
//                   [--qgemm_shapes "8B gate/up,8B down"] [--qgemm_formats int4,fp8]
//                   [--iters 10] [--out FILE.tsv]
#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/bench_flags.h"
#include "bench/kernels/gpu_util.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "kernels/model/gemv.h"
#include "kernels/model/qgemm.h"
#include "worker/cuda_backend/gemm.h"
#include "worker/cuda_backend/quant_pack.h"

ABSL_FLAG(std::string, qgemm_tokens, "16,32,64,128,256", "qgemm: token counts (rows) timed");
ABSL_FLAG(std::string, qgemm_parts, "", "qgemm: split factors also timed (empty: the rule only)");
ABSL_FLAG(std::string, qgemm_variants, "",
          "qgemm: memory-pipeline variants also timed at the rule's split, comma-separated: "
          "base (no L2 hint, no stagger, no prefetch: the defaults), l2, stagger, pf4 (one "
          "each), all (the three, prefetch 4), pf8 (the three, prefetch 8), ring2 / ring4 (the "
          "defaults at ring depth 2 / 4)");

ABSL_FLAG(std::string, qgemm_shapes, "",
          "qgemm: the shapes timed, comma-separated names (\"8B qkv\", \"8B o\", \"8B "
          "gate/up\", \"8B down\"); empty: all");
ABSL_FLAG(std::string, qgemm_formats, "int4,fp8", "qgemm: the packed formats timed (int4, fp8)");

namespace pkv::bench {
namespace {

using gpu::GemvWeightFormat;

struct Shape {
  const char* name;
  int32_t n, k;
};
constexpr Shape kShapes[] = {{"8B qkv", 6144, 4096},
                             {"8B o", 4096, 4096},
                             {"8B gate/up", 28672, 4096},
                             {"8B down", 4096, 14336}};
constexpr int64_t kChainBytes = int64_t{256} << 20;

struct DevMem {
  void* p = nullptr;
  DevMem() = default;
  DevMem(const DevMem&) = delete;
  DevMem& operator=(const DevMem&) = delete;
  ~DevMem() { cudaFree(p); }
};

// `copies` copies of one projection's weights in one format, each `bytes` (+ scale_bytes) apart.
struct Weights {
  GemvWeightFormat format = GemvWeightFormat::kDense;
  DevMem w, scales;
  int64_t bytes = 0, scale_bytes = 0;
  int32_t copies = 1, scale_count = 0;
  const void* W(int32_t i) const { return static_cast<const char*>(w.p) + i * bytes; }
  const void* S(int32_t i) const { return static_cast<const char*>(scales.p) + i * scale_bytes; }
};

absl::Status MakeWeights(const Shape& sh, GemvWeightFormat f, cudaStream_t stream, Weights* o) {
  o->format = f;
  const int64_t nk = int64_t{sh.n} * sh.k;
  o->bytes = f == GemvWeightFormat::kInt4 ? nk / 2 : f == GemvWeightFormat::kFp8 ? nk : 2 * nk;
  o->copies = static_cast<int32_t>(std::max<int64_t>(2, (kChainBytes + o->bytes - 1) / o->bytes));
  PKV_CUDA_RETURN_IF_ERROR(cudaMalloc(&o->w.p, o->bytes * o->copies));
  if (f == GemvWeightFormat::kDense) {
    return FillRandom16(o->w.p, o->bytes * o->copies / 2, 7, /*bf16=*/true, stream);
  }
  // All copies as one tall matrix: copy i's rows (and scale rows) follow copy i - 1's.
  cuda_backend::PackedLayout l;
  l.format = f;
  l.q_bytes = o->bytes * o->copies;
  const int64_t rows = int64_t{sh.n} * o->copies;
  o->scale_bytes = f == GemvWeightFormat::kInt4 ? int64_t{sh.n} * (sh.k / 128) * 4 : sh.n * 4;
  o->scale_count = f == GemvWeightFormat::kFp8 ? sh.n : 0;
  l.scale_count = f == GemvWeightFormat::kFp8 ? static_cast<int32_t>(rows) : 0;
  l.scale_bytes = o->scale_bytes * o->copies;
  PKV_CUDA_RETURN_IF_ERROR(cudaMalloc(&o->scales.p, l.scale_bytes));
  return cuda_backend::FillRandomPacked(l, rows, sh.k, gpu::DType::kBFloat16, 9, o->w.p,
                                        o->scales.p, stream);
}

absl::StatusOr<std::vector<int32_t>> ParseList(const std::string& s, const char* flag) {
  std::vector<int32_t> out;
  for (absl::string_view t : absl::StrSplit(s, ',', absl::SkipEmpty())) {
    int32_t v = 0;
    if (!absl::SimpleAtoi(t, &v) || v < 1) {
      return absl::InvalidArgumentError(absl::StrCat(flag, ": '", t, "' is not a count >= 1"));
    }
    out.push_back(v);
  }
  return out;
}

// The memory-pipeline variant `v` (--qgemm_variants) on top of the defaults ("" keeps them).
absl::Status ApplyVariant(const std::string& v, gpu::QGemmArgs* a) {
  if (v.empty()) return absl::OkStatus();
  if (v == "all" || v == "pf8") {
    a->l2_256b = a->stagger = true;
    a->prefetch_stages = v == "all" ? 4 : 8;
    return absl::OkStatus();
  }
  if (v == "ring2" || v == "ring4") {  // the defaults with another cp.async ring depth
    a->plan.stages = v == "ring2" ? 2 : 4;
    a->plan.smem_bytes = a->plan.stages * a->plan.stage_bytes() + a->plan.table_bytes();
    return absl::OkStatus();
  }
  a->l2_256b = v == "l2";
  a->stagger = v == "stagger";
  a->prefetch_stages = v == "pf4" ? 4 : 0;
  if (v == "base" || v == "l2" || v == "stagger" || v == "pf4") return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "--qgemm_variants: '", v, "'; supported: base, l2, stagger, pf4, all, pf8, ring2, ring4"));
}

// Everything one run shares.
struct Bench {
  cudaStream_t stream = nullptr;
  bool pdl = false;
  int iters = 10;
  gpu::QGemmDevice dev;
  std::unique_ptr<policy::L2Flusher> flusher;
  std::unique_ptr<policy::EventTimer> timer;
  std::unique_ptr<cuda_backend::Gemm> gemm;
  DevMem x, y, partials, tickets, scratch;
  int64_t partial_bytes = 0;

  // Median GPU time of one op in a chain of `copies` ops (op(i) enqueues copy i's). The first
  // warm-up op runs inside the NVTX range `range` (the launch a profiler picks).
  absl::StatusOr<double> Chain(const char* range, int32_t copies,
                               const std::function<absl::Status(int32_t)>& op) {
    nvtxRangePushA(range);
    const absl::Status first = op(0);
    nvtxRangePop();
    PKV_RETURN_IF_ERROR(first);
    for (int32_t i = 1; i < std::min(copies, 3); ++i) PKV_RETURN_IF_ERROR(op(i));  // warm-up
    PKV_ASSIGN_OR_RETURN(std::vector<double> us,
                         timer->Time(
                             iters, flusher.get(), stream, [](int) { return absl::OkStatus(); },
                             [&](int) -> absl::Status {
                               for (int32_t i = 0; i < copies; ++i) PKV_RETURN_IF_ERROR(op(i));
                               return absl::OkStatus();
                             }));
    return policy::Percentile(us, 0.5) / copies;
  }

  absl::StatusOr<double> TimeQGemm(const Shape& sh, const Weights& w, int32_t m, int32_t parts,
                                   const std::string& variant, int32_t* parts_used) {
    PKV_ASSIGN_OR_RETURN(gpu::QGemmPlan plan, gpu::PlanQGemm(m, sh.n, sh.k, w.format, dev, parts));
    if (plan.partial_floats() * 4 > partial_bytes) {
      return absl::ResourceExhaustedError("qgemm bench: partials workspace too small");
    }
    *parts_used = plan.parts;
    gpu::QGemmArgs a;
    a.dtype = gpu::DType::kBFloat16;
    a.plan = plan;
    a.x = x.p;
    a.y = y.p;
    a.partials = static_cast<float*>(partials.p);
    a.tickets = static_cast<int32_t*>(tickets.p);
    a.w_scale_count = w.scale_count;
    a.pdl = pdl;
    PKV_RETURN_IF_ERROR(ApplyVariant(variant, &a));
    return Chain("qgemm", w.copies, [&](int32_t i) {
      gpu::QGemmArgs ai = a;
      ai.w = w.W(i);
      ai.w_scales = w.S(i);
      return gpu::LaunchQGemm(ai, stream);
    });
  }

  absl::StatusOr<double> TimeDequantCublas(const Shape& sh, const Weights& w, int32_t m) {
    cuda_backend::Gemm::TuneProblem tp;
    tp.tokens = m;
    tp.in = sh.k;
    tp.out = sh.n;
    tp.weights = {scratch.p};
    tp.x = x.p;
    tp.y = y.p;
    PKV_RETURN_IF_ERROR(gemm->Tune(tp, stream));
    return Chain("dequant", w.copies, [&](int32_t i) -> absl::Status {
      gpu::GemvDequantArgs d;
      d.dtype = gpu::DType::kBFloat16;
      d.format = w.format;
      d.n = sh.n;
      d.k = sh.k;
      d.w = w.W(i);
      d.w_scales = w.S(i);
      d.w_scale_count = w.scale_count;
      d.out = scratch.p;
      PKV_RETURN_IF_ERROR(gpu::LaunchDequantizeGemvWeights(d, stream));
      return gemm->Linear(gpu::DType::kBFloat16, x.p, m, sh.k, scratch.p, sh.n, y.p, false, stream);
    });
  }

  absl::StatusOr<double> TimeDense(const Shape& sh, const Weights& w, int32_t m) {
    cuda_backend::Gemm::TuneProblem tp;
    tp.tokens = m;
    tp.in = sh.k;
    tp.out = sh.n;
    for (int32_t i = 0; i < w.copies; ++i) tp.weights.push_back(w.W(i));
    tp.x = x.p;
    tp.y = y.p;
    PKV_RETURN_IF_ERROR(gemm->Tune(tp, stream));
    return Chain("dense", w.copies, [&](int32_t i) {
      return gemm->Linear(gpu::DType::kBFloat16, x.p, m, sh.k, w.W(i), sh.n, y.p, false, stream);
    });
  }
};

const char* FormatName(GemvWeightFormat f) { return f == GemvWeightFormat::kInt4 ? "int4" : "fp8"; }

absl::Status Run() {
  PKV_ASSIGN_OR_RETURN(std::vector<int32_t> tokens,
                       ParseList(absl::GetFlag(FLAGS_qgemm_tokens), "--qgemm_tokens"));
  PKV_ASSIGN_OR_RETURN(std::vector<int32_t> sweep,
                       ParseList(absl::GetFlag(FLAGS_qgemm_parts), "--qgemm_parts"));
  std::vector<std::string> variants = {""};
  for (absl::string_view v :
       absl::StrSplit(absl::GetFlag(FLAGS_qgemm_variants), ',', absl::SkipEmpty())) {
    variants.emplace_back(v);
  }
  Bench b;
  b.iters = std::max(1, absl::GetFlag(FLAGS_iters).value_or(10));
  PKV_ASSIGN_OR_RETURN(b.pdl, gpu::PdlUsable(0));
  PKV_ASSIGN_OR_RETURN(b.dev, gpu::QueryQGemmDevice(0));
  PKV_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&b.stream, cudaStreamNonBlocking));
  PKV_ASSIGN_OR_RETURN(const double stream_gbps,
                       MeasureStreamReadGBps(int64_t{4} << 30, 20, b.stream));
  PKV_ASSIGN_OR_RETURN(b.flusher, policy::L2Flusher::Create(int64_t{256} << 20, false));
  PKV_ASSIGN_OR_RETURN(b.timer, policy::EventTimer::Create(b.iters));
  PKV_ASSIGN_OR_RETURN(b.gemm, cuda_backend::Gemm::Create(int64_t{32} << 20));
  b.gemm->set_tuned(true);
  const int32_t max_m = *std::max_element(tokens.begin(), tokens.end());
  int64_t max_n = 0, max_k = 0, max_nk = 0;
  for (const Shape& sh : kShapes) {
    max_n = std::max<int64_t>(max_n, sh.n);
    max_k = std::max<int64_t>(max_k, sh.k);
    max_nk = std::max<int64_t>(max_nk, int64_t{sh.n} * sh.k);
  }
  PKV_CUDA_RETURN_IF_ERROR(cudaMalloc(&b.x.p, int64_t{max_m} * max_k * 2));
  PKV_RETURN_IF_ERROR(FillRandom16(b.x.p, int64_t{max_m} * max_k, 3, true, b.stream));
  PKV_CUDA_RETURN_IF_ERROR(cudaMalloc(&b.y.p, int64_t{max_m} * max_n * 4));
  PKV_CUDA_RETURN_IF_ERROR(cudaMalloc(&b.scratch.p, max_nk * 2));
  b.partial_bytes = int64_t{256} << 20;
  PKV_CUDA_RETURN_IF_ERROR(cudaMalloc(&b.partials.p, b.partial_bytes));
  PKV_CUDA_RETURN_IF_ERROR(cudaMalloc(&b.tickets.p, 1 << 20));
  PKV_CUDA_RETURN_IF_ERROR(cudaMemset(b.tickets.p, 0, 1 << 20));

  std::printf(
      "streaming read: %.0f GB/s; bf16 activations; chains over weight copies, median of "
      "%d, L2 flushed per chain; cuBLAS autotuned\n",
      stream_gbps, b.iters);
  std::printf(
      "| shape | M | format | parts | qgemm us | dequant+cuBLAS us | bf16 cuBLAS us | vs "
      "dequant | vs bf16 | qgemm MB | qgemm of stream |\n|---|---|---|---|---|---|---|---|---|"
      "---|---|\n");
  std::string tsv =
      "shape\tn\tk\tm\tformat\tparts\tqgemm_us\tdequant_cublas_us\tbf16_cublas_us\tqgemm_bytes\t"
      "qgemm_frac_stream\n";
  const std::vector<std::string> shapes =
      absl::StrSplit(absl::GetFlag(FLAGS_qgemm_shapes), ',', absl::SkipEmpty());
  std::vector<GemvWeightFormat> formats;
  for (absl::string_view f :
       absl::StrSplit(absl::GetFlag(FLAGS_qgemm_formats), ',', absl::SkipEmpty())) {
    if (f != "int4" && f != "fp8") {
      return absl::InvalidArgumentError(absl::StrCat("--qgemm_formats: '", f, "'; int4, fp8"));
    }
    formats.push_back(f == "int4" ? GemvWeightFormat::kInt4 : GemvWeightFormat::kFp8);
  }
  for (const Shape& sh : kShapes) {
    if (!shapes.empty() && std::find(shapes.begin(), shapes.end(), sh.name) == shapes.end()) {
      continue;
    }
    Weights dense;
    std::vector<Weights> packed(formats.size());
    PKV_RETURN_IF_ERROR(MakeWeights(sh, GemvWeightFormat::kDense, b.stream, &dense));
    for (size_t i = 0; i < formats.size(); ++i) {
      PKV_RETURN_IF_ERROR(MakeWeights(sh, formats[i], b.stream, &packed[i]));
    }
    for (int32_t m : tokens) {
      PKV_ASSIGN_OR_RETURN(const double bf16_us, b.TimeDense(sh, dense, m));
      for (const Weights& w : packed) {
        PKV_ASSIGN_OR_RETURN(const double deq_us, b.TimeDequantCublas(sh, w, m));
        // (variant, forced parts): the defaults at the rule's split, each variant at the rule's
        // split, the defaults at each swept split.
        std::vector<std::pair<std::string, int32_t>> runs;
        for (const std::string& v : variants) runs.push_back({v, 0});
        for (int32_t p : sweep) runs.push_back({"", p});
        for (const auto& [variant, forced] : runs) {
          int32_t parts = 0;
          absl::StatusOr<double> us = b.TimeQGemm(sh, w, m, forced, variant, &parts);
          if (!us.ok()) {
            std::printf("| %s | %d | %s | %d | %s |\n", sh.name, m, FormatName(w.format), forced,
                        std::string(us.status().message()).c_str());
            continue;
          }
          const int64_t bytes = w.bytes + w.scale_bytes + int64_t{m} * (sh.k + sh.n) * 2;
          const double frac = bytes / (*us * 1e-6) / 1e9 / stream_gbps;
          const std::string label =
              absl::StrCat(forced == 0 ? "" : "=", parts, variant.empty() ? "" : " ", variant);
          std::printf("| %s | %d | %s | %s | %.2f | %.2f | %.2f | %.2fx | %.2fx | %.2f | %.2f |\n",
                      sh.name, m, FormatName(w.format), label.c_str(), *us, deq_us, bf16_us,
                      deq_us / *us, bf16_us / *us, bytes / 1e6, frac);
          absl::StrAppend(
              &tsv, absl::StrFormat("%s\t%d\t%d\t%d\t%s\t%s\t%.3f\t%.3f\t%.3f\t%d\t%.4f\n", sh.name,
                                    sh.n, sh.k, m, FormatName(w.format), label, *us, deq_us,
                                    bf16_us, bytes, frac));
        }
      }
    }
    std::fflush(stdout);
  }
  PKV_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(b.stream));
  cudaStreamDestroy(b.stream);
  return WriteToOutFlag(tsv);
}

}  // namespace

int QGemmMain() { return RunSubcommand("qgemm", Run); }

}  // namespace pkv::bench
