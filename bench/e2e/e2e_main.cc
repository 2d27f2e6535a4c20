// pkv-bench e2e [--shapes llama3-8b,llama3-1b] [--model_dir DIR] [--trace FILE]
//   [--decode_lines a,b,...] [--variants cublas,fused,...] [--prompts 512,2048,8192] [--steps 16]
//   [--warmup 3] [--quant awq,gptq,fp8] [--kv_cache_dtype auto,fp8_e4m3] [--out FILE]
//   [--decode_policy learned|threshold|fixed:<route>[:<min_split_tokens>]]
//   [--temperature 0 --top_p 1 --top_k 0 --min_p 0]
//   [--drift_prompts 4 --drift_prompt_len 1024 --drift_tokens 32]
// See e2e_bench.h and e2e_variants.h. --quant runs each random shape again with its projections
// packed in each listed format (model "llama3-8b+awq"; awq and gptq pack alike), after the dense
// run, so the dense model and its quantized twins are measured side by side in one run. Prints a
// line per (decode line, variant), a side-by-side summary, and writes one TSV (kinds: ceiling,
// decode, prefill, host).
#include <cuda_runtime_api.h>

#include <cctype>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/bench_flags.h"
#include "bench/e2e/e2e_bench.h"
#include "bench/e2e/e2e_drift.h"
#include "bench/e2e/e2e_variants.h"
#include "bench/kernels/trace.h"
#include "common/status_macros.h"
#include "kernels/model/model_kernels.h"
#include "worker/tools/model_shapes.h"
#include "worker/tools/quantize.h"

ABSL_FLAG(std::string, shapes, "llama3-8b,llama3-1b",
          "e2e: model shapes with random weights (pkv-make-model's), comma-separated");
ABSL_FLAG(std::string, model_dir, "", "e2e: a model checkpoint instead of --shapes");
ABSL_FLAG(std::string, decode_lines,
          "bucketed-B1-N4096,uniform-B1,bucketed-B8-N4096,uniform-B8,uniform-B32,bimodal-B32,"
          "uniform-B64,bimodal-B64",
          "e2e: --trace lines decoded");
ABSL_FLAG(std::string, prompts, "512,2048,8192", "e2e: prefill prompt lengths (empty: none)");
ABSL_FLAG(std::string, variants, "cublas,skinny,pdl,fused,fused+pdl,fused+pdl+pf4,lt,lt+pdl,eager",
          "e2e: backend variants (e2e_variants.h)");
ABSL_FLAG(int32_t, warmup, 3, "e2e: untimed decode steps first");
ABSL_FLAG(double, temperature, 0,
          "e2e: decode sampling temperature (0: greedy; 1: the OpenAI default, every row drawn "
          "from the whole vocabulary on the GPU)");
ABSL_FLAG(double, top_p, 1, "e2e: with --temperature > 0, the nucleus mass in (0, 1] (1: off)");
ABSL_FLAG(int32_t, top_k, 0, "e2e: with --temperature > 0, keep the k most likely tokens (0: off)");
ABSL_FLAG(double, min_p, 0,
          "e2e: with --temperature > 0, drop tokens below min_p times the top one's p (0: off)");
ABSL_FLAG(double, kv_memory_fraction, 0.9, "e2e: share of free GPU memory for KV pages");
ABSL_FLAG(double, gpu_memory_limit_gib, 0,
          "e2e: GiB each backend may allocate after its CUDA context (0: the whole GPU), e.g. 11.5 "
          "to size the KV pool as on a 12 GB card (CudaBackendOptions::gpu_memory_limit_bytes)");
ABSL_FLAG(
    std::string, kv_cache_dtype, "auto",
    "e2e: KV cache dtypes, comma-separated (auto,fp8_e4m3,fp8_e5m2): each shape runs once per "
    "dtype, side by side (FP8: half the bytes a page, twice the pages for the same memory)");
ABSL_FLAG(std::string, decode_policy, "",
          "e2e: the decode route policy, as pkv-worker's --decode_policy (learned | threshold | "
          "fixed:<route>[:<min_split_tokens>]; empty: the policy file's)");
ABSL_FLAG(std::string, quant, "",
          "e2e: after each random shape's dense run, its quantized twins (awq,gptq,fp8)");
ABSL_FLAG(int32_t, drift_prompts, 4,
          "e2e: with several --kv_cache_dtype, greedy prompts whose log-probabilities each later "
          "dtype is compared on against the first (e2e_drift.h; 0: none)");
ABSL_FLAG(int32_t, drift_prompt_len, 1024, "e2e: tokens of each drift prompt");
ABSL_FLAG(bool, prefer_shared_carveout, false,
          "e2e (experiment): cudaDeviceSetCacheConfig(cudaFuncCachePreferShared) before any "
          "launch, so every kernel of the step asks for the largest shared-memory carveout and an "
          "SM need not drain to switch carveouts between a bulk-copy GEMV (~70 KB a CTA) and its "
          "neighbours (bench/NOTES.md, twenty-third session)");
ABSL_FLAG(std::string, timeline_dir, "",
          "e2e (PKV_TIMELINE builds): each decode line's last step as a per-CTA timeline, "
          "DIR/timeline_<model>_<line>_<variant>.tsv (bench/e2e/e2e_timeline.h; read it with "
          "bench/e2e/timeline_report.py)");
ABSL_FLAG(int32_t, drift_tokens, 32, "e2e: greedy tokens generated per drift prompt");

namespace pkv::bench {
namespace {

// --timeline_dir's file for one decode line and variant ("" without the flag); names keep
// letters, digits, '-' and '.', so the file survives copying off the GPU machine.
std::string TimelinePath(const std::string& model, const std::string& line,
                         const std::string& variant) {
  const std::string dir = absl::GetFlag(FLAGS_timeline_dir);
  if (dir.empty()) return "";
  std::string name = absl::StrCat("timeline_", model, "_", line, "_", variant, ".tsv");
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.') c = '_';
  }
  return absl::StrCat(dir, "/", name);
}

std::string Routes(const DecodeResult& r) {
  std::string out;
  for (const auto& [route, n] : r.routes)
    absl::StrAppend(&out, out.empty() ? "" : ";", route, ":", n);
  return out;
}

// One TSV for every kind of row; columns a row does not use stay empty.
class Report {
 public:
  explicit Report(const std::string& path) : tsv_(path) {
    for (size_t i = 0; i < kColumns.size(); ++i)
      tsv_ << kColumns[i] << (i + 1 < kColumns.size() ? "\t" : "\n");
  }
  void Ceiling(const Ceilings& c) {
    std::printf("ceilings: streaming read %.0f GB/s, cuBLAS bf16 GEMM 8192^3 %.1f TFLOP/s\n",
                c.stream_gbps, c.gemm_tflops);
    Row({{"model", "-"},
         {"kind", "ceiling"},
         {"name", "stream_read_gbps"},
         {"note", absl::StrFormat("%.1f", c.stream_gbps)}});
    Row({{"model", "-"},
         {"kind", "ceiling"},
         {"name", "gemm_bf16_tflops"},
         {"tflops", absl::StrFormat("%.1f", c.gemm_tflops)}});
  }
  void Decode(const std::string& model, const DecodeResult& r, double sched_us) {
    std::map<std::string, std::string> row = {{"model", model},
                                              {"kind", "decode"},
                                              {"name", r.trace},
                                              {"batch", absl::StrCat(r.batch)},
                                              {"mean_len", absl::StrFormat("%.1f", r.mean_len)}};
    row["variant"] = r.variant;
    std::vector<std::string>& cells = summary_[model + " " + r.trace];
    if (!r.skipped.empty()) {
      std::printf("%-10s %-22s B=%-3d %-14s skipped: %s\n", model.c_str(), r.trace.c_str(), r.batch,
                  r.variant.c_str(), r.skipped.c_str());
      row["note"] = "skipped: " + r.skipped;
      Row(row);
      cells.push_back(absl::StrFormat("%s -", r.variant));
      return;
    }
    const double host_frac = (r.host_us + sched_us) / (r.step_ms * 1e3);
    std::printf(
        "%-10s %-22s B=%-3d %-14s len=%-7.0f graphs=%d step %8.3f ms  %9.1f tok/s  floor %7.3f ms "
        "(%5.1f%%)  host %6.1f us + sched %5.1f us (%4.2f%%)  %s\n",
        model.c_str(), r.trace.c_str(), r.batch, r.variant.c_str(), r.mean_len, r.graphs ? 1 : 0,
        r.step_ms, r.tokens_per_s, r.floor_ms, 100 * r.floor_frac, r.host_us, sched_us,
        100 * host_frac, Routes(r).c_str());
    cells.push_back(absl::StrFormat("%s %.3f ms %.1f%%", r.variant, r.step_ms, 100 * r.floor_frac));
    row["graphs"] = r.graphs ? "1" : "0";
    row["skinny"] = r.skinny ? "1" : "0";
    row["step_ms"] = absl::StrFormat("%.4f", r.step_ms);
    row["tokens_per_s"] = absl::StrFormat("%.1f", r.tokens_per_s);
    row["host_us"] = absl::StrFormat("%.1f", r.host_us);
    // prep(build+plan)/launch/post medians, us; the rest of prep is the staging's fill and copy.
    row["host_parts"] = absl::StrFormat("%.1f(%.1f+%.1f)/%.1f/%.1f", r.prep_us, r.build_us,
                                        r.plan_us, r.launch_us, r.post_us);
    row["sched_us"] = absl::StrFormat("%.1f", sched_us);
    row["host_frac"] = absl::StrFormat("%.5f", host_frac);
    row["floor_ms"] = absl::StrFormat("%.4f", r.floor_ms);
    row["floor_frac"] = absl::StrFormat("%.4f", r.floor_frac);
    row["weight_bytes"] = absl::StrCat(r.weight_bytes);
    row["kv_bytes"] = absl::StrCat(r.kv_bytes);
    row["routes"] = Routes(r);
    row["launches"] = absl::StrCat(r.launches);
    row["occupancy"] = absl::StrFormat("%.3f", r.occupancy);
    Row(row);
  }
  void Prefill(const std::string& model, const PrefillResult& r) {
    std::printf("%-10s prefill %6d tokens: TTFT %9.2f ms  %7.1f TFLOP/s  (%5.1f%% of cuBLAS)\n",
                model.c_str(), r.tokens, r.ttft_ms, r.tflops, 100 * r.gemm_frac);
    Row({{"model", model},
         {"kind", "prefill"},
         {"name", absl::StrCat("prompt-", r.tokens)},
         {"batch", "1"},
         {"mean_len", absl::StrCat(r.tokens)},
         {"ttft_ms", absl::StrFormat("%.3f", r.ttft_ms)},
         {"tflops", absl::StrFormat("%.1f", r.tflops)},
         {"gemm_frac", absl::StrFormat("%.4f", r.gemm_frac)}});
  }
  // Every variant of each decode line side by side: step time and fraction of the byte floor.
  void PrintSummary() const {
    std::printf("\ndecode step time and byte-floor fraction per variant:\n");
    for (const auto& [line, cells] : summary_) {
      std::printf("  %-34s", line.c_str());
      for (const std::string& c : cells) std::printf(" | %-30s", c.c_str());
      std::printf("\n");
    }
  }
  void DriftLine(const std::string& model, const std::string& reference, const Drift& d) {
    std::printf(
        "%s: logprob drift vs %s, teacher-forced over %d prompts: max %.4f mean %.4f nats (%d of "
        "%d positions compared; greedy choice equal at %d)\n",
        model.c_str(), reference.c_str(), absl::GetFlag(FLAGS_drift_prompts), d.max_abs, d.mean_abs,
        d.compared, d.total, d.greedy_equal);
    Row({{"model", model},
         {"kind", "drift"},
         {"name", "vs_" + reference},
         {"note", absl::StrFormat("max_abs=%.5f mean_abs=%.5f compared=%d total=%d greedy_equal=%d",
                                  d.max_abs, d.mean_abs, d.compared, d.total, d.greedy_equal)}});
  }
  void Host(int32_t batch, double sched_us) {
    std::printf("scheduler host time per decode step at B=%d: %.1f us\n", batch, sched_us);
    Row({{"model", "-"},
         {"kind", "host"},
         {"name", "scheduler_step"},
         {"batch", absl::StrCat(batch)},
         {"sched_us", absl::StrFormat("%.2f", sched_us)}});
  }

 private:
  std::map<std::string, std::vector<std::string>> summary_;  // "model line" -> variant cells
  static inline const std::vector<std::string> kColumns = {
      "model",      "kind",         "name",         "batch",   "mean_len", "variant",   "graphs",
      "skinny",     "step_ms",      "tokens_per_s", "host_us", "sched_us", "host_frac", "floor_ms",
      "floor_frac", "weight_bytes", "kv_bytes",     "routes",  "launches", "occupancy", "ttft_ms",
      "tflops",     "gemm_frac",    "host_parts",   "note"};
  void Row(const std::map<std::string, std::string>& cols) {
    for (size_t i = 0; i < kColumns.size(); ++i) {
      auto it = cols.find(kColumns[i]);
      tsv_ << (it == cols.end() ? "" : it->second) << (i + 1 < kColumns.size() ? "\t" : "\n");
    }
    tsv_.flush();
  }
  std::ofstream tsv_;
};

std::vector<int32_t> ParseInts(const std::string& s) {
  std::vector<int32_t> out;
  for (absl::string_view p : absl::StrSplit(s, ',', absl::SkipEmpty())) {
    int32_t v = 0;
    if (absl::SimpleAtoi(p, &v)) out.push_back(v);
  }
  return out;
}

// `quant`: "" (dense) or a --quant method the random weights of `shape` are packed in.
// `kv`: the KV cache dtype; FP8 runs are reported as model "<shape>+kv_fp8_e4m3".
// The first KV dtype's greedy trace of a (shape, quant), which later dtypes are compared on.
struct DriftReference {
  std::string model;
  std::optional<GreedyTrace> trace;
};

// The decode lines' sampling, from --temperature, --top_p, --top_k and --min_p.
SamplingParams DecodeSampling() {
  SamplingParams s;
  s.temperature = static_cast<float>(absl::GetFlag(FLAGS_temperature));
  s.top_p = static_cast<float>(absl::GetFlag(FLAGS_top_p));
  s.top_k = absl::GetFlag(FLAGS_top_k);
  s.min_p = static_cast<float>(absl::GetFlag(FLAGS_min_p));
  return s;
}

absl::Status MeasureDrift(CudaModelBackend* b, const std::string& model, DriftReference* ref,
                          Report* report) {
  DriftOptions d;
  d.prompts = absl::GetFlag(FLAGS_drift_prompts);
  d.prompt_len = absl::GetFlag(FLAGS_drift_prompt_len);
  d.gen_tokens = absl::GetFlag(FLAGS_drift_tokens);
  const GreedyTrace* forced = ref->trace.has_value() ? &*ref->trace : nullptr;
  PKV_ASSIGN_OR_RETURN(GreedyTrace trace, RunGreedyTrace(b, d, forced));
  if (forced == nullptr) {
    ref->model = model;
    ref->trace = std::move(trace);
  } else {
    report->DriftLine(model, ref->model, CompareTraces(*forced, trace));
  }
  return absl::OkStatus();
}

// drift: nullptr, or where this (shape, quant)'s first KV dtype leaves its greedy trace.
absl::Status RunShape(const std::string& shape, const std::string& quant, KvCacheDtype kv,
                      const Ceilings& ceil, const std::vector<TraceLine>& trace,
                      DriftReference* drift, Report* report) {
  CudaBackendOptions o;
  o.max_step_tokens = 8192;
  o.max_rows = 256;
  o.kv_memory_fraction = absl::GetFlag(FLAGS_kv_memory_fraction);
  o.gpu_memory_limit_bytes =
      static_cast<int64_t>(absl::GetFlag(FLAGS_gpu_memory_limit_gib) * 1073741824.0);
  o.kv_cache_dtype = kv;
  o.decode_policy = absl::GetFlag(FLAGS_decode_policy);
  PKV_ASSIGN_OR_RETURN(const std::vector<Variant> variants,
                       ParseVariants(absl::GetFlag(FLAGS_variants)));
  // Any "+w8" variant: the backend sets up the w8s3 config at load, each variant turns it on/off.
  for (const Variant& v : variants) o.decode_few_row_w8 = o.decode_few_row_w8 || v.few_row_w8;
  std::unique_ptr<CudaModelBackend> b;
  const std::string model_dir = absl::GetFlag(FLAGS_model_dir);
  if (!model_dir.empty()) {
    PKV_ASSIGN_OR_RETURN(b, CudaModelBackend::Load(model_dir, o));
  } else {
    PKV_ASSIGN_OR_RETURN(ModelConfig config, ModelShapeConfig(shape));
    if (!quant.empty()) {
      QuantFlags q;
      q.method = quant;
      PKV_ASSIGN_OR_RETURN(config.quant, QuantConfigFromFlags(q));
    }
    PKV_ASSIGN_OR_RETURN(b, CudaModelBackend::LoadRandom(config, 1, o));
  }
  PKV_RETURN_IF_ERROR(b->FillKvCacheRandom(2));
  std::string model = !model_dir.empty() ? model_dir
                      : quant.empty()    ? shape
                                         : absl::StrCat(shape, "+", quant);
  if (IsFp8(kv)) absl::StrAppend(&model, "+kv_", KvCacheDtypeName(kv));
  std::printf("%s: weights a decode step reads %.3f GiB, KV pool %lld pages = %lld tokens (%s)\n",
              model.c_str(), b->weight_read_bytes() / 1073741824.0,
              static_cast<long long>(b->num_kv_pages()),
              static_cast<long long>(b->num_kv_pages() * b->page_size()), KvCacheDtypeName(kv));
  const std::vector<std::string> lines =
      absl::StrSplit(absl::GetFlag(FLAGS_decode_lines), ',', absl::SkipEmpty());
  for (const std::string& name : lines) {
    const TraceLine* line = nullptr;
    for (const TraceLine& t : trace) line = t.name == name ? &t : line;
    if (line == nullptr) return absl::NotFoundError(absl::StrCat("trace line ", name));
    const double sched = MeasureSchedulerUs(static_cast<int32_t>(line->lengths.size()), 100);
    for (const Variant& v : variants) {
      DecodeResult r;
      r.trace = name;
      r.batch = static_cast<int32_t>(line->lengths.size());
      r.variant = v.name;
      r.skipped = VariantSkipReason(v, r.batch, *b);
      if (r.skipped.empty()) {
        const absl::Status applied = ApplyVariant(v, b.get());
        if (!applied.ok()) r.skipped = std::string(applied.message());
      }
      if (r.skipped.empty()) {
        PKV_ASSIGN_OR_RETURN(r, RunDecode(b.get(), name, line->lengths, absl::GetFlag(FLAGS_warmup),
                                          absl::GetFlag(FLAGS_steps).value_or(16), ceil.stream_gbps,
                                          5, DecodeSampling(), v.overlap, v.compact_pages,
                                          TimelinePath(model, name, v.name)));
        r.skinny = v.skinny;
        r.variant = v.name;
      }
      report->Decode(model, r, sched);
    }
  }
  // Prefill on the default configuration, and again in deterministic mode when a det variant
  // was asked for (reported as model "<model>+det", or "+det-fast" with the faster parts any
  // det-split / det-pinned / det-fast variant asked for).
  // The fastest form asked for: the union of the det variants' faster parts.
  bool det = false;
  DeterministicForm det_form;
  for (const Variant& v : variants) {
    det = det || v.deterministic;
    det_form.split_tiles = det_form.split_tiles || v.det_form.split_tiles;
    det_form.pinned_gemm = det_form.pinned_gemm || v.det_form.pinned_gemm;
  }
  const bool det_fast = det_form.split_tiles || det_form.pinned_gemm;
  for (const bool d : {false, true}) {
    if (d && !det) break;
    Variant prefill_variant;
    prefill_variant.deterministic = d;
    if (d) prefill_variant.det_form = det_form;
    PKV_RETURN_IF_ERROR(ApplyVariant(prefill_variant, b.get()));
    for (int32_t n : ParseInts(absl::GetFlag(FLAGS_prompts))) {
      PKV_ASSIGN_OR_RETURN(PrefillResult r, RunPrefill(b.get(), n, 3, ceil.gemm_tflops, 9));
      report->Prefill(d ? model + (det_fast ? "+det-fast" : "+det") : model, r);
    }
  }
  if (drift != nullptr) PKV_RETURN_IF_ERROR(MeasureDrift(b.get(), model, drift, report));
  return absl::OkStatus();
}

}  // namespace

int E2eMain() {
  if (absl::GetFlag(FLAGS_prefer_shared_carveout) &&
      cudaDeviceSetCacheConfig(cudaFuncCachePreferShared) != cudaSuccess) {
    std::fprintf(stderr, "pkv-bench e2e: cudaDeviceSetCacheConfig failed\n");
    return 1;
  }
  absl::StatusOr<std::vector<TraceLine>> trace = ReadTrace(absl::GetFlag(FLAGS_trace));
  if (!trace.ok()) {
    std::fprintf(stderr, "pkv-bench e2e: %s\n", std::string(trace.status().message()).c_str());
    return 1;
  }
  absl::StatusOr<Ceilings> ceil = MeasureCeilings(nullptr);
  if (!ceil.ok()) {
    std::fprintf(stderr, "pkv-bench e2e: %s\n", std::string(ceil.status().message()).c_str());
    return 1;
  }
  const std::string out = absl::GetFlag(FLAGS_out);
  Report report(out.empty() ? "e2e.tsv" : out);
  report.Ceiling(*ceil);
  report.Host(64, MeasureSchedulerUs(64, 200));
  const std::vector<std::string> shapes =
      absl::GetFlag(FLAGS_model_dir).empty()
          ? std::vector<std::string>(
                absl::StrSplit(absl::GetFlag(FLAGS_shapes), ',', absl::SkipEmpty()))
          : std::vector<std::string>{"checkpoint"};
  int rc = 0;
  std::vector<std::string> quants = {""};  // dense first, then each quantized twin
  if (absl::GetFlag(FLAGS_model_dir).empty()) {
    for (absl::string_view q : absl::StrSplit(absl::GetFlag(FLAGS_quant), ',', absl::SkipEmpty())) {
      quants.emplace_back(q);
    }
  }
  std::vector<KvCacheDtype> kv_dtypes;
  for (absl::string_view k :
       absl::StrSplit(absl::GetFlag(FLAGS_kv_cache_dtype), ',', absl::SkipEmpty())) {
    absl::StatusOr<KvCacheDtype> d = ParseKvCacheDtype(std::string(k));
    if (!d.ok()) {
      std::fprintf(stderr, "pkv-bench e2e: %s\n", std::string(d.status().message()).c_str());
      return 1;
    }
    kv_dtypes.push_back(*d);
  }
  for (const std::string& shape : shapes) {
    for (const std::string& quant : quants) {
      DriftReference drift;
      const bool measure_drift = kv_dtypes.size() > 1 && absl::GetFlag(FLAGS_drift_prompts) > 0;
      for (KvCacheDtype kv : kv_dtypes) {
        const absl::Status st =
            RunShape(shape, quant, kv, *ceil, *trace, measure_drift ? &drift : nullptr, &report);
        if (!st.ok()) {
          std::fprintf(stderr, "pkv-bench e2e %s%s kv %s: %s\n", shape.c_str(),
                       quant.empty() ? "" : ("+" + quant).c_str(), KvCacheDtypeName(kv),
                       st.ToString().c_str());
          rc = 1;
        }
        std::fflush(stdout);
      }
    }
  }
  report.PrintSummary();
  return rc;
}

}  // namespace pkv::bench
