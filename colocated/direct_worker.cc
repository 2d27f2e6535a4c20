#include "colocated/direct_worker.h"

#include <atomic>
#include <utility>
#include <vector>

#include "worker/engine/request_sink.h"
#include "worker/service/generate_stream.h"
#include "worker/service/stream_progress.h"

namespace pkv::colocated {
namespace {

// The engine's sink for one direct stream: messages as Worker.Generate would send them, straight
// to the router's sink, and the progress GetProgress reports.
class DirectRequestSink final : public RequestSink {
 public:
  DirectRequestSink(std::shared_ptr<router::DirectStreamSink> router, std::string worker_id,
                    absl::Time deadline, std::shared_ptr<StreamProgress> progress)
      : router_(std::move(router)),
        worker_id_(std::move(worker_id)),
        deadline_(deadline),
        progress_(std::move(progress)) {}

  void OnAccepted(const std::vector<int32_t>& prompt_token_ids) override {
    router_->OnMessage(AcceptedResponse(prompt_token_ids, worker_id_));
  }
  void OnChunk(pkv::v1::Chunk chunk) override {
    progress_->tokens_produced.fetch_add(chunk.token_ids_size());
    router_->OnMessage(ChunkResponse(std::move(chunk)));
  }
  void OnComplete(pkv::v1::Complete complete) override {
    progress_->MarkFinished();
    router_->OnMessage(CompleteResponse(std::move(complete)));
    router_->OnEnd(absl::OkStatus());
  }
  void OnError(const absl::Status& status) override {
    progress_->MarkFinished();
    router_->OnEnd(status);
  }
  bool Healthy() const override { return !broken_.load(); }
  AbortReason BrokenReason() const override { return reason_.load(); }

  // The router cancelled: the reason the abort is counted under (as StreamOutbox decides it).
  AbortReason Break() {
    const AbortReason reason = StreamOutbox::CountedReason(AbortReason::kClientCancel, deadline_);
    reason_.store(reason);
    broken_.store(true);
    return reason;
  }

 private:
  const std::shared_ptr<router::DirectStreamSink> router_;
  const std::string worker_id_;
  const absl::Time deadline_;
  const std::shared_ptr<StreamProgress> progress_;
  std::atomic<bool> broken_{false};
  std::atomic<AbortReason> reason_{AbortReason::kClientCancel};
};

class ServiceGeneration final : public router::DirectGeneration {
 public:
  ServiceGeneration(WorkerService* service, uint64_t id, std::shared_ptr<DirectRequestSink> sink)
      : service_(service), id_(id), sink_(std::move(sink)) {}

  void Cancel() override {
    if (cancelled_.exchange(true)) return;
    service_->CancelInProcess(id_, sink_->Break());
  }

 private:
  WorkerService* const service_;
  const uint64_t id_;
  const std::shared_ptr<DirectRequestSink> sink_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace

absl::StatusOr<std::unique_ptr<router::DirectGeneration>> ServiceDirectWorker::Generate(
    const pkv::v1::WorkerGenerateRequest& request, absl::Time deadline,
    std::shared_ptr<router::DirectStreamSink> sink) {
  auto progress = std::make_shared<StreamProgress>();
  auto engine_sink = std::make_shared<DirectRequestSink>(std::move(sink), service_->worker_id(),
                                                         deadline, progress);
  absl::StatusOr<uint64_t> id =
      service_->SubmitInProcess(request, deadline, engine_sink, std::move(progress));
  if (!id.ok()) return id.status();
  return std::make_unique<ServiceGeneration>(service_, *id, std::move(engine_sink));
}

}  // namespace pkv::colocated
