// Test harness: a RouterServer on a loopback port in front of FakeWorkers, a client stub, and
// helpers to run a Generate stream and read the router's metrics.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "grpcpp/client_context.h"
#include "pkv/v1/generation.grpc.pb.h"
#include "prometheus/registry.h"
#include "router/router_server.h"
#include "tests/unit/router/fake_worker.h"

namespace pkv::router::testing {

struct StreamResult {
  grpc::Status status;
  std::vector<uint32_t> tokens;
  std::string text;
  std::optional<pkv::v1::Complete> complete;
  std::map<std::string, std::string> trailers;
};

// Options tuned for fast tests: short probe intervals and timeouts.
RouterOptions FastOptions(const std::vector<FakeWorker*>& workers);

pkv::v1::GenerateRequest TokenRequest(std::vector<uint32_t> prompt, uint32_t max_tokens);

class RouterHarness {
 public:
  explicit RouterHarness(RouterOptions options);
  ~RouterHarness();

  // Starts the router and waits (bounded) until `healthy` workers are placeable.
  void Start(int healthy);
  bool WaitForHealthy(int healthy, absl::Duration timeout = absl::Seconds(10));

  StreamResult Run(const pkv::v1::GenerateRequest& request,
                   std::optional<absl::Duration> deadline = std::nullopt);
  pkv::v1::Generation::Stub& stub() { return *stub_; }
  RouterServer& router() { return *router_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(router_->port()); }

  // Value of a counter or gauge (labels must match exactly), or of a histogram's sample count.
  double Metric(const std::string& name, const std::map<std::string, std::string>& labels = {});
  // Metric() once it reaches `value` (bounded wait): per-stream metrics are recorded when the
  // router's reaction finishes, which may be just after the client saw the status.
  double MetricWhen(double value, const std::string& name,
                    const std::map<std::string, std::string>& labels = {});

 private:
  prometheus::Registry registry_;
  std::unique_ptr<RouterServer> router_;
  std::unique_ptr<pkv::v1::Generation::Stub> stub_;
};

}  // namespace pkv::router::testing
