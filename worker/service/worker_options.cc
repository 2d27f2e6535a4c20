#include "worker/service/worker_options.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/attention/fp8_kv.h"

namespace pkv {

SchedulerConfig WorkerOptions::Scheduler(int32_t backend_page_size) const {
  SchedulerConfig c;
  c.page_size = backend_page_size;
  c.max_batch_tokens = max_batch_tokens;
  c.max_running = max_running;
  c.max_waiting = max_waiting;
  c.max_queued_tokens = max_queued_tokens;
  c.prefix_caching = prefix_caching;
  c.prefix_wait_in_flight = prefix_wait_in_flight;
  return c;
}

absl::Status ValidateWorkerOptions(const WorkerOptions& o) {
  if (o.backend != "auto" && o.backend != "cpu" && o.backend != "cuda") {
    return absl::InvalidArgumentError(
        absl::StrCat("--backend must be auto, cpu or cuda, got '", o.backend, "'"));
  }
  auto at_least = [](const char* flag, int64_t value, int64_t min) {
    return value >= min ? absl::OkStatus()
                        : absl::InvalidArgumentError(
                              absl::StrCat("--", flag, " must be >= ", min, ", got ", value));
  };
  for (absl::Status s :
       {at_least("page_size", o.page_size, 1), at_least("max_batch_tokens", o.max_batch_tokens, 1),
        at_least("max_running", o.max_running, 1), at_least("max_waiting", o.max_waiting, 1),
        at_least("max_queued_tokens", o.max_queued_tokens, 1), at_least("kv_pages", o.kv_pages, 0),
        at_least("tp", o.tp, 1), at_least("max_model_len", o.max_model_len, 0),
        at_least("fused_max_hidden", o.fused_max_hidden, 0),
        at_least("max_message_bytes", o.max_message_bytes, 1024),
        at_least("max_metadata_bytes", o.max_metadata_bytes, 1024)}) {
    if (!s.ok()) return s;
  }
  if (o.fused_wide_max_tokens < 0 || o.fused_wide_max_tokens > 8) {  // the fused path's limit
    return absl::InvalidArgumentError(
        absl::StrCat("--fused_wide_max_tokens must be in [0, 8], got ", o.fused_wide_max_tokens));
  }
  if (o.fused_prenorm_min_tokens < -1) {  // -1: auto, 0: never
    return absl::InvalidArgumentError(absl::StrCat(
        "--fused_prenorm_min_tokens must be -1 (auto), 0 (never) or a token count, got ",
        o.fused_prenorm_min_tokens));
  }
  if (absl::StatusOr<KvCacheDtype> d = ParseKvCacheDtype(o.kv_cache_dtype); !d.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--kv_cache_dtype: ", d.status().message()));
  }
  if (absl::StatusOr<bool> p = PipelineSteps(o.overlap_steps, false); !p.ok()) return p.status();
  if (!(o.kv_memory_fraction > 0 && o.kv_memory_fraction <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--kv_memory_fraction must be in (0, 1], got ", o.kv_memory_fraction));
  }
  if (!(o.gpu_memory_limit_gib >= 0 && o.gpu_memory_limit_gib < 1e6)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--gpu_memory_limit_gib must be a size in GiB >= 0 (0: the whole GPU), got ",
                     o.gpu_memory_limit_gib));
  }
  // The deterministic mode's forms mean nothing without it: a form other than the default is
  // refused rather than ignored.
  const WorkerOptions defaults;
  for (const auto& [flag, changed] :
       {std::pair{"deterministic_split_tiles",
                  o.deterministic_split_tiles != defaults.deterministic_split_tiles},
        std::pair{"deterministic_pinned_gemm",
                  o.deterministic_pinned_gemm != defaults.deterministic_pinned_gemm}}) {
    if (changed && !o.deterministic) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, " changes how --deterministic runs; add --deterministic"));
    }
  }
  // Zero means "at once" / "off"; a negative or infinite timeout is a typo, not a wish.
  for (const auto& [flag, value] : {std::pair{"drain_timeout", o.drain_timeout},
                                    std::pair{"engine_stall_timeout", o.engine_stall_timeout}}) {
    if (value < absl::ZeroDuration() || value == absl::InfiniteDuration()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", flag, " must be a finite duration >= 0, got ", absl::FormatDuration(value)));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> PipelineSteps(const std::string& mode, bool backend_overlaps) {
  if (mode == "auto") return backend_overlaps;
  if (mode == "on") return true;
  if (mode == "off") return false;
  return absl::InvalidArgumentError(
      absl::StrCat("--overlap_steps '", mode, "' is not supported; supported: auto, on, off"));
}

}  // namespace pkv
