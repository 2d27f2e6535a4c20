// What the OpenAI HTTP API costs over gRPC: the same requests, one at a time and alternating,
// through the router's gRPC front door and its HTTP API (SSE), each on one reused connection, in
// one run; time to first token and to the end, as a client sees them.
//
// Closed loop, concurrency 1, greedy token-id prompts (identical for both paths) with ignore_eos,
// so the two differ only in the path: HTTP parsing and SSE framing plus the in-process gRPC hop.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pkv::serve_bench {

struct ApiOverheadOptions {
  std::string router;  // gRPC host:port
  std::string http;    // HTTP host:port (plain HTTP)
  std::string model;   // the served model name ("" = let the router use its own)
  std::string api_key;
  int requests = 200;  // per path
  int warmup = 20;     // per path, not counted
  int prompt_tokens = 16;
  int max_tokens = 4;
  int vocab_size = 256;  // token ids are drawn below this
};

struct PathTimes {
  std::vector<double> ttft_ms;
  std::vector<double> e2e_ms;
};

struct ApiOverheadResult {
  PathTimes grpc;
  PathTimes http;
};

absl::StatusOr<ApiOverheadResult> MeasureApiOverhead(const ApiOverheadOptions& options);

}  // namespace pkv::serve_bench
