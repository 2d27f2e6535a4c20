#include "tests/unit/router/fake_worker.h"

#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace pkv::router::testing {

class FakeWorker::Service final : public pkv::v1::Worker::Service {
 public:
  explicit Service(FakeWorker* owner) : owner_(owner) {}

  grpc::Status Generate(grpc::ServerContext* ctx, const pkv::v1::WorkerGenerateRequest* request,
                        grpc::ServerWriter<pkv::v1::WorkerGenerateResponse>* writer) override {
    return owner_->Generate(ctx, request, writer);
  }
  grpc::Status Abort(grpc::ServerContext*, const pkv::v1::AbortRequest* request,
                     pkv::v1::AbortResponse* response) override {
    absl::MutexLock lock(&owner_->mu_);
    owner_->aborted_.push_back(request->request_id());
    response->set_found(true);
    return grpc::Status::OK;
  }
  grpc::Status GetLoad(grpc::ServerContext*, const pkv::v1::GetLoadRequest*,
                       pkv::v1::Load* load) override {
    load->set_running(owner_->running_.load());
    load->set_worker_id(owner_->worker_id_);
    load->set_kv_pages_total(128);
    return grpc::Status::OK;
  }
  grpc::Status GetProgress(grpc::ServerContext*, const pkv::v1::GetProgressRequest* request,
                           pkv::v1::Progress* progress) override {
    owner_->progress_checks_.fetch_add(1);
    absl::MutexLock lock(&owner_->mu_);
    auto it = owner_->progress_.find(request->request_id());
    if (it != owner_->progress_.end()) {
      progress->set_found(true);
      progress->set_tokens_produced(it->second.tokens_produced);
      progress->set_finished(it->second.finished);
    }
    return grpc::Status::OK;
  }
  grpc::Status Drain(grpc::ServerContext*, const pkv::v1::DrainRequest*,
                     pkv::v1::DrainResponse*) override {
    return grpc::Status::OK;
  }
  grpc::Status GetModelInfo(grpc::ServerContext*, const pkv::v1::GetModelInfoRequest*,
                            pkv::v1::ModelInfo* info) override {
    info->set_model_name("fake");
    info->set_vocab_size(kFakeVocab);
    info->set_max_context(kFakeMaxContext);
    info->set_page_size(16);
    info->set_backend("cpu");
    info->set_kv_pages_total(128);
    return grpc::Status::OK;
  }

 private:
  FakeWorker* const owner_;
};

// grpc.health.v1 Check: the serving flag, or UNAVAILABLE while "down" after a crash (kFail).
class FakeWorker::Health final : public grpc::health::v1::Health::Service {
 public:
  explicit Health(FakeWorker* owner) : owner_(owner) {}
  grpc::Status Check(grpc::ServerContext*, const grpc::health::v1::HealthCheckRequest*,
                     grpc::health::v1::HealthCheckResponse* response) override {
    {
      absl::MutexLock lock(&owner_->mu_);
      if (absl::Now() < owner_->down_until_) {
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "fake worker is down");
      }
    }
    response->set_status(owner_->serving_.load()
                             ? grpc::health::v1::HealthCheckResponse::SERVING
                             : grpc::health::v1::HealthCheckResponse::NOT_SERVING);
    return grpc::Status::OK;
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
  // One completion queue and few pollers: fewer threads racing gRPC 1.51's synchronous-server
  // shutdown (see Stop).
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::NUM_CQS, 1);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 1);
  server_ = builder.BuildAndStart();
}

void FakeWorker::Stop() {
  if (server_ == nullptr) return;
  // A grace period rather than now(): gRPC 1.51's synchronous server could trip its own
  // completion-queue refcount assertion ("prior > 0") when forced to shut down while its polling
  // threads were mid-Next (seen about once in 20 runs). Calls still running after it are
  // cancelled (hanging scripts end on cancellation).
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  server_->Wait();
  server_.reset();
}

void FakeWorker::SetServing(bool serving) { serving_.store(serving); }

void FakeWorker::SetScript(std::function<FakeScript(int)> script) {
  absl::MutexLock lock(&mu_);
  script_ = std::move(script);
}

grpc::Status FakeWorker::Generate(grpc::ServerContext* ctx,
                                  const pkv::v1::WorkerGenerateRequest* request,
                                  grpc::ServerWriter<pkv::v1::WorkerGenerateResponse>* writer) {
  FakeScript script;
  int index = 0;
  {
    absl::MutexLock lock(&mu_);
    index = calls_.fetch_add(1);
    script = script_(index);
    requests_.push_back(*request);
    deadlines_.push_back(ctx->deadline());
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
  if (!writer->Write(response)) {
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
    if (!writer->Write(response)) {
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
      while (!ctx->IsCancelled()) absl::SleepFor(absl::Milliseconds(2));
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
  writer->Write(response);
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
