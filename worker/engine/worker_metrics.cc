#include "worker/engine/worker_metrics.h"

#include <string>

namespace pkv {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using prometheus::Histogram;

// Latency buckets from 1 ms to 120 s, roughly x2 apart: covers CPU test models and long prefills.
Histogram::BucketBoundaries LatencyBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
}
// Decode steps are microseconds to a few hundred milliseconds.
Histogram::BucketBoundaries StepBuckets() {
  return {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1};
}

}  // namespace

const char* AbortReasonLabel(AbortReason reason) {
  switch (reason) {
    case AbortReason::kClientCancel:
      return "client_cancel";
    case AbortReason::kDeadline:
      return "deadline";
    case AbortReason::kShutdown:
      return "shutdown";
    case AbortReason::kError:
      return "error";
    case AbortReason::kSlowClient:
      return "slow_client";
    default:
      return "unknown";
  }
}

WorkerMetrics::WorkerMetrics(prometheus::Registry* registry, std::string_view worker_id,
                             std::string_view backend, std::string_view model_name,
                             std::string_view kv_cache_dtype) {
  prometheus::Registry& r = *registry;
  auto& step_seconds = BuildHistogram()
                           .Name("pkv_decode_step_seconds")
                           .Help("Wall time of one engine step that decodes, by attention route")
                           .Register(r);
  auto& launches = BuildHistogram()
                       .Name("pkv_decode_launches_per_step")
                       .Help("Attention kernel launches per decode step and layer, by route")
                       .Register(r);
  auto& occupancy = BuildHistogram()
                        .Name("pkv_decode_split_occupancy")
                        .Help("Non-empty work items / launched work items per decode step (0..1)")
                        .Register(r);
  auto& steps = BuildCounter()
                    .Name("pkv_decode_steps_total")
                    .Help("Decode steps, by the attention route the policy chose")
                    .Register(r);
  for (size_t i = 0; i < kRouteLabels.size(); ++i) {
    const prometheus::Labels labels = {{"route", std::string(kRouteLabels[i])}};
    routes_[i].step_seconds = &step_seconds.Add(labels, StepBuckets());
    routes_[i].launches =
        &launches.Add(labels, Histogram::BucketBoundaries{0, 1, 2, 3, 4, 8, 16, 32});
    routes_[i].occupancy =
        &occupancy.Add(labels, Histogram::BucketBoundaries{0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1});
    routes_[i].steps = &steps.Add(labels);
  }
  prefill_tokens_ = &BuildCounter()
                         .Name("pkv_prefill_tokens_total")
                         .Help("Prompt tokens computed by prefill (recomputation included)")
                         .Register(r)
                         .Add({});
  auto& pages = BuildGauge().Name("pkv_kv_cache_pages").Help("KV-cache pages by state").Register(r);
  pages_used_ = &pages.Add({{"state", "used"}});
  pages_free_ = &pages.Add({{"state", "free"}});
  pages_total_ = &BuildGauge()
                      .Name("pkv_kv_cache_pages_total")
                      .Help("KV-cache pages of the pool")
                      .Register(r)
                      .Add({});
  page_allocs_ = &BuildGauge()
                      .Name("pkv_kv_page_allocs")
                      .Help(
                          "Page allocations since start "
                          "(ledger: allocs - frees == used)")
                      .Register(r)
                      .Add({});
  page_frees_ =
      &BuildGauge().Name("pkv_kv_page_frees").Help("Page frees since start").Register(r).Add({});
  auto& requests = BuildGauge().Name("pkv_requests").Help("Requests by state").Register(r);
  running_ = &requests.Add({{"state", "running"}});
  waiting_ = &requests.Add({{"state", "waiting"}});
  preemptions_ = &BuildCounter()
                      .Name("pkv_preemptions_total")
                      .Help("Sequences preempted by recompute when KV pages ran out")
                      .Register(r)
                      .Add({});
  prefix_cached_pages_ = &BuildGauge()
                              .Name("pkv_prefix_cache_pages")
                              .Help("KV pages registered in the prefix cache (held or evictable)")
                              .Register(r)
                              .Add({});
  prefix_evictable_pages_ = &BuildGauge()
                                 .Name("pkv_prefix_cache_evictable_pages")
                                 .Help("Cached KV pages no sequence holds (counted as free)")
                                 .Register(r)
                                 .Add({});
  prefix_queries_ = &BuildCounter()
                         .Name("pkv_prefix_cache_queries_total")
                         .Help("Tokens looked up in the prefix cache at admission")
                         .Register(r)
                         .Add({});
  prefix_hits_ = &BuildCounter()
                      .Name("pkv_prefix_cache_hits_total")
                      .Help("Tokens found in the prefix cache at admission (not recomputed)")
                      .Register(r)
                      .Add({});
  prefix_evictions_ = &BuildCounter()
                           .Name("pkv_prefix_cache_evictions_total")
                           .Help("Cached KV pages evicted to make room")
                           .Register(r)
                           .Add({});
  prompt_tokens_ = &BuildCounter()
                        .Name("pkv_prompt_tokens_total")
                        .Help("Prompt tokens admitted")
                        .Register(r)
                        .Add({});
  generated_tokens_ = &BuildCounter()
                           .Name("pkv_generated_tokens_total")
                           .Help("Tokens generated and streamed")
                           .Register(r)
                           .Add({});
  ttft_ = &BuildHistogram()
               .Name("pkv_time_to_first_token_seconds")
               .Help("Arrival to first generated token")
               .Register(r)
               .Add({}, LatencyBuckets());
  itl_ = &BuildHistogram()
              .Name("pkv_inter_token_latency_seconds")
              .Help("Time between consecutive tokens of a request")
              .Register(r)
              .Add({}, LatencyBuckets());
  duration_ = &BuildHistogram()
                   .Name("pkv_request_duration_seconds")
                   .Help("Arrival to completion of successful requests")
                   .Register(r)
                   .Add({}, LatencyBuckets());
  errors_ = &BuildCounter()
                 .Name("pkv_request_errors_total")
                 .Help("Requests that ended with a non-OK status, by gRPC code")
                 .Register(r);
  auto& aborts = BuildCounter()
                     .Name("pkv_seq_aborts_total")
                     .Help("Sequences removed before finishing, by reason")
                     .Register(r);
  for (int i = 0; i < static_cast<int>(AbortReason::kCount); ++i) {
    aborts_[i] = &aborts.Add({{"reason", AbortReasonLabel(static_cast<AbortReason>(i))}});
  }
  tokens_after_cancel_ = &BuildCounter()
                              .Name("pkv_tokens_after_cancel_total")
                              .Help("Tokens computed for a request after its cancellation arrived")
                              .Register(r)
                              .Add({});
  tokens_discarded_ =
      &BuildCounter()
           .Name("pkv_tokens_discarded_total")
           .Help(
               "Tokens sampled for a request that had ended while their step ran "
               "(--overlap_steps: the step launched before a stop, cancel or deadline was seen)")
           .Register(r)
           .Add({});
  BuildGauge()
      .Name("pkv_build_info")
      .Help("Constant 1, labelled with the build and the worker's configuration")
      .Register(r)
      .Add({{"version", "0.1.0"},
            {"component", "worker"},
            {"worker_id", std::string(worker_id)},
            {"backend", std::string(backend)},
            {"model", std::string(model_name)}})
      .Set(1);
  // Its own info metric rather than a build_info label: dashboards join KV capacity and decode
  // speed on it, and build_info's labels describe the binary.
  BuildGauge()
      .Name("pkv_kv_cache_info")
      .Help("Constant 1, labelled with what the KV pages store (auto: the model's dtype)")
      .Register(r)
      .Add({{"dtype", std::string(kv_cache_dtype)}})
      .Set(1);

  vllm_running_ = &BuildGauge()
                       .Name("vllm:num_requests_running")
                       .Help("vLLM-compatible: requests in the running batch")
                       .Register(r)
                       .Add({});
  vllm_waiting_ = &BuildGauge()
                       .Name("vllm:num_requests_waiting")
                       .Help("vLLM-compatible: requests waiting")
                       .Register(r)
                       .Add({});
  vllm_kv_usage_ = &BuildGauge()
                        .Name("vllm:kv_cache_usage_perc")
                        .Help("vLLM-compatible: KV-cache usage, 0..1")
                        .Register(r)
                        .Add({});
  vllm_ttft_ = &BuildHistogram()
                    .Name("vllm:time_to_first_token_seconds")
                    .Help("vLLM-compatible: time to first token")
                    .Register(r)
                    .Add({}, LatencyBuckets());
  vllm_itl_ = &BuildHistogram()
                   .Name("vllm:inter_token_latency_seconds")
                   .Help("vLLM-compatible: inter-token latency")
                   .Register(r)
                   .Add({}, LatencyBuckets());
  vllm_e2e_ = &BuildHistogram()
                   .Name("vllm:e2e_request_latency_seconds")
                   .Help("vLLM-compatible: end-to-end request latency")
                   .Register(r)
                   .Add({}, LatencyBuckets());
  vllm_prompt_tokens_ = &BuildCounter()
                             .Name("vllm:prompt_tokens_total")
                             .Help("vLLM-compatible: prompt tokens")
                             .Register(r)
                             .Add({});
  vllm_generation_tokens_ = &BuildCounter()
                                 .Name("vllm:generation_tokens_total")
                                 .Help("vLLM-compatible: generated tokens")
                                 .Register(r)
                                 .Add({});
  vllm_preemptions_ = &BuildCounter()
                           .Name("vllm:num_preemptions_total")
                           .Help("vLLM-compatible: preemptions")
                           .Register(r)
                           .Add({});
  vllm_prefix_queries_ = &BuildCounter()
                              .Name("vllm:prefix_cache_queries_total")
                              .Help("vLLM-compatible: prefix-cache queries, in tokens")
                              .Register(r)
                              .Add({});
  vllm_prefix_hits_ = &BuildCounter()
                           .Name("vllm:prefix_cache_hits_total")
                           .Help("vLLM-compatible: prefix-cache hits, in tokens")
                           .Register(r)
                           .Add({});
}

int WorkerMetrics::RouteIndex(std::string_view route) const {
  for (size_t i = 0; i < kRouteLabels.size(); ++i) {
    if (kRouteLabels[i] == route) return static_cast<int>(i);
  }
  return static_cast<int>(kRouteLabels.size()) - 1;
}

void WorkerMetrics::RecordDecodeStep(std::string_view route, double seconds, int launches,
                                     double occupancy) {
  const RouteChildren& c = routes_[RouteIndex(route)];
  c.step_seconds->Observe(seconds);
  c.launches->Observe(launches);
  c.occupancy->Observe(occupancy);
  c.steps->Increment();
}

void WorkerMetrics::SetQueue(int running, int waiting) {
  running_->Set(running);
  waiting_->Set(waiting);
  vllm_running_->Set(running);
  vllm_waiting_->Set(waiting);
}

void WorkerMetrics::SetKvPages(int64_t used, int64_t free, uint64_t allocs_total,
                               uint64_t frees_total) {
  pages_used_->Set(static_cast<double>(used));
  pages_free_->Set(static_cast<double>(free));
  pages_total_->Set(static_cast<double>(used + free));
  page_allocs_->Set(static_cast<double>(allocs_total));
  page_frees_->Set(static_cast<double>(frees_total));
  const int64_t total = used + free;
  vllm_kv_usage_->Set(total > 0 ? static_cast<double>(used) / static_cast<double>(total) : 0.0);
}

void WorkerMetrics::RecordPreemptions(uint64_t total_now) {
  if (total_now > preemptions_seen_) {
    const double delta = static_cast<double>(total_now - preemptions_seen_);
    preemptions_->Increment(delta);
    vllm_preemptions_->Increment(delta);
    preemptions_seen_ = total_now;
  }
}

namespace {

// Adds to `counter` what `total_now` grew by since `*seen`.
double AdvanceTotal(uint64_t total_now, uint64_t* seen) {
  if (total_now <= *seen) return 0;
  const double delta = static_cast<double>(total_now - *seen);
  *seen = total_now;
  return delta;
}

}  // namespace

void WorkerMetrics::SetPrefixCache(int64_t cached_pages, int64_t evictable_pages,
                                   uint64_t queries_total, uint64_t hits_total,
                                   uint64_t evictions_total) {
  prefix_cached_pages_->Set(static_cast<double>(cached_pages));
  prefix_evictable_pages_->Set(static_cast<double>(evictable_pages));
  const double queries = AdvanceTotal(queries_total, &prefix_queries_seen_);
  const double hits = AdvanceTotal(hits_total, &prefix_hits_seen_);
  prefix_queries_->Increment(queries);
  vllm_prefix_queries_->Increment(queries);
  prefix_hits_->Increment(hits);
  vllm_prefix_hits_->Increment(hits);
  prefix_evictions_->Increment(AdvanceTotal(evictions_total, &prefix_evictions_seen_));
}

void WorkerMetrics::RecordPromptTokens(int n) {
  prompt_tokens_->Increment(n);
  vllm_prompt_tokens_->Increment(n);
}

void WorkerMetrics::RecordGeneratedTokens(int n) {
  generated_tokens_->Increment(n);
  vllm_generation_tokens_->Increment(n);
}

void WorkerMetrics::RecordTimeToFirstToken(double seconds) {
  ttft_->Observe(seconds);
  vllm_ttft_->Observe(seconds);
}

void WorkerMetrics::RecordInterTokenLatency(double seconds) {
  itl_->Observe(seconds);
  vllm_itl_->Observe(seconds);
}

void WorkerMetrics::RecordRequestDuration(double seconds) {
  duration_->Observe(seconds);
  vllm_e2e_->Observe(seconds);
}

void WorkerMetrics::RecordRequestError(std::string_view code) {
  // Error codes are a small fixed set, so Add() here stays bounded (Family::Add returns the
  // existing child for known labels); errors are off the hot path.
  errors_->Add({{"code", std::string(code)}}).Increment();
}

void WorkerMetrics::RecordAbort(AbortReason reason) {
  aborts_[static_cast<int>(reason)]->Increment();
}

}  // namespace pkv
