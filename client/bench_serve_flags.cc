#include "client/bench_serve_flags.h"

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, target, "router",
          "bench serve: router (--router), worker (--worker, pkv.v1.Worker straight), or both "
          "(the same workload through each, reporting the router's TTFT p50 overhead)");
ABSL_FLAG(std::string, worker, "", "bench serve: a worker's address for --target worker|both");
ABSL_FLAG(std::string, workload, "sharegpt", "bench serve: sharegpt, multi_turn or long_doc");
ABSL_FLAG(double, request_rate, 0, "bench serve: open-loop requests/s (0 = use --concurrency)");
ABSL_FLAG(std::string, arrival, "poisson", "bench serve: poisson or constant arrivals");
ABSL_FLAG(int, concurrency, 0, "bench serve: closed loop, this many requests in flight");
ABSL_FLAG(std::vector<std::string>, rate_sweep, {},
          "bench serve: request rates run in turn, e.g. 1,2,4,8 (one table row each)");
ABSL_FLAG(int64_t, num_requests, 200, "bench serve: requests per run (0 = bound by --duration)");
ABSL_FLAG(absl::Duration, duration, absl::ZeroDuration(),
          "bench serve: stop sending after this long, e.g. 30s (0 = bound by --num_requests)");
ABSL_FLAG(double, input_len, 128, "bench serve: mean user tokens per request / turn / question");
ABSL_FLAG(double, output_len, 64, "bench serve: mean max_tokens per request (ignore_eos is set)");
ABSL_FLAG(double, len_sigma, 0.5,
          "bench serve: lognormal log-space sigma of both lengths (0 = fixed; ~1 = ShareGPT-like "
          "heavy tail)");
ABSL_FLAG(int, system_prompt_tokens, 0, "bench serve: shared prefix of every prompt, in tokens");
ABSL_FLAG(bool, session_ids, true,
          "bench serve: conversations and documents carry a session id (router affinity); false "
          "leaves placement to the router's prefix index and load");
ABSL_FLAG(int, turns, 4, "bench serve: multi_turn turns per conversation");
ABSL_FLAG(int, conversations, 0, "bench serve: multi_turn conversations live at once (0 = any)");
ABSL_FLAG(int, num_docs, 4, "bench serve: long_doc documents");
ABSL_FLAG(int, doc_tokens, 512, "bench serve: long_doc tokens per document");
ABSL_FLAG(absl::Duration, slo_ttft, absl::ZeroDuration(),
          "bench serve: goodput SLO on TTFT, e.g. 200ms (0 = none)");
ABSL_FLAG(absl::Duration, slo_tpot, absl::ZeroDuration(),
          "bench serve: goodput SLO on the time per output token, e.g. 50ms (0 = none)");
ABSL_FLAG(std::string, metrics_url, "",
          "bench serve: the router's Prometheus host:port (its --metrics_listen); compares its "
          "pkv_router_requests_total with the benchmark's count");
ABSL_FLAG(std::string, metrics_counter, "pkv_router_requests_total",
          "bench serve: the counter --metrics_url is checked against (summed over labels)");
ABSL_FLAG(std::string, json_out, "", "bench serve: write the full report as JSON here");
ABSL_FLAG(absl::Duration, request_timeout, absl::Seconds(120),
          "bench serve: every stream's deadline");
ABSL_FLAG(int64_t, warmup_requests, 0,
          "bench serve: the first this many requests of each run (same workload and load, no pause "
          "after them) are a warm-up, left out of the statistics (also reported with them); "
          "--num_requests counts the requests after them");
ABSL_FLAG(std::string, dump_requests, "",
          "bench serve: write one JSON line per request here (phase, worker, turn, prompt and "
          "cached tokens, TTFT, ITL, end-to-end, the worker's own queue wait and TTFT), warm-up "
          "included");
ABSL_FLAG(bool, progress, true, "bench serve: progress on stderr (a bar on a terminal)");
