// The worker's engine: one scheduler thread that owns the scheduler, the page pool, the model
// backend and every in-flight request, and runs the step loop
//   inbox -> schedule -> prepare (the backend's rows) -> launch (backend forward + sample) ->
//   commit -> finish (stop checks, detokenize, stream, sweep broken streams, metrics) -> publish
//   load; with overlap_steps the step launched is finished in the next iteration, after the next
//   one is launched (engine_step.cc).
// It knows nothing of gRPC: the worker's service (worker/service) submits requests and receives
// their output through RequestSink. Test faults are not its business either: they live in a
// wrapper around the backend (fault_injecting_backend.h).
// Other threads (gRPC reactors, the drain/shutdown path) talk to it only through the guarded inbox
// and read the published load snapshot; nothing else is shared.
//
// Request lifecycle: Submit() tokenizes and validates on the caller's thread, then queues an Add.
// The sink receives OnAccepted, then OnChunk per generated token, then exactly one terminal
// OnComplete or OnError. Cancel() removes the request within one step and frees its pages.
// A backend failure (a failed forward step, or a KV allocator failure) fails every request in the
// engine with INTERNAL and calls on_fatal (the worker then reports NOT_SERVING and exits non-zero
// for its supervisor to restart it); from that moment Submit() answers UNAVAILABLE, so a router
// places new work elsewhere instead of feeding a broken backend (README "Reliability", F3).
//
// Bounded admission: Submit() refuses with RESOURCE_EXHAUSTED once max_running + max_waiting
// requests are in flight (the scheduler's own bounds, checked synchronously so nothing queues in
// the inbox beyond them); the scheduler then bounds queued tokens. Deadlines: a request whose
// deadline already passed is refused with DEADLINE_EXCEEDED before it is queued, and a queued or
// running one is dropped by the scheduler at the first step after its deadline (0 KV pages for one
// that never started).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "pkv/v1/worker.pb.h"
#include "worker/engine/chat_prompt.h"
#include "worker/engine/request_sink.h"
#include "worker/engine/sink_relay.h"
#include "worker/engine/worker_metrics.h"
#include "worker/model/model_backend.h"
#include "worker/scheduler/scheduler.h"
#include "worker/tokenizer/tokenizer.h"

namespace pkv {

struct EngineOptions {
  std::string worker_id = "worker";
  std::string model_name = "model";
  int32_t max_context = 0;  // prompt + generated tokens per request
  SchedulerConfig scheduler;
  // The model's chat template for ChatPrompt requests; null: chat is refused.
  std::shared_ptr<const ChatPromptRenderer> chat;
  std::function<void(absl::Status)> on_fatal;  // called once from the scheduler thread
  // Step pipelining: schedule and launch step N+1 before finishing step N, so the host's work
  // between steps (postprocess, schedule, the backend's staging and launch) runs while the device
  // computes (model_backend.h). Outputs equal the unpipelined engine's for batch-invariant
  // backends; a sequence that stops at step N has computed one more token in vain at N+1.
  bool overlap_steps = false;
};

// What GetLoad reports (published after every step).
struct EngineLoad {
  int32_t running = 0;
  int32_t waiting = 0;
  int64_t queued_tokens = 0;
  int64_t pages_used = 0;
  int64_t pages_free = 0;
  int64_t pages_total = 0;
  // Prefix cache: pages registered (held or evictable; evictable ones also count in pages_free)
  // and the token totals of lookups and hits since start.
  int64_t pages_cached = 0;
  int64_t pages_evictable = 0;
  uint64_t prefix_cache_queries = 0;
  uint64_t prefix_cache_hits = 0;
  bool draining = false;
  int64_t in_flight = 0;  // submitted and not yet terminal (running + waiting + inbox)
  // When the scheduler thread last finished a loop iteration; with work in flight and this far in
  // the past, the engine is wedged (a hung backend step): see StalledFor().
  absl::Time last_progress = absl::InfinitePast();
};

class Engine {
 public:
  // The backend and tokenizer must describe the same model; metrics may be null (tests).
  Engine(EngineOptions options, std::unique_ptr<ModelBackend> backend,
         std::unique_ptr<Tokenizer> tokenizer, WorkerMetrics* metrics);
  ~Engine();  // stops the scheduler thread; in-flight requests get UNAVAILABLE

  void Start();
  // Fails every request still in the engine with `status` and stops the thread. Idempotent.
  void Stop(const absl::Status& status);

  // Validates and queues a request. Returns the engine's id for Cancel(). Errors (bad input,
  // draining, stopped) are returned here and nothing is queued; the sink is not called.
  absl::StatusOr<uint64_t> Submit(const pkv::v1::WorkerGenerateRequest& request,
                                  absl::Time deadline, std::shared_ptr<RequestSink> sink);
  // Removes a request within one step (no-op when unknown or finished).
  void Cancel(uint64_t id, AbortReason reason);
  // Abort RPC: cancels by the client's request id. False when not found.
  bool CancelByRequestId(const std::string& request_id);

  // Stop admitting (Submit -> UNAVAILABLE); in-flight work continues.
  void BeginDrain();
  // Blocks until no request is in flight or `deadline` passes; true when idle.
  bool WaitIdle(absl::Time deadline);
  // Cancels everything in flight with `reason`/UNAVAILABLE (end of a drain).
  void CancelAll(AbortReason reason);
  // How long requests have been in flight without the scheduler thread finishing a step; zero
  // when idle. The worker turns readiness NOT_SERVING past a threshold (a wedged GPU).
  absl::Duration StalledFor(absl::Time now) const;
  // True after a fatal backend error.
  bool failed() const;

  EngineLoad GetLoad() const;
  pkv::v1::ModelInfo GetModelInfo() const;
  const ModelBackend& backend() const { return *backend_; }

 private:
  struct InboxItem;
  struct ActiveRequest;

  void Loop();
  // The inbox: adds, cancels, cancel-all (engine_step.cc).
  void ProcessInbox(std::vector<InboxItem>* items);
  void Admit(InboxItem& item);
  // A step handed to the backend and not finished yet.
  struct LaunchedStep {
    ScheduledBatch batch;        // Commit nulls the item of a sequence gone since the launch
    std::vector<uint64_t> ids;   // [items] each item's sequence id
    std::vector<int32_t> slots;  // [items] where a sample item's token goes in seq->tokens, or -1
    StepStats stats;
    absl::Time launched;
    bool committed = false;
  };
  // One step, schedule -> prepare -> launch -> commit, finishing launched steps (engine_step.cc):
  // the one just launched too, unless overlap_steps keeps it running into the next call.
  void RunStep();
  // The scheduler's batch for this step; requests past their deadline fail here.
  ScheduledBatch Schedule(absl::Time now);
  // The batch as the backend's rows (into step_.rows), feeding a token still pending as feedback
  // from the launched step that samples it; notes each request's first scheduling.
  void Prepare(const ScheduledBatch& batch, absl::Time now);
  // Launches step_.rows as `batch` (appended to launched_); false after a fatal backend error.
  bool Launch(ScheduledBatch batch, absl::Time start);
  // The scheduler's commit of a launched step, its sampled tokens pending.
  void Commit(LaunchedStep* step);
  // Waits for the oldest launched step, then: metrics, each sampled token written over its
  // pending place and handed to its request (stop checks, detokenize, stream), the sweep of
  // broken streams. False after a fatal backend error.
  bool FinishOldest();
  void RecordStepMetrics(const ScheduledBatch& batch, const StepStats& stats, double seconds);
  void AbortBrokenStreams();
  // A request's output and its terminal paths (engine_output.cc).
  void HandleSample(Sequence* seq, const SampleResult& sample, absl::Time now);
  void RecordEmittedToken(ActiveRequest* a, absl::Time now);
  // `last_token_withheld`: the sampled token ended the request (EOS / stop id) and was not emitted.
  void FinishRequest(Sequence* seq, pkv::v1::FinishReason reason, std::string matched_stop,
                     bool last_token_withheld);
  pkv::v1::Complete CompleteMessage(const Sequence& seq, const ActiveRequest& a,
                                    pkv::v1::FinishReason reason, std::string matched_stop,
                                    bool last_token_withheld, absl::Time now) const;
  void FailRequest(uint64_t id, const absl::Status& status, AbortReason reason);
  // Like FailRequest for a request the scheduler refused (queue bounds): counted as an error,
  // not as an abort (it never became a running or waiting sequence).
  void RejectRequest(uint64_t id, const absl::Status& status);
  void FailEverything(const absl::Status& status, AbortReason reason);
  // A backend failure: every request fails with INTERNAL, Submit refuses from now on, on_fatal.
  void Fatal(const absl::Status& cause);
  void PublishLoad();
  // Bookkeeping once a request's sink got its terminal call (any thread holding no lock).
  void MarkTerminal(const std::string& request_id, uint64_t id);
  // MarkTerminal on the relay thread, after the terminal call posted before it: WaitIdle (the
  // drain) then returns only once every terminal message is with the transport.
  void MarkTerminalAfterDelivery(const std::string& request_id, uint64_t id);
  absl::StatusOr<std::vector<int32_t>> ResolvePrompt(const pkv::v1::GenerateRequest& request) const;

  const EngineOptions options_;
  std::unique_ptr<ModelBackend> backend_;
  std::unique_ptr<Tokenizer> tokenizer_;
  WorkerMetrics* metrics_;
  PagePool pool_;
  Scheduler scheduler_;

  // Owned by the scheduler thread.
  absl::flat_hash_map<uint64_t, std::unique_ptr<ActiveRequest>> active_;
  // One step's buffers, kept across steps so that a step stops allocating once they have grown
  // to the largest batch.
  struct StepBuffers {
    std::vector<BatchRow> rows;         // [batch items]
    std::vector<SampleResult> samples;  // [items with sample set], in item order
    std::vector<int32_t> sampled;       // [items with sample set] kPendingToken each (Commit)
    // Sequence id -> its sample number in the running step (Prepare's feedback rows).
    absl::flat_hash_map<uint64_t, int32_t> feedback;
  };
  StepBuffers step_;
  // Steps launched and not finished, oldest first (at most ModelBackend::kMaxLaunched).
  std::deque<LaunchedStep> launched_;
  absl::Time last_finish_ = absl::InfinitePast();  // when the latest finished step's wait ended

  mutable absl::Mutex mu_;
  absl::CondVar wake_;
  std::vector<InboxItem> inbox_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, uint64_t> ids_by_request_ ABSL_GUARDED_BY(mu_);
  int64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;  // submitted and not yet terminal
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool failed_ ABSL_GUARDED_BY(mu_) = false;  // a fatal backend error happened
  absl::Status stop_status_ ABSL_GUARDED_BY(mu_);
  EngineLoad load_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;

  std::thread thread_;
  // Runs the sinks' output calls off the scheduler thread (sink_relay.h); Submit wraps every
  // sink in a RelayedSink. Stop drains it after the scheduler thread ends.
  SinkRelay relay_;
};

}  // namespace pkv
