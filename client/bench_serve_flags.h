// Flags of `pkv bench serve` (defined in bench_serve_flags.cc). It also reads the shared
// --router, --seed and security flags of client/flags.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/time/time.h"

ABSL_DECLARE_FLAG(std::string, target);
ABSL_DECLARE_FLAG(std::string, worker);
ABSL_DECLARE_FLAG(std::string, workload);
ABSL_DECLARE_FLAG(double, request_rate);
ABSL_DECLARE_FLAG(std::string, arrival);
ABSL_DECLARE_FLAG(int, concurrency);
ABSL_DECLARE_FLAG(std::vector<std::string>, rate_sweep);
ABSL_DECLARE_FLAG(int64_t, num_requests);
ABSL_DECLARE_FLAG(absl::Duration, duration);
ABSL_DECLARE_FLAG(double, input_len);
ABSL_DECLARE_FLAG(double, output_len);
ABSL_DECLARE_FLAG(double, len_sigma);
ABSL_DECLARE_FLAG(int, system_prompt_tokens);
ABSL_DECLARE_FLAG(bool, session_ids);
ABSL_DECLARE_FLAG(int, turns);
ABSL_DECLARE_FLAG(int, conversations);
ABSL_DECLARE_FLAG(int, num_docs);
ABSL_DECLARE_FLAG(int, doc_tokens);
ABSL_DECLARE_FLAG(absl::Duration, slo_ttft);
ABSL_DECLARE_FLAG(absl::Duration, slo_tpot);
ABSL_DECLARE_FLAG(std::string, metrics_url);
ABSL_DECLARE_FLAG(std::string, metrics_counter);
ABSL_DECLARE_FLAG(std::string, json_out);
ABSL_DECLARE_FLAG(absl::Duration, request_timeout);
ABSL_DECLARE_FLAG(int64_t, warmup_requests);
ABSL_DECLARE_FLAG(std::string, dump_requests);
ABSL_DECLARE_FLAG(bool, progress);
