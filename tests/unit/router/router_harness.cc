#include "tests/unit/router/router_harness.h"

#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"

namespace pkv::router::testing {

RouterOptions FastOptions(const std::vector<FakeWorker*>& workers) {
  RouterOptions options;
  options.listen = "127.0.0.1:0";
  for (FakeWorker* w : workers) options.workers.push_back(w->address());
  options.health_interval = absl::Milliseconds(50);
  options.load_interval = absl::Milliseconds(50);
  options.stall_timeout = absl::Seconds(3);
  options.retry_backoff = absl::Milliseconds(5);
  options.retry_backoff_max = absl::Milliseconds(20);
  return options;
}

pkv::v1::GenerateRequest TokenRequest(std::vector<uint32_t> prompt, uint32_t max_tokens) {
  pkv::v1::GenerateRequest request;
  for (uint32_t id : prompt) request.mutable_token_ids()->add_ids(id);
  request.mutable_sampling()->set_max_tokens(max_tokens);
  return request;
}

RouterHarness::RouterHarness(RouterOptions options)
    : router_(std::make_unique<RouterServer>(std::move(options), registry_)) {}

RouterHarness::~RouterHarness() {
  stub_.reset();
  router_.reset();
}

void RouterHarness::Start(int healthy) {
  absl::Status started = router_->Start();
  ASSERT_TRUE(started.ok()) << started;
  stub_ = pkv::v1::Generation::NewStub(
      grpc::CreateChannel(address(), grpc::InsecureChannelCredentials()));
  ASSERT_TRUE(WaitForHealthy(healthy)) << "workers never became healthy";
}

bool RouterHarness::WaitForHealthy(int healthy, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (router_->healthy_workers() != healthy) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

StreamResult RouterHarness::Run(const pkv::v1::GenerateRequest& request,
                                std::optional<absl::Duration> deadline) {
  grpc::ClientContext ctx;
  if (deadline.has_value()) ctx.set_deadline(absl::ToChronoTime(absl::Now() + *deadline));
  StreamResult result;
  auto reader = stub_->Generate(&ctx, request);
  pkv::v1::GenerateResponse response;
  while (reader->Read(&response)) {
    if (response.has_chunk()) {
      result.tokens.insert(result.tokens.end(), response.chunk().token_ids().begin(),
                           response.chunk().token_ids().end());
      result.text += response.chunk().text();
    } else if (response.has_complete()) {
      EXPECT_FALSE(result.complete.has_value()) << "two Completes";
      result.complete = response.complete();
    }
  }
  result.status = reader->Finish();
  for (const auto& [key, value] : ctx.GetServerTrailingMetadata()) {
    result.trailers[std::string(key.data(), key.size())] = std::string(value.data(), value.size());
  }
  return result;
}

double RouterHarness::MetricWhen(double value, const std::string& name,
                                 const std::map<std::string, std::string>& labels) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  double got = Metric(name, labels);
  while (got != value && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(2));
    got = Metric(name, labels);
  }
  return got;
}

double RouterHarness::Metric(const std::string& name,
                             const std::map<std::string, std::string>& labels) {
  for (const prometheus::MetricFamily& family : registry_.Collect()) {
    if (family.name != name) continue;
    for (const prometheus::ClientMetric& metric : family.metric) {
      std::map<std::string, std::string> got;
      for (const auto& label : metric.label) got[label.name] = label.value;
      if (got != labels) continue;
      switch (family.type) {
        case prometheus::MetricType::Counter:
          return metric.counter.value;
        case prometheus::MetricType::Gauge:
          return metric.gauge.value;
        case prometheus::MetricType::Histogram:
          return static_cast<double>(metric.histogram.sample_count);
        default:
          return -1;
      }
    }
  }
  ADD_FAILURE() << "metric " << name << " not found";
  return -1;
}

}  // namespace pkv::router::testing
