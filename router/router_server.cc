#include "router/router_server.h"

#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "router/router_tls.h"

namespace pkv::router {
namespace {

constexpr char kGenerationService[] = "pkv.v1.Generation";
// After Shutdown cancelled them, streams end as soon as their worker calls notice; bounded anyway.
constexpr absl::Duration kStreamWindDown = absl::Seconds(10);

uint64_t StartupKey() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device() ^
         static_cast<uint64_t>(absl::ToUnixNanos(absl::Now()));
}

}  // namespace

RouterServer::RouterServer(RouterOptions options, prometheus::Registry& metrics_registry)
    : options_(std::move(options)),
      metrics_registry_(metrics_registry),
      metrics_(metrics_registry),
      admission_(options_.max_inflight, options_.max_queue, options_.queue_timeout, &timers_,
                 [this](int inflight, int queued) {
                   metrics_.SetInflight(inflight);
                   metrics_.SetQueueDepth(queued);
                 }),
      placer_(static_cast<size_t>(options_.max_sessions), StartupKey(),
              PrefixRouting{.enabled = options_.prefix_routing}),
      ids_(StartupKey()),
      connections_(ConnectionLimits{options_.max_streams_per_connection_per_second,
                                    options_.max_resets_per_connection_per_second}) {}

RouterServer::~RouterServer() { Shutdown(); }

absl::Status RouterServer::Start() {
  absl::Status valid = ValidateRouterOptions(options_, static_cast<int>(in_process_.size()));
  if (!valid.ok()) return valid;
  absl::StatusOr<RouterCredentials> credentials = LoadRouterCredentials(options_);
  if (!credentials.ok()) return credentials.status();
  auth_ = std::move(credentials->api_keys);
  registry_ = std::make_unique<WorkerRegistry>(
      options_, [this](int healthy, int unhealthy) { OnWorkersChanged(healthy, unhealthy); },
      credentials->worker_channel, std::move(in_process_));
  RouterContext rc;
  rc.options = &options_;
  rc.registry = registry_.get();
  rc.placer = &placer_;
  rc.admission = &admission_;
  rc.timers = &timers_;
  rc.metrics = &metrics_;
  rc.requests = &requests_;
  rc.ids = &ids_;
  rc.streams = &streams_;
  rc.draining = &draining_;
  rc.auth = auth_.get();
  rc.connections = &connections_;
  service_ = std::make_unique<GenerationService>(rc);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options_.listen, credentials->client_port, &port_);
  builder.RegisterService(service_.get());
  // Client-facing limits set explicitly rather than left to version defaults (RELIABILITY P1, S5).
  builder.SetMaxReceiveMessageSize(options_.max_request_bytes);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options_.max_concurrent_streams);
  builder.AddChannelArgument(GRPC_ARG_MAX_METADATA_SIZE, options_.max_metadata_bytes);
  builder.AddChannelArgument(
      GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
      static_cast<int>(absl::ToInt64Milliseconds(options_.handshake_timeout)));
  // Ping-flood policy (RELIABILITY S4), gRPC core's defaults pinned: a PING sooner than 5 min after
  // the last with no data in flight is a strike; a third strike gets GOAWAY too_many_pings.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5 * 60 * 1000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 2);
  {
    absl::MutexLock lock(&health_mu_);
    server_ = builder.BuildAndStart();
    if (server_ == nullptr || port_ == 0) {
      server_.reset();
      return absl::UnavailableError(
          absl::StrCat("cannot listen on ", options_.listen,
                       " (address in use or not local?); pick another with --listen=host:port"));
    }
    connections_.set_listen_port(port_);
    grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
    health->SetServingStatus("", true);                   // liveness: the process serves gRPC
    health->SetServingStatus(kGenerationService, false);  // readiness: once a worker is healthy
  }
  registry_->SetMetrics(&metrics_);
  admission_.set_max_queued_tokens(options_.max_queue_tokens);
  if (!options_.workers_dns.empty()) {
    const absl::StatusOr<DnsTarget> target = ParseDnsTarget(options_.workers_dns);  // validated
    discovery_ = std::make_unique<DnsDiscovery>(
        options_.workers_dns, [target = *target] { return ResolveARecords(target); },
        options_.dns_interval,
        [this](const std::vector<std::string>& addresses) { registry_->SetDiscovered(addresses); });
    discovery_->Start();  // resolves once now, so the first probe round sees DNS workers
  }
  registry_->Start();
  PKV_LOG(INFO) << "router listening on " << options_.listen << " (port " << port_ << "), "
                << registry_->size() << " worker(s); " << SecuritySummary(options_);
  return StartHttp(options_.client_tls);
}

absl::Status RouterServer::StartHttp(const TlsFiles& tls) {
  if (options_.http_listen.empty()) return absl::OkStatus();
  openai::RouterHooks hooks;
  hooks.model_info = [this] { return registry_->AnyModelInfo(); };
  hooks.ready = [this] { return !draining_.load() && registry_->num_healthy() > 0; };
  if (auth_ != nullptr) {
    hooks.authorized = [auth = auth_.get()](std::string_view authorization) {
      return auth->IsValidKey(
          BearerToken(absl::string_view(authorization.data(), authorization.size())));
    };
  }
  openai::OpenAiOptions api;
  api.served_model_name = options_.served_model_name;
  api.request_timeout = options_.http_request_timeout;
  std::shared_ptr<grpc::Channel> channel;
  {
    absl::MutexLock lock(&health_mu_);
    channel = server_->InProcessChannel(grpc::ChannelArguments());
  }
  openai_ = std::make_unique<openai::OpenAiFrontend>(std::move(api), std::move(channel),
                                                     std::move(hooks), metrics_registry_);
  http::HttpServerOptions ho;
  ho.listen = options_.http_listen;
  ho.tls = TlsFiles{tls.cert_file, tls.key_file, ""};
  ho.threads = options_.http_threads;
  ho.max_connections = options_.http_max_connections;
  ho.max_body_bytes = static_cast<size_t>(options_.http_max_body_bytes);
  ho.read_timeout = options_.http_read_timeout;
  ho.write_timeout = options_.client_write_timeout > absl::ZeroDuration()
                         ? options_.client_write_timeout
                         : absl::Hours(24 * 365);
  absl::StatusOr<std::unique_ptr<http::HttpServer>> started = http::HttpServer::Start(
      std::move(ho), [api = openai_.get()](std::shared_ptr<http::Exchange> exchange) {
        api->Handle(std::move(exchange));
      });
  if (!started.ok()) {
    return absl::Status(
        started.status().code(),
        absl::StrCat(started.status().message(), "; pick another with --http_listen=host:port"));
  }
  http_ = std::move(*started);
  PKV_LOG(INFO) << "OpenAI-compatible API on " << (tls.cert_file.empty() ? "http" : "https")
                << "://" << options_.http_listen << " (port " << http_->port() << ")";
  return absl::OkStatus();
}

void RouterServer::StopHttp() {
  // Closing the connections cancels their calls; the in-process calls then end with the server.
  if (http_ != nullptr) http_->Stop();
}

void RouterServer::OnWorkersChanged(int healthy, int unhealthy) {
  metrics_.SetWorkers(healthy, unhealthy);
  absl::MutexLock lock(&health_mu_);
  const bool serving = healthy > 0;
  if (server_ == nullptr || draining_.load() || serving == serving_) return;
  serving_ = serving;
  server_->GetHealthCheckService()->SetServingStatus(kGenerationService, serving);
  PKV_LOG(INFO) << "router " << (serving ? "SERVING" : "NOT_SERVING") << ": " << healthy
                << " healthy, " << unhealthy << " unhealthy worker(s)";
}

bool RouterServer::Drain(absl::Duration timeout) {
  {
    absl::MutexLock lock(&health_mu_);
    if (server_ == nullptr) return true;
    draining_.store(true);
    // Readiness NOT_SERVING at once, and later worker updates ignored (OnWorkersChanged checks
    // draining_); liveness "" stays SERVING while in-flight streams finish.
    server_->GetHealthCheckService()->SetServingStatus(kGenerationService, false);
  }
  PKV_LOG(INFO) << "draining: " << requests_.live_streams() << " stream(s) in flight, up to "
                << absl::FormatDuration(timeout);
  const bool drained = requests_.WaitUntilEmpty(absl::Now() + timeout);
  if (!drained) {
    PKV_LOG(WARNING) << "drain timeout: cancelling " << requests_.live_streams()
                     << " stream(s) still in flight";
  }
  Shutdown();
  return drained;
}

void RouterServer::Shutdown() {
  if (stopped_) return;
  stopped_ = true;
  std::unique_ptr<grpc::Server> server;
  {
    absl::MutexLock lock(&health_mu_);
    draining_.store(true);
    server = std::move(server_);
  }
  StopHttp();
  if (server != nullptr) {
    server->GetHealthCheckService()->Shutdown();  // every service NOT_SERVING from here on
    // Cancels whatever still runs (streams then cancel their worker calls) and waits for the
    // server's reactions to finish.
    server->Shutdown(std::chrono::system_clock::now());
    server->Wait();
  }
  if (!streams_.WaitForZero(absl::Now() + kStreamWindDown)) {
    PKV_LOG(WARNING) << streams_.value() << " stream(s) did not wind down in time";
  }
  if (openai_ != nullptr && !openai_->WaitIdle(absl::Now() + kStreamWindDown)) {
    PKV_LOG(WARNING) << "HTTP completions did not wind down in time";
  }
  http_.reset();
  if (discovery_ != nullptr) discovery_->Stop();
  if (registry_ != nullptr) registry_->Stop();
}

}  // namespace pkv::router
