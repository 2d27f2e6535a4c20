// A local PersistentKV cluster for integration tests: N real pkv-worker processes (CPU backend,
// tiny model) and one pkv-router, all on 127.0.0.1 with ephemeral ports, plus helpers to stream a
// generation, read /metrics and check the KV ledger. Not thread-safe except RunGenerate and the
// Scrape helpers, which tests call from many threads.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "pkv/v1/generation.grpc.pb.h"
#include "pkv/v1/worker.grpc.pb.h"
#include "tests/harness/process.h"

namespace pkv::testing {

struct ClusterOptions {
  int num_workers = 2;
  bool start_router = true;
  std::vector<std::string> worker_args;  // extra flags for every worker
  // Extra flags for worker i only (after worker_args; a later flag wins), e.g. a test fault.
  std::vector<std::vector<std::string>> per_worker_args;
  std::vector<std::string> router_args;  // extra flags for the router
  bool http = false;                     // the router's OpenAI HTTP API on a free port
  std::string model_dir;                 // default TinyModelDir()
  // Plaintext everywhere (--insecure on every process). A test of TLS sets this false, passes
  // the TLS flags in worker_args/router_args and the credentials the harness's own clients use.
  bool insecure = true;
  std::shared_ptr<grpc::ChannelCredentials> router_credentials;  // null: plaintext
  std::shared_ptr<grpc::ChannelCredentials> worker_credentials;  // null: plaintext
};

struct WorkerProc {
  int port = 0;
  int metrics_port = 0;
  std::string id;
  std::unique_ptr<Process> process;
  std::string address() const { return "127.0.0.1:" + std::to_string(port); }
  std::string metrics_address() const { return "127.0.0.1:" + std::to_string(metrics_port); }
};

class Cluster {
 public:
  static absl::StatusOr<std::unique_ptr<Cluster>> Start(const ClusterOptions& options);
  ~Cluster();

  int num_workers() const { return static_cast<int>(workers_.size()); }
  WorkerProc& worker(int i) { return workers_[i]; }
  Process& router() { return *router_; }
  std::string router_address() const { return "127.0.0.1:" + std::to_string(router_port_); }
  std::string router_metrics_address() const {
    return "127.0.0.1:" + std::to_string(router_metrics_port_);
  }
  // With ClusterOptions::http: the router's HTTP API (host:port).
  std::string router_http_address() const {
    return "127.0.0.1:" + std::to_string(router_http_port_);
  }
  const std::string& model_dir() const { return options_.model_dir; }
  const std::string& log_dir() const { return log_dir_; }

  // (Re)starts worker i on its ports (after a kill); waits until SERVING.
  absl::Status RestartWorker(int i, const std::vector<std::string>& extra_args = {});
  // All process logs' tails, for assertion messages.
  std::string Logs();

  std::unique_ptr<pkv::v1::Generation::Stub> RouterStub() const;
  std::unique_ptr<pkv::v1::Worker::Stub> WorkerStub(int i) const;

 private:
  explicit Cluster(ClusterOptions options) : options_(std::move(options)) {}
  absl::Status SpawnWorker(int i, const std::vector<std::string>& extra_args);

  ClusterOptions options_;
  std::string log_dir_;
  std::vector<WorkerProc> workers_;
  std::unique_ptr<Process> router_;
  int router_port_ = 0;
  int router_metrics_port_ = 0;
  int router_http_port_ = 0;
};

// Polls grpc.health.v1 Check(service) at `address` until SERVING or the timeout. `credentials`
// null = plaintext.
absl::Status WaitServing(const std::string& address, absl::Duration timeout,
                         const std::string& service = "",
                         std::shared_ptr<grpc::ChannelCredentials> credentials = nullptr);

// The outcome of one streamed generation as a client saw it.
struct StreamResult {
  grpc::Status status;
  std::vector<uint32_t> token_ids;
  std::vector<float> logprobs;  // each sampled token's, when the request asked for them
  std::string text;
  bool completed = false;
  pkv::v1::Complete complete;
  int num_chunks = 0;
  absl::Duration time_to_first_chunk = absl::InfiniteDuration();
};

// Runs Generate to completion (or error) with the given deadline. `wait_for_ready` (default on):
// wait for the channel to connect instead of failing fast, so a transient first-connect failure
// on a loaded machine does not fail a test about something else (see reliability_util.h).
StreamResult RunGenerate(pkv::v1::Generation::Stub* stub, const pkv::v1::GenerateRequest& request,
                         absl::Duration deadline = absl::Seconds(60), bool wait_for_ready = true);

// GET http://address/path over a plain socket; the body on 200.
absl::StatusOr<std::string> HttpGet(const std::string& address, const std::string& path);
// The value of one sample in Prometheus text format, e.g. Metric(text,
// "pkv_kv_cache_pages{state=\"used\"}"); NaN when absent.
double MetricValue(const std::string& metrics_text, const std::string& sample);
// Scrapes and returns one sample (NaN on failure).
double ScrapeMetric(const std::string& address, const std::string& sample);

// A request for the tiny model: token-id prompt, greedy unless temperature is set.
pkv::v1::GenerateRequest MakeRequest(const std::vector<uint32_t>& prompt, uint32_t max_tokens,
                                     float temperature = 0.0f);

}  // namespace pkv::testing
