#include "bench/bench_flags.h"

#include <cstdio>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"

ABSL_FLAG(std::string, trace, "bench/traces/heldout-20260623.tsv",
          "kernels, policy --live, e2e: the trace grid replayed (bench/traces/)");
ABSL_FLAG(std::string, lines, "",
          "kernels, policy --live: only the trace lines whose names contain one of these "
          "comma-separated substrings (empty: all)");
ABSL_FLAG(std::string, out, "",
          "kernels: TSV of the measurements; calibrate: one policy file instead of --out_dir; "
          "policy: the report (empty: stdout); e2e: TSV (empty: e2e.tsv); gemv: TSV (empty: none)");
ABSL_FLAG(std::string, kv_dtype, "auto",
          "kernels: KV cache dtypes measured side by side, e.g. auto,fp8_e4m3 (auto: --dtype "
          "pages; fp8_e4m3 | fp8_e5m2: 1-byte pages); calibrate, policy: the one KV dtype whose "
          "measurements are read (FP8: the policy file is <gpu>-<sms>sm-fp8.json)");
ABSL_FLAG(std::string, dtype, "",
          "kernels: KV dtype fp16 | bf16 (empty: fp16); gemv: activation dtype bf16 | fp16 "
          "(empty: bf16)");
ABSL_FLAG(std::optional<int32_t>, iters, std::nullopt,
          "timed iterations per measurement (kernels default 100, policy --live 30, gemv 200)");
ABSL_FLAG(std::optional<int32_t>, steps, std::nullopt,
          "decode steps per trace line (kernels default 8, e2e 16)");
ABSL_FLAG(int32_t, sm_count, 0,
          "kernels, policy --live: SMs the kernels may use (green-context partition; 0: all); "
          "calibrate, policy: the partition of the measurements to use (0: every one)");
ABSL_FLAG(int32_t, ctas_per_sm, 2, "kernels, calibrate, policy: CTAs per SM the planner assumes");
ABSL_FLAG(int32_t, hq, 32, "kernels, calibrate, policy: query heads");
ABSL_FLAG(int32_t, hkv, 8, "kernels, calibrate, policy: KV heads");
ABSL_FLAG(int32_t, d, 128, "kernels, calibrate, policy: head dim");
ABSL_FLAG(int32_t, page, 16, "kernels, calibrate, policy: tokens per KV page");
ABSL_FLAG(std::string, measurements, "",
          "calibrate, policy: a `pkv-bench kernels` TSV of route times");
ABSL_FLAG(std::string, traces, "",
          "calibrate, policy: comma-separated trace grids the measurements replayed (features "
          "recomputed from their lengths)");
ABSL_FLAG(std::string, gpu_name, "NVIDIA H200",
          "calibrate, policy: the GPU the measurements were taken on (names policy files)");

namespace pkv::bench {

absl::Status WriteToOutFlag(const std::string& text) {
  const std::string out = absl::GetFlag(FLAGS_out);
  if (out.empty()) return absl::OkStatus();
  std::FILE* f = std::fopen(out.c_str(), "w");
  if (f == nullptr) return absl::InternalError(absl::StrCat("cannot write ", out));
  const bool ok = std::fputs(text.c_str(), f) >= 0;
  if (std::fclose(f) != 0 || !ok) return absl::InternalError(absl::StrCat("cannot write ", out));
  return absl::OkStatus();
}

KvShape KvShapeFromFlags() {
  return KvShape{absl::GetFlag(FLAGS_hq), absl::GetFlag(FLAGS_hkv), absl::GetFlag(FLAGS_d),
                 absl::GetFlag(FLAGS_page)};
}

int RunSubcommand(const char* name, const std::function<absl::Status()>& run) {
  const absl::Status st = run();
  if (st.ok()) return 0;
  std::fprintf(stderr, "pkv-bench %s: %s\n", name, std::string(st.message()).c_str());
  return 1;
}

}  // namespace pkv::bench
