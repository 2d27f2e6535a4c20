// Reads a counter from a Prometheus /metrics endpoint (text exposition format 0.0.4), so the
// benchmark can compare its own request count with the router's (pkv_router_requests_total,
// router/router_metrics.cc). Blocking; call from the dispatcher thread before and after a run.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pkv::serve_bench {

// GET http://<host:port>/metrics (HTTP/1.0, plain TCP, 5 s timeout); the body on 200.
absl::StatusOr<std::string> FetchMetrics(const std::string& host_port);

// The sum over every sample of the metric `name` (all label sets), e.g. the router's finished
// streams over all status codes. 0 when the metric has no samples; INVALID_ARGUMENT on a value
// that is not a number.
absl::StatusOr<double> SumMetric(absl::string_view exposition, absl::string_view name);

}  // namespace pkv::serve_bench
