// `pkv bench api`: what the OpenAI HTTP API costs over gRPC on the same router, in one run
// (bench/serve/api_overhead.h): TTFT and end-to-end p50/p90 of each path and their difference.
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "bench/serve/api_overhead.h"
#include "bench/serve/stats.h"
#include "client/commands.h"
#include "client/flags.h"

ABSL_FLAG(std::string, http, "127.0.0.1:8000", "bench api: the router's HTTP API (host:port)");
ABSL_FLAG(int, api_requests, 200, "bench api: requests per path (after 20 of warm-up)");
ABSL_FLAG(int, api_prompt_tokens, 16, "bench api: prompt length in tokens");
ABSL_FLAG(int, api_max_tokens, 4, "bench api: tokens generated per request");

namespace pkv::client {

int RunBenchApi() {
  serve_bench::ApiOverheadOptions o;
  o.router = absl::GetFlag(FLAGS_router);
  o.http = absl::GetFlag(FLAGS_http);
  o.api_key = ApiKey();
  o.requests = absl::GetFlag(FLAGS_api_requests);
  o.prompt_tokens = absl::GetFlag(FLAGS_api_prompt_tokens);
  o.max_tokens = absl::GetFlag(FLAGS_api_max_tokens);
  if (o.requests < 1 || o.prompt_tokens < 1 || o.max_tokens < 1) {
    return UsageError("--api_requests, --api_prompt_tokens and --api_max_tokens must be >= 1");
  }
  std::fprintf(stderr, "bench api: %d requests per path through %s (gRPC) and %s (HTTP)...\n",
               o.requests, o.router.c_str(), o.http.c_str());
  absl::StatusOr<serve_bench::ApiOverheadResult> r = serve_bench::MeasureApiOverhead(o);
  if (!r.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(r.status().message()).c_str());
    return 1;
  }
  using serve_bench::Percentile;
  std::printf("%-6s %12s %12s %12s %12s\n", "path", "ttft p50 ms", "ttft p90 ms", "e2e p50 ms",
              "e2e p90 ms");
  for (const auto& [name, t] : {std::pair{"grpc", &r->grpc}, std::pair{"http", &r->http}}) {
    std::printf("%-6s %12.3f %12.3f %12.3f %12.3f\n", name, Percentile(t->ttft_ms, 50),
                Percentile(t->ttft_ms, 90), Percentile(t->e2e_ms, 50), Percentile(t->e2e_ms, 90));
  }
  std::printf("http - grpc: ttft p50 %+.3f ms, e2e p50 %+.3f ms\n",
              Percentile(r->http.ttft_ms, 50) - Percentile(r->grpc.ttft_ms, 50),
              Percentile(r->http.e2e_ms, 50) - Percentile(r->grpc.e2e_ms, 50));
  return 0;
}

}  // namespace pkv::client
