// The engine's scheduler-thread loop body: the inbox, then one step read as
//   Schedule (the scheduler's batch) -> Prepare (the backend's rows) -> Run (forward + sample) ->
//   Postprocess (metrics, commit, tokens to their requests, broken streams cut loose).
// A request's output and terminal paths are in engine_output.cc.
#include <utility>

#include "worker/engine/engine.h"
#include "worker/engine/engine_internal.h"

namespace pkv {

void Engine::ProcessInbox(std::vector<InboxItem>* items) {
  for (InboxItem& item : *items) {
    switch (item.kind) {
      case InboxItem::Kind::kAdd:
        Admit(item);
        break;
      case InboxItem::Kind::kCancel:
        if (scheduler_.Abort(item.id) != nullptr) {
          FailRequest(item.id, absl::CancelledError("request cancelled"), item.reason);
        }
        break;
      case InboxItem::Kind::kCancelAll:
        FailEverything(absl::UnavailableError("worker shutting down; request aborted"),
                       item.reason);
        break;
    }
  }
}

void Engine::Admit(InboxItem& item) {
  const Sequence& seq = *item.seq;
  std::vector<int32_t> prompt(seq.tokens.begin(), seq.tokens.begin() + seq.num_prompt_tokens);
  RequestSink* sink = item.active->sink.get();
  active_[item.id] = std::move(item.active);
  if (absl::Status st = scheduler_.Add(std::move(item.seq)); !st.ok()) {
    RejectRequest(item.id, st);  // refused at the door: not an abort of a sequence
    return;
  }
  if (metrics_ != nullptr) metrics_->RecordPromptTokens(static_cast<int>(prompt.size()));
  sink->OnAccepted(prompt);
}

void Engine::RunStep() {
  const absl::Time start = absl::Now();
  const ScheduledBatch batch = Schedule(start);
  if (batch.empty()) return;
  Prepare(batch, start);
  StepStats stats;
  if (absl::Status st = Run(&stats); !st.ok()) {
    Fatal(st);
    return;
  }
  Postprocess(batch, stats, start);
}

ScheduledBatch Engine::Schedule(absl::Time now) {
  std::vector<DroppedSequence> expired;
  ScheduledBatch batch = scheduler_.Schedule(now, &expired);
  for (DroppedSequence& d : expired) {
    FailRequest(d.seq->id, absl::DeadlineExceededError("deadline expired in the worker"),
                AbortReason::kDeadline);
  }
  return batch;
}

void Engine::Prepare(const ScheduledBatch& batch, absl::Time now) {
  step_.rows.clear();
  for (const ScheduledItem& item : batch.items) {
    Sequence* seq = item.seq;
    ActiveRequest& a = *active_[seq->id];
    if (a.first_scheduled == absl::InfinitePast()) a.first_scheduled = now;
    BatchRow row;
    row.tokens = seq->tokens.data() + item.start_pos;
    row.num_tokens = item.num_new_tokens;
    row.start_pos = item.start_pos;
    row.pages = seq->blocks.pages().data();
    row.num_pages = seq->blocks.num_pages();
    row.sample = item.sample;
    row.params = &seq->params;
    row.sample_index = seq->num_generated();
    row.sequence_id = seq->id;
    step_.rows.push_back(row);
  }
}

absl::Status Engine::Run(StepStats* stats) {
  step_.samples.clear();
  return backend_->Step(step_.rows, &step_.samples, stats);
}

void Engine::Postprocess(const ScheduledBatch& batch, const StepStats& stats, absl::Time start) {
  RecordStepMetrics(batch, stats, absl::ToDoubleSeconds(absl::Now() - start));
  step_.sampled.clear();
  for (const SampleResult& s : step_.samples) step_.sampled.push_back(s.token_id);
  scheduler_.CommitStep(batch, step_.sampled);

  const absl::Time done = absl::Now();
  size_t k = 0;
  for (const ScheduledItem& item : batch.items) {
    if (!item.sample) continue;
    HandleSample(item.seq, step_.samples[k++], done);  // may finish (and free) item.seq
  }
  AbortBrokenStreams();
}

void Engine::RecordStepMetrics(const ScheduledBatch& batch, const StepStats& stats,
                               double seconds) {
  if (metrics_ == nullptr) return;
  if (batch.num_decode > 0) {
    metrics_->RecordDecodeStep(stats.decode_route, seconds, stats.decode_launches,
                               stats.decode_split_occupancy);
  }
  if (batch.num_prefill_tokens > 0) metrics_->RecordPrefillTokens(batch.num_prefill_tokens);
}

// A consumer that stopped reading is cut loose here, within one step (RELIABILITY S3).
void Engine::AbortBrokenStreams() {
  std::vector<std::pair<uint64_t, AbortReason>> broken;
  for (const auto& [id, a] : active_) {
    if (!a->sink->Healthy()) broken.emplace_back(id, a->sink->BrokenReason());
  }
  for (const auto& [id, reason] : broken) {
    if (scheduler_.Abort(id) != nullptr) {
      FailRequest(id, absl::CancelledError("stream closed by the client"), reason);
    }
  }
}

}  // namespace pkv
