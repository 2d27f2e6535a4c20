// pkv-router: the front door. Parses flags, serves Prometheus metrics on --metrics_listen, runs a
// RouterServer on --listen, and on SIGTERM/SIGINT drains (health NOT_SERVING, new streams
// UNAVAILABLE, in-flight streams finish for up to --drain_timeout) and exits 0.
#include <csignal>
#include <cstdio>
#include <memory>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "common/log.h"
#include "google/protobuf/stubs/logging.h"
#include "metrics/metrics_server.h"
#include "prometheus/registry.h"
#include "router/router_flags.h"
#include "router/router_server.h"

namespace {

// Blocks SIGTERM/SIGINT in this thread and, by inheritance, every thread started later, so the
// main thread can take them synchronously with sigwait (no async-signal-safety concerns).
sigset_t BlockShutdownSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

// libprotobuf logs an ERROR line for every request string field that is not UTF-8, so a client
// could flood the log. Such requests already get INVALID_ARGUMENT (generation_service.h): keep
// protobuf's own messages at debug level (FATAL still aborts inside protobuf).
void ProtobufLogAtDebug(google::protobuf::LogLevel /*level*/, const char* file, int line,
                        const std::string& message) {
  PKV_LOG(DEBUG) << "libprotobuf " << file << ":" << line << ": " << message;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "pkv-router --workers=host:port[,host:port...] [--listen=127.0.0.1:50051] "
      "[--metrics_listen=127.0.0.1:9100]");
  absl::ParseCommandLine(argc, argv);
  pkv::SetLogTag("router");
  google::protobuf::SetLogHandler(&ProtobufLogAtDebug);
  absl::StatusOr<pkv::router::RouterProcessOptions> options =
      pkv::router::RouterProcessOptionsFromFlags();
  if (!options.ok()) {
    std::fprintf(stderr, "pkv-router: %s\n", std::string(options.status().message()).c_str());
    return 2;
  }
  const sigset_t signals = BlockShutdownSignals();

  auto registry = std::make_shared<prometheus::Registry>();
  std::unique_ptr<pkv::MetricsServer> metrics;
  if (!options->metrics_listen.empty()) {
    auto started_metrics = pkv::MetricsServer::Start(options->metrics_listen, registry);
    if (!started_metrics.ok()) {
      std::fprintf(stderr,
                   "pkv-router: %s (pick another with --metrics_listen=host:port, or "
                   "--metrics_listen= to turn metrics off)\n",
                   std::string(started_metrics.status().message()).c_str());
      return 1;
    }
    metrics = std::move(*started_metrics);
  }
  pkv::router::RouterServer server(options->router, *registry);
  absl::Status started = server.Start();
  if (!started.ok()) {
    std::fprintf(stderr, "pkv-router: %s\n", std::string(started.message()).c_str());
    return 1;
  }
  if (metrics != nullptr) {
    PKV_LOG(INFO) << "metrics on http://" << options->metrics_listen << "/metrics";
  }

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  PKV_LOG(INFO) << "received " << (signal_number == SIGTERM ? "SIGTERM" : "SIGINT") << ", draining";
  const bool drained = server.Drain(options->drain_timeout);
  PKV_LOG(INFO) << (drained ? "drained, exiting" : "drain timed out, exiting");
  return 0;
}
