#include "tests/harness/cluster.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace pkv::testing {
namespace {

// PKV_TEST_BACKEND (cpu | cuda) picks the workers' model backend; unset: cpu.
std::string TestBackend() {
  const char* b = std::getenv("PKV_TEST_BACKEND");
  return b != nullptr && *b != '\0' ? b : "cpu";
}

// Like WaitServing (60 s), but gives up at once with ABORTED when `process` exits first, e.g.
// because another process took its port between PickFreePort() and its bind (tests of several
// helpers share this machine), so the caller can retry on fresh ports instead of waiting 60 s.
absl::Status WaitServingWhileRunning(Process& process, const std::string& address,
                                     const std::string& service,
                                     const std::shared_ptr<grpc::ChannelCredentials>& creds) {
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (true) {
    absl::Status st = WaitServing(address, absl::Milliseconds(500), service, creds);
    if (st.ok()) return st;
    if (!process.Running()) {
      return absl::AbortedError(absl::StrCat(address, " exited before SERVING"));
    }
    if (absl::Now() >= deadline) return st;
  }
}

constexpr int kStartAttempts = 3;  // spawns per process when it loses its port

}  // namespace

absl::StatusOr<std::unique_ptr<Cluster>> Cluster::Start(const ClusterOptions& options) {
  std::unique_ptr<Cluster> c(new Cluster(options));
  if (c->options_.model_dir.empty()) c->options_.model_dir = TinyModelDir();
  if (c->options_.model_dir.empty()) return absl::InternalError("pkv-make-model failed");
  c->log_dir_ = MakeTempDir("pkv-cluster");
  c->workers_.resize(options.num_workers);
  for (int i = 0; i < options.num_workers; ++i) {
    c->workers_[i].port = PickFreePort();
    c->workers_[i].metrics_port = PickFreePort();
    c->workers_[i].id = absl::StrCat("w", i);
    absl::Status st = c->SpawnWorker(i, {});
    if (!st.ok()) return st;
  }
  for (int i = 0; i < options.num_workers; ++i) {
    absl::Status st;
    for (int attempt = 0; attempt < kStartAttempts; ++attempt) {
      if (attempt > 0) {  // it exited (a port taken meanwhile): fresh ports, spawn again
        c->workers_[i].port = PickFreePort();
        c->workers_[i].metrics_port = PickFreePort();
        st = c->SpawnWorker(i, {});
        if (!st.ok()) return st;
      }
      st = WaitServingWhileRunning(*c->workers_[i].process, c->workers_[i].address(),
                                   "pkv.v1.Worker", c->options_.worker_credentials);
      if (st.code() != absl::StatusCode::kAborted) break;
    }
    if (!st.ok()) {
      return absl::Status(st.code(),
                          absl::StrCat(st.message(), "\n", c->workers_[i].process->LogTail()));
    }
  }
  if (!options.start_router) return c;
  std::vector<std::string> worker_list;
  for (const WorkerProc& w : c->workers_) worker_list.push_back(w.address());
  absl::Status st;
  for (int attempt = 0; attempt < kStartAttempts; ++attempt) {
    c->router_port_ = PickFreePort();
    c->router_metrics_port_ = PickFreePort();
    std::vector<std::string> args = {
        absl::StrCat("--listen=127.0.0.1:", c->router_port_),
        absl::StrCat("--metrics_listen=127.0.0.1:", c->router_metrics_port_),
        absl::StrCat("--workers=", absl::StrJoin(worker_list, ","))};
    if (options.insecure) args.push_back("--insecure");
    if (options.http) {
      c->router_http_port_ = PickFreePort();
      args.push_back(absl::StrCat("--http_listen=127.0.0.1:", c->router_http_port_));
    }
    args.insert(args.end(), options.router_args.begin(), options.router_args.end());
    auto router = Process::Spawn(BinDir() + "/pkv-router", args, c->log_dir_ + "/router.log");
    if (!router.ok()) return router.status();
    c->router_ = std::move(*router);
    st = WaitServingWhileRunning(*c->router_, c->router_address(), "pkv.v1.Generation",
                                 options.router_credentials);
    if (st.code() != absl::StatusCode::kAborted) break;
  }
  if (!st.ok()) return absl::Status(st.code(), absl::StrCat(st.message(), "\n", c->Logs()));
  return c;
}

Cluster::~Cluster() = default;

absl::Status Cluster::SpawnWorker(int i, const std::vector<std::string>& extra_args) {
  WorkerProc& w = workers_[i];
  std::vector<std::string> args = {
      absl::StrCat("--listen=", w.address()),
      absl::StrCat("--metrics_listen=", w.metrics_address()), absl::StrCat("--worker_id=", w.id),
      absl::StrCat("--model=", options_.model_dir), absl::StrCat("--backend=", TestBackend())};
  // Another backend gets the CPU backend's default pool size, so admission behaves the same.
  if (TestBackend() != "cpu") args.push_back("--kv_pages=2048");
  if (options_.insecure) args.push_back("--insecure");
  args.insert(args.end(), options_.worker_args.begin(), options_.worker_args.end());
  if (i < static_cast<int>(options_.per_worker_args.size())) {
    const std::vector<std::string>& own = options_.per_worker_args[i];
    args.insert(args.end(), own.begin(), own.end());
  }
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  auto p =
      Process::Spawn(BinDir() + "/pkv-worker", args, absl::StrCat(log_dir_, "/", w.id, ".log"));
  if (!p.ok()) return p.status();
  w.process = std::move(*p);
  return absl::OkStatus();
}

absl::Status Cluster::RestartWorker(int i, const std::vector<std::string>& extra_args) {
  workers_[i].process.reset();
  absl::Status st = SpawnWorker(i, extra_args);
  if (!st.ok()) return st;
  return WaitServing(workers_[i].address(), absl::Seconds(60), "pkv.v1.Worker",
                     options_.worker_credentials);
}

std::string Cluster::Logs() {
  std::string out;
  for (WorkerProc& w : workers_) {
    if (w.process) absl::StrAppend(&out, w.process->LogTail(2000), "\n");
  }
  if (router_) absl::StrAppend(&out, router_->LogTail(3000));
  return out;
}

std::unique_ptr<pkv::v1::Generation::Stub> Cluster::RouterStub() const {
  return pkv::v1::Generation::NewStub(grpc::CreateChannel(
      router_address(), options_.router_credentials ? options_.router_credentials
                                                    : grpc::InsecureChannelCredentials()));
}

std::unique_ptr<pkv::v1::Worker::Stub> Cluster::WorkerStub(int i) const {
  return pkv::v1::Worker::NewStub(grpc::CreateChannel(
      workers_[i].address(), options_.worker_credentials ? options_.worker_credentials
                                                         : grpc::InsecureChannelCredentials()));
}

absl::Status WaitServing(const std::string& address, absl::Duration timeout,
                         const std::string& service,
                         std::shared_ptr<grpc::ChannelCredentials> credentials) {
  if (credentials == nullptr) credentials = grpc::InsecureChannelCredentials();
  // A fresh channel with its own subchannel pool per attempt: the server is expected within
  // milliseconds, and gRPC's reconnect backoff after a refused connection (shared through the
  // global subchannel pool) would otherwise add seconds to every test's start-up.
  auto make_stub = [&] {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    return grpc::health::v1::Health::NewStub(grpc::CreateCustomChannel(address, credentials, args));
  };
  const absl::Time deadline = absl::Now() + timeout;
  std::string last = "no answer";
  while (absl::Now() < deadline) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
    grpc::health::v1::HealthCheckRequest req;
    req.set_service(service);
    grpc::health::v1::HealthCheckResponse resp;
    grpc::Status st = make_stub()->Check(&ctx, req, &resp);
    if (st.ok() && resp.status() == grpc::health::v1::HealthCheckResponse::SERVING) {
      return absl::OkStatus();
    }
    last = st.ok() ? "NOT_SERVING" : st.error_message();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return absl::DeadlineExceededError(absl::StrCat(address, " not SERVING: ", last));
}

StreamResult RunGenerate(pkv::v1::Generation::Stub* stub, const pkv::v1::GenerateRequest& request,
                         absl::Duration deadline, bool wait_for_ready) {
  StreamResult r;
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  if (wait_for_ready) ctx.set_wait_for_ready(true);
  const absl::Time start = absl::Now();
  auto reader = stub->Generate(&ctx, request);
  pkv::v1::GenerateResponse resp;
  while (reader->Read(&resp)) {
    if (resp.has_chunk()) {
      if (r.num_chunks++ == 0) r.time_to_first_chunk = absl::Now() - start;
      for (uint32_t id : resp.chunk().token_ids()) r.token_ids.push_back(id);
      for (const auto& lp : resp.chunk().logprobs()) r.logprobs.push_back(lp.logprob());
      r.text += resp.chunk().text();
    } else if (resp.has_complete()) {
      r.completed = true;
      r.complete = resp.complete();
    }
  }
  r.status = reader->Finish();
  return r;
}

absl::StatusOr<std::string> HttpGet(const std::string& address, const std::string& path) {
  std::vector<std::string> hp = absl::StrSplit(address, ':');
  if (hp.size() != 2) return absl::InvalidArgumentError("address must be host:port");
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(std::stoi(hp[1])));
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("cannot connect to ", address));
  }
  const std::string req = absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: ", address, "\r\n\r\n");
  if (write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) {
    close(fd);
    return absl::UnavailableError("write failed");
  }
  std::string resp;
  char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) resp.append(buf, static_cast<size_t>(n));
  close(fd);
  const size_t body = resp.find("\r\n\r\n");
  if (resp.rfind("HTTP/1.", 0) != 0 || body == std::string::npos) {
    return absl::InternalError("malformed HTTP response");
  }
  if (resp.find(" 200 ") == std::string::npos) {
    return absl::InternalError(absl::StrCat("HTTP error: ", resp.substr(0, resp.find('\r'))));
  }
  return resp.substr(body + 4);
}

double MetricValue(const std::string& metrics_text, const std::string& sample) {
  for (absl::string_view line : absl::StrSplit(metrics_text, '\n')) {
    if (line.empty() || line[0] == '#') continue;
    if (line.size() > sample.size() && line.substr(0, sample.size()) == sample &&
        line[sample.size()] == ' ') {
      return std::stod(std::string(line.substr(sample.size() + 1)));
    }
  }
  return std::numeric_limits<double>::quiet_NaN();
}

double ScrapeMetric(const std::string& address, const std::string& sample) {
  absl::StatusOr<std::string> text = HttpGet(address, "/metrics");
  if (!text.ok()) return std::numeric_limits<double>::quiet_NaN();
  return MetricValue(*text, sample);
}

pkv::v1::GenerateRequest MakeRequest(const std::vector<uint32_t>& prompt, uint32_t max_tokens,
                                     float temperature) {
  pkv::v1::GenerateRequest req;
  for (uint32_t id : prompt) req.mutable_token_ids()->add_ids(id);
  req.mutable_sampling()->set_max_tokens(max_tokens);
  req.mutable_sampling()->set_temperature(temperature);
  return req;
}

}  // namespace pkv::testing
