// WorkerOptions: the defaults are valid and agree with the scheduler's; bad values are refused
// with a message naming the flag.
#include "worker/service/worker_options.h"

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace pkv {
namespace {

TEST(WorkerOptionsTest, DefaultsAreValidAndShareTheSchedulersDefaults) {
  const WorkerOptions o;
  EXPECT_TRUE(ValidateWorkerOptions(o).ok()) << ValidateWorkerOptions(o);
  const SchedulerConfig scheduler;
  const SchedulerConfig from_options = o.Scheduler(scheduler.page_size);
  EXPECT_EQ(from_options.max_batch_tokens, scheduler.max_batch_tokens);
  EXPECT_EQ(from_options.max_running, scheduler.max_running);
  EXPECT_EQ(from_options.max_waiting, scheduler.max_waiting);
  EXPECT_EQ(from_options.max_queued_tokens, scheduler.max_queued_tokens);
  EXPECT_TRUE(ValidateSchedulerConfig(from_options).ok());
}

TEST(WorkerOptionsTest, PrefixCachingIsOnByDefaultAndReachesTheScheduler) {
  WorkerOptions o;
  EXPECT_TRUE(o.prefix_caching);
  EXPECT_TRUE(o.Scheduler(16).prefix_caching);
  o.prefix_caching = false;
  EXPECT_FALSE(o.Scheduler(16).prefix_caching);
}

TEST(WorkerOptionsTest, KvCacheDtypeDefaultsToAutoAndAcceptsTheFp8Formats) {
  WorkerOptions o;
  EXPECT_EQ(o.kv_cache_dtype, "auto");
  for (const char* d : {"auto", "fp8_e4m3", "fp8_e5m2"}) {
    o.kv_cache_dtype = d;
    EXPECT_TRUE(ValidateWorkerOptions(o).ok()) << d;
  }
}

// auto pipelines steps only where the backend overlaps them (the CUDA backend): a backend whose
// launch runs the step would deliver every token a step late for nothing.
TEST(WorkerOptionsTest, OverlapStepsAutoFollowsTheBackend) {
  EXPECT_EQ(WorkerOptions{}.overlap_steps, "auto");
  EXPECT_EQ(PipelineSteps("auto", true).value(), true);
  EXPECT_EQ(PipelineSteps("auto", false).value(), false);
  EXPECT_EQ(PipelineSteps("on", false).value(), true);
  EXPECT_EQ(PipelineSteps("off", true).value(), false);
  const absl::StatusOr<bool> bad = PipelineSteps("yes", true);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("supported: auto, on, off"), std::string::npos);
}

TEST(WorkerOptionsTest, BadValuesNameTheirFlag) {
  const std::vector<std::pair<std::string, std::function<void(WorkerOptions&)>>> cases = {
      {"--page_size", [](WorkerOptions& o) { o.page_size = 0; }},
      {"--max_batch_tokens", [](WorkerOptions& o) { o.max_batch_tokens = 0; }},
      {"--max_running", [](WorkerOptions& o) { o.max_running = -1; }},
      {"--max_waiting", [](WorkerOptions& o) { o.max_waiting = 0; }},
      {"--max_queued_tokens", [](WorkerOptions& o) { o.max_queued_tokens = 0; }},
      {"--kv_pages", [](WorkerOptions& o) { o.kv_pages = -5; }},
      {"--tp", [](WorkerOptions& o) { o.tp = 0; }},
      {"--max_model_len", [](WorkerOptions& o) { o.max_model_len = -1; }},
      {"--max_message_bytes", [](WorkerOptions& o) { o.max_message_bytes = 10; }},
      {"--fused_wide_max_tokens", [](WorkerOptions& o) { o.fused_wide_max_tokens = -1; }},
      {"--fused_wide_max_tokens", [](WorkerOptions& o) { o.fused_wide_max_tokens = 9; }},
      {"--fused_prenorm_min_tokens", [](WorkerOptions& o) { o.fused_prenorm_min_tokens = -2; }},
      {"--kv_memory_fraction", [](WorkerOptions& o) { o.kv_memory_fraction = 1.5; }},
      {"--kv_memory_fraction", [](WorkerOptions& o) { o.kv_memory_fraction = 0; }},
      {"--gpu_memory_limit_gib", [](WorkerOptions& o) { o.gpu_memory_limit_gib = -1; }},
      {"--overlap_steps", [](WorkerOptions& o) { o.overlap_steps = "true"; }},
      {"--gpu_memory_limit_gib", [](WorkerOptions& o) { o.gpu_memory_limit_gib = 1.0 / 0.0; }},
      {"--drain_timeout", [](WorkerOptions& o) { o.drain_timeout = absl::Seconds(-1); }},
      {"--drain_timeout", [](WorkerOptions& o) { o.drain_timeout = absl::InfiniteDuration(); }},
      {"--engine_stall_timeout",
       [](WorkerOptions& o) { o.engine_stall_timeout = absl::Milliseconds(-5); }},
      {"--backend", [](WorkerOptions& o) { o.backend = "tpu"; }},
      {"--kv_cache_dtype", [](WorkerOptions& o) { o.kv_cache_dtype = "fp8"; }},
      {"--kv_cache_dtype", [](WorkerOptions& o) { o.kv_cache_dtype = "int8"; }},
      {"--deterministic_split_tiles",
       [](WorkerOptions& o) { o.deterministic_split_tiles = false; }},
      {"--deterministic_pinned_gemm", [](WorkerOptions& o) { o.deterministic_pinned_gemm = true; }},
  };
  for (const auto& [flag, spoil] : cases) {
    WorkerOptions o;
    spoil(o);
    const absl::Status s = ValidateWorkerOptions(o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << flag;
    EXPECT_NE(s.message().find(flag), std::string::npos) << flag << ": " << s;
  }
}

// The deterministic mode's forms other than the default are accepted with the mode, refused
// without it; the defaults pass either way.
TEST(WorkerOptionsTest, DeterministicFormsNeedTheMode) {
  WorkerOptions o;
  EXPECT_TRUE(o.deterministic_split_tiles);  // the mode's default form (H200, 2026-12-05)
  EXPECT_TRUE(ValidateWorkerOptions(o).ok());
  o.deterministic_split_tiles = false;
  o.deterministic_pinned_gemm = true;
  EXPECT_EQ(ValidateWorkerOptions(o).code(), absl::StatusCode::kInvalidArgument);
  o.deterministic = true;
  EXPECT_TRUE(ValidateWorkerOptions(o).ok());
}

}  // namespace
}  // namespace pkv
