// Prometheus metrics of the router's HTTP API, next to the gRPC ones (router/router_metrics.h):
//   pkv_router_http_requests_total{path, status}              every answered HTTP request
//   pkv_router_http_request_duration_seconds{path}            request to last byte queued
//   pkv_router_http_time_to_first_token_seconds{path}         request to first token queued
// `path` is one of the served routes or "other", so a client cannot grow the label set.
// Thread-safe (prometheus-cpp metrics are).
#pragma once

#include <string>
#include <string_view>

#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace pkv::openai {

class HttpMetrics {
 public:
  explicit HttpMetrics(prometheus::Registry& registry);

  // The label value for a request path: the route itself when served, else "other".
  static std::string_view PathLabel(std::string_view path);

  void RecordRequest(std::string_view path, int status, double seconds);
  void RecordTimeToFirstToken(std::string_view path, double seconds);

 private:
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Histogram>& duration_;
  prometheus::Family<prometheus::Histogram>& ttft_;
};

}  // namespace pkv::openai
