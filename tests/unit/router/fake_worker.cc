#include "tests/unit/router/fake_worker.h"

#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace pkv::router::testing {

// One Generate call: the script runs on its own thread and writes through the reactor, waiting
// for each write's completion, so scripts read as blocking code (sleeps, hangs) without holding a
// gRPC thread. The reactor deletes itself in OnDone, after the script's thread finished.
class FakeWorker::GenerateCall final
    : public grpc::ServerWriteReactor<pkv::v1::WorkerGenerateResponse> {
 public:
  GenerateCall(FakeWorker* owner, grpc::CallbackServerContext* ctx,
               const pkv::v1::WorkerGenerateRequest* request)
      : ctx_(ctx), request_(*request) {
    thread_ = std::thread([this, owner] { Finish(owner->Generate(this, request_)); });
  }

  // False when the client went away (the write failed).
  bool Write(const pkv::v1::WorkerGenerateResponse& response) {
    {
      absl::MutexLock lock(&mu_);
      message_ = response;
      write_pending_ = true;
    }
    StartWrite(&message_);
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](bool* pending) { return !*pending; }, &write_pending_));
    return write_ok_;
  }
  bool cancelled() const { return cancelled_.load(); }
  std::chrono::system_clock::time_point deadline() const { return ctx_->deadline(); }

 private:
  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    write_ok_ = ok;
    write_pending_ = false;
  }
  void OnCancel() override { cancelled_.store(true); }
  void OnDone() override {
    // Finish was the script thread's last act; gRPC may even run OnDone inside that Finish.
    if (thread_.get_id() == std::this_thread::get_id()) {
      thread_.detach();
    } else {
      thread_.join();
    }
    delete this;
  }

  grpc::CallbackServerContext* const ctx_;
  const pkv::v1::WorkerGenerateRequest request_;
  absl::Mutex mu_;
  pkv::v1::WorkerGenerateResponse message_;  // stable while a write is pending
  bool write_pending_ ABSL_GUARDED_BY(mu_) = false;
  bool write_ok_ ABSL_GUARDED_BY(mu_) = true;
  std::atomic<bool> cancelled_{false};
  std::thread thread_;
};

class FakeWorker::Service final : public pkv::v1::Worker::CallbackService {
 public:
  explicit Service(FakeWorker* owner) : owner_(owner) {}

  grpc::ServerWriteReactor<pkv::v1::WorkerGenerateResponse>* Generate(
      grpc::CallbackServerContext* ctx, const pkv::v1::WorkerGenerateRequest* request) override {
    return new GenerateCall(owner_, ctx, request);
  }
  grpc::ServerUnaryReactor* Abort(grpc::CallbackServerContext* ctx,
                                  const pkv::v1::AbortRequest* request,
                                  pkv::v1::AbortResponse* response) override {
    {
      absl::MutexLock lock(&owner_->mu_);
      owner_->aborted_.push_back(request->request_id());
    }
    response->set_found(true);
    return Done(ctx);
  }
  grpc::ServerUnaryReactor* GetLoad(grpc::CallbackServerContext* ctx,
                                    const pkv::v1::GetLoadRequest*, pkv::v1::Load* load) override {
    load->set_running(owner_->running_.load());
    load->set_worker_id(owner_->worker_id_);
    load->set_kv_pages_total(128);
    return Done(ctx);
  }
  grpc::ServerUnaryReactor* GetProgress(grpc::CallbackServerContext* ctx,
                                        const pkv::v1::GetProgressRequest* request,
                                        pkv::v1::Progress* progress) override {
    owner_->progress_checks_.fetch_add(1);
    absl::MutexLock lock(&owner_->mu_);
    auto it = owner_->progress_.find(request->request_id());
    if (it != owner_->progress_.end()) {
      progress->set_found(true);
      progress->set_tokens_produced(it->second.tokens_produced);
      progress->set_finished(it->second.finished);
    }
    return Done(ctx);
  }
  grpc::ServerUnaryReactor* Drain(grpc::CallbackServerContext* ctx, const pkv::v1::DrainRequest*,
                                  pkv::v1::DrainResponse*) override {
    return Done(ctx);
  }
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* ctx,
                                         const pkv::v1::GetModelInfoRequest*,
                                         pkv::v1::ModelInfo* info) override {
    info->set_model_name("fake");
    info->set_vocab_size(kFakeVocab);
    info->set_max_context(kFakeMaxContext);
    info->set_page_size(16);
    info->set_backend("cpu");
    info->set_kv_pages_total(128);
    return Done(ctx);
  }

 private:
  static grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* ctx,
                                        grpc::Status status = grpc::Status::OK) {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    reactor->Finish(std::move(status));
    return reactor;
  }

  FakeWorker* const owner_;
};

// grpc.health.v1 Check: the serving flag, or UNAVAILABLE while "down" after a crash (kFail).
class FakeWorker::Health final : public grpc::health::v1::Health::CallbackService {
 public:
  explicit Health(FakeWorker* owner) : owner_(owner) {}
  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* ctx,
                                  const grpc::health::v1::HealthCheckRequest*,
                                  grpc::health::v1::HealthCheckResponse* response) override {
    grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
    bool down = false;
    {
      absl::MutexLock lock(&owner_->mu_);
      down = absl::Now() < owner_->down_until_;
    }
    if (down) {
      reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "fake worker is down"));
      return reactor;
    }
    response->set_status(owner_->serving_.load()
                             ? grpc::health::v1::HealthCheckResponse::SERVING
                             : grpc::health::v1::HealthCheckResponse::NOT_SERVING);
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

 private:
  FakeWorker* const owner_;
};

FakeWorker::FakeWorker(std::string worker_id)
    : worker_id_(std::move(worker_id)),
      service_(std::make_unique<Service>(this)),
      health_(std::make_unique<Health>(this)) {
  script_ = [](int) { return FakeScript{}; };
}

FakeWorker::~FakeWorker() { Stop(); }

void FakeWorker::Start() {
  // Our own Health service (crash emulation); the process-wide default (which RouterServer turns
  // on before building its own server) would register a second one.
  grpc::EnableDefaultHealthCheckService(false);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
  builder.RegisterService(service_.get());
  builder.RegisterService(health_.get());
  // Accept the router's keepalive pings (RELIABILITY.md 3.0), as the real worker must.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 500);
  server_ = builder.BuildAndStart();
}

void FakeWorker::Stop() {
  if (server_ == nullptr) return;
  // Calls still running after the grace period are cancelled (hanging scripts end on it).
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  server_->Wait();
  server_.reset();
}

void FakeWorker::SetServing(bool serving) { serving_.store(serving); }

void FakeWorker::SetScript(std::function<FakeScript(int)> script) {
  absl::MutexLock lock(&mu_);
  script_ = std::move(script);
}

grpc::Status FakeWorker::Generate(GenerateCall* call, const pkv::v1::WorkerGenerateRequest& req) {
  const pkv::v1::WorkerGenerateRequest* request = &req;
  FakeScript script;
  int index = 0;
  {
    absl::MutexLock lock(&mu_);
    index = calls_.fetch_add(1);
    script = script_(index);
    requests_.push_back(*request);
    deadlines_.push_back(call->deadline());
    sent_.emplace_back();
    progress_[request->request().request_id()] = Progress{};
  }
  // Whatever happens next, the stream's end is what GetProgress reports after it.
  struct MarkFinished {
    FakeWorker* fake;
    std::string id;
    ~MarkFinished() {
      absl::MutexLock lock(&fake->mu_);
      fake->progress_[id].finished = true;
    }
  } mark_finished{this, request->request().request_id()};
  if (!script.refuse.ok()) return script.refuse;
  pkv::v1::WorkerGenerateResponse response;
  auto* accepted = response.mutable_accepted();
  accepted->set_worker_id(worker_id_);
  // "Tokenizer" of the fake: a text prompt's ids are its bytes.
  for (uint32_t id : request->request().token_ids().ids()) accepted->add_prompt_token_ids(id);
  for (unsigned char c : request->request().text()) accepted->add_prompt_token_ids(c);
  if (!call->Write(response)) {
    ++cancelled_;
    return grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
  }
  std::mt19937 rng(1000 * (index + 1) + static_cast<uint32_t>(worker_id_.size()));
  int tokens = 0;
  for (int c = 0; c < script.chunks; ++c) {
    if (script.chunk_interval > absl::ZeroDuration()) absl::SleepFor(script.chunk_interval);
    response.Clear();
    std::vector<uint32_t> ids;
    for (int t = 0; t < script.tokens_per_chunk; ++t) {
      const uint32_t id = rng() % kFakeVocab;
      ids.push_back(id);
      response.mutable_chunk()->add_token_ids(id);
      response.mutable_chunk()->mutable_text()->append(absl::StrCat(" t", id));
    }
    if (!call->Write(response)) {
      ++cancelled_;
      return grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
    }
    tokens += script.tokens_per_chunk;
    absl::MutexLock lock(&mu_);
    sent_[index].insert(sent_[index].end(), ids.begin(), ids.end());
    progress_[request->request().request_id()].tokens_produced += script.tokens_per_chunk;
  }
  switch (script.end) {
    case FakeScript::End::kFail: {
      absl::MutexLock lock(&mu_);
      down_until_ = absl::Now() + script.down_for;
      return script.fail;
    }
    case FakeScript::End::kHang: {
      absl::MutexLock lock(&mu_);
      progress_[request->request().request_id()].tokens_produced += 1000;
    }
      while (!call->cancelled()) absl::SleepFor(absl::Milliseconds(2));
      ++cancelled_;
      return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
    case FakeScript::End::kComplete:
      break;
  }
  response.Clear();
  auto* complete = response.mutable_complete();
  complete->set_finish_reason(pkv::v1::FINISH_REASON_LENGTH);
  complete->set_prompt_tokens(request->request().token_ids().ids_size());
  complete->set_completion_tokens(tokens);
  call->Write(response);
  return grpc::Status::OK;
}

bool FakeWorker::WaitForCancelled(int n, absl::Duration timeout) const {
  const absl::Time deadline = absl::Now() + timeout;
  while (cancelled_.load() < n) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(2));
  }
  return true;
}

std::vector<pkv::v1::WorkerGenerateRequest> FakeWorker::requests() const {
  absl::MutexLock lock(&mu_);
  return requests_;
}

std::vector<std::chrono::system_clock::time_point> FakeWorker::deadlines() const {
  absl::MutexLock lock(&mu_);
  return deadlines_;
}

std::vector<uint32_t> FakeWorker::sent_tokens(int i) const {
  absl::MutexLock lock(&mu_);
  return i < static_cast<int>(sent_.size()) ? sent_[i] : std::vector<uint32_t>{};
}

std::vector<std::string> FakeWorker::aborted_ids() const {
  absl::MutexLock lock(&mu_);
  return aborted_;
}

}  // namespace pkv::router::testing
