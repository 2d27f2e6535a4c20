#include "router/openai/http_metrics.h"

#include <array>

#include "prometheus/counter.h"

namespace pkv::openai {
namespace {

// The same buckets as the gRPC histograms, so the two can be compared bucket by bucket.
const prometheus::Histogram::BucketBoundaries kTtftBuckets = {
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
const prometheus::Histogram::BucketBoundaries kDurationBuckets = {
    0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600};

constexpr std::array<std::string_view, 6> kRoutes = {
    "/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/metrics", "/"};

}  // namespace

HttpMetrics::HttpMetrics(prometheus::Registry& registry)
    : requests_(prometheus::BuildCounter()
                    .Name("pkv_router_http_requests_total")
                    .Help("HTTP requests answered by the router, by route and status code")
                    .Register(registry)),
      duration_(prometheus::BuildHistogram()
                    .Name("pkv_router_http_request_duration_seconds")
                    .Help("HTTP request duration, from the complete request to its last byte "
                          "queued for the client")
                    .Register(registry)),
      ttft_(prometheus::BuildHistogram()
                .Name("pkv_router_http_time_to_first_token_seconds")
                .Help("HTTP completions: from the complete request to the first token queued for "
                      "the client")
                .Register(registry)) {}

std::string_view HttpMetrics::PathLabel(std::string_view path) {
  for (std::string_view route : kRoutes) {
    if (path == route) return route;
  }
  return "other";
}

void HttpMetrics::RecordRequest(std::string_view path, int status, double seconds) {
  const std::string label(PathLabel(path));
  requests_.Add({{"path", label}, {"status", std::to_string(status)}}).Increment();
  duration_.Add({{"path", label}}, kDurationBuckets).Observe(seconds);
}

void HttpMetrics::RecordTimeToFirstToken(std::string_view path, double seconds) {
  ttft_.Add({{"path", std::string(PathLabel(path))}}, kTtftBuckets).Observe(seconds);
}

}  // namespace pkv::openai
