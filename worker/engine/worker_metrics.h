// The worker's Prometheus metrics (names in DESIGN.md; vLLM-compatible aliases so autoscalers and
// routers that read vLLM's names work unchanged). All families are registered at start-up and the
// children the hot path touches are created here too, so recording never calls Family::Add().
// Thread-safe: prometheus-cpp metrics are atomic; the scheduler thread records almost everything.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <string_view>

#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace pkv {

// Decode routes that can appear as the `route` label (DESIGN.md names plus the CPU backend's).
inline constexpr std::array<std::string_view, 6> kRouteLabels = {
    "fused", "split", "workqueue", "bucketed-exact", "persistent", "cpu-reference"};

// Reasons a sequence left the batch early (RELIABILITY.md observability hooks).
enum class AbortReason { kClientCancel = 0, kDeadline, kShutdown, kError, kSlowClient, kCount };
const char* AbortReasonLabel(AbortReason reason);

class WorkerMetrics {
 public:
  // kv_cache_dtype: what the KV pages store ("auto", "fp8_e4m3", "fp8_e5m2"), exported as the
  // constant gauge pkv_kv_cache_info{dtype}.
  WorkerMetrics(prometheus::Registry* registry, std::string_view worker_id,
                std::string_view backend, std::string_view model_name,
                std::string_view kv_cache_dtype = "auto");

  // Per-step engine metrics. `route` outside kRouteLabels is counted as "cpu-reference".
  void RecordDecodeStep(std::string_view route, double seconds, int launches, double occupancy);
  void RecordPrefillTokens(int n) { prefill_tokens_->Increment(n); }
  void SetQueue(int running, int waiting);
  void SetKvPages(int64_t used, int64_t free, uint64_t allocs_total, uint64_t frees_total);
  void RecordPreemptions(uint64_t total_now);
  // Prefix cache: pages registered in it and the evictable ones among them (gauges), and the
  // scheduler's running totals of queried / hit tokens and the pool's evictions (turned into
  // counter increments like RecordPreemptions).
  void SetPrefixCache(int64_t cached_pages, int64_t evictable_pages, uint64_t queries_total,
                      uint64_t hits_total, uint64_t evictions_total);

  // Per-request metrics.
  void RecordPromptTokens(int n);
  void RecordGeneratedTokens(int n);
  void RecordTimeToFirstToken(double seconds);
  void RecordInterTokenLatency(double seconds);
  void RecordRequestDuration(double seconds);
  void RecordRequestError(std::string_view code);
  void RecordAbort(AbortReason reason);
  void RecordTokensAfterCancel(int n) { tokens_after_cancel_->Increment(n); }
  void RecordTokensDiscarded(int n) { tokens_discarded_->Increment(n); }

 private:
  struct RouteChildren {
    prometheus::Histogram* step_seconds;
    prometheus::Histogram* launches;
    prometheus::Histogram* occupancy;
    prometheus::Counter* steps;
  };
  int RouteIndex(std::string_view route) const;

  std::array<RouteChildren, kRouteLabels.size()> routes_;
  prometheus::Counter* prefill_tokens_;
  prometheus::Gauge* pages_used_;
  prometheus::Gauge* pages_free_;
  prometheus::Gauge* pages_total_;
  prometheus::Gauge* page_allocs_;
  prometheus::Gauge* page_frees_;
  prometheus::Gauge* running_;
  prometheus::Gauge* waiting_;
  prometheus::Counter* preemptions_;
  uint64_t preemptions_seen_ = 0;
  prometheus::Gauge* prefix_cached_pages_;
  prometheus::Gauge* prefix_evictable_pages_;
  prometheus::Counter* prefix_queries_;
  prometheus::Counter* prefix_hits_;
  prometheus::Counter* prefix_evictions_;
  uint64_t prefix_queries_seen_ = 0;
  uint64_t prefix_hits_seen_ = 0;
  uint64_t prefix_evictions_seen_ = 0;
  prometheus::Counter* prompt_tokens_;
  prometheus::Counter* generated_tokens_;
  prometheus::Histogram* ttft_;
  prometheus::Histogram* itl_;
  prometheus::Histogram* duration_;
  prometheus::Family<prometheus::Counter>* errors_;
  std::array<prometheus::Counter*, static_cast<int>(AbortReason::kCount)> aborts_;
  prometheus::Counter* tokens_after_cancel_;
  prometheus::Counter* tokens_discarded_;
  // vLLM-compatible names.
  prometheus::Gauge* vllm_running_;
  prometheus::Gauge* vllm_waiting_;
  prometheus::Gauge* vllm_kv_usage_;
  prometheus::Histogram* vllm_ttft_;
  prometheus::Histogram* vllm_itl_;
  prometheus::Histogram* vllm_e2e_;
  prometheus::Counter* vllm_prompt_tokens_;
  prometheus::Counter* vllm_generation_tokens_;
  prometheus::Counter* vllm_preemptions_;
  prometheus::Counter* vllm_prefix_queries_;
  prometheus::Counter* vllm_prefix_hits_;
};

}  // namespace pkv
