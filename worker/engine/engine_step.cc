// The engine's scheduler-thread loop body: the inbox, then one step read as
//   Schedule (the scheduler's batch) -> Prepare (the backend's rows) -> Launch (forward + sample
//   started) -> Commit (the scheduler's, tokens pending) -> FinishOldest (wait; metrics, tokens
//   to their requests, broken streams cut loose).
// Without overlap_steps a step is finished in the call that launched it; with it, step N+1 is
// scheduled and launched before step N is finished, so N+1's rows may feed N's samples on the
// device (BatchRow::feedback) while the host postprocesses N.
// A request's output and terminal paths are in engine_output.cc.
#include <algorithm>
#include <utility>

#include "common/status_macros.h"
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
  ScheduledBatch batch = Schedule(start);
  const bool launching = !batch.empty();
  if (launching) {
    Prepare(batch, start);
    if (!Launch(std::move(batch), start)) return;
  }
  // With overlap_steps the step just launched keeps running into the next call; every other
  // launched step is finished now. A step is committed once every step launched before it has
  // finished (so a sequence has at most one pending token) and before it finishes itself.
  const size_t keep = options_.overlap_steps && launching ? 1 : 0;
  while (launched_.size() > keep) {
    if (!launched_.front().committed) Commit(&launched_.front());
    if (!FinishOldest()) return;
  }
  for (LaunchedStep& step : launched_) {
    if (!step.committed) Commit(&step);
  }
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
  // The samples of the step still running (overlap_steps), by sequence: a row feeding a pending
  // token feeds that sample.
  step_.feedback.clear();
  if (!launched_.empty()) {
    const LaunchedStep& running = launched_.back();
    int32_t k = 0;
    for (size_t i = 0; i < running.batch.items.size(); ++i) {
      if (running.batch.items[i].sample) step_.feedback[running.ids[i]] = k++;
    }
  }
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
    if (seq->tokens[item.start_pos + item.num_new_tokens - 1] == kPendingToken) {
      // Only a sequence's last token is ever pending, and it is fed alone (scheduler.h).
      auto it = step_.feedback.find(seq->id);
      PKV_CHECK_MSG(it != step_.feedback.end() && item.num_new_tokens == 1,
                    "a pending token outside the running step's samples");
      row.feedback = it->second;
    }
    step_.rows.push_back(row);
  }
}

bool Engine::Launch(ScheduledBatch batch, absl::Time start) {
  LaunchedStep step;
  if (absl::Status st = backend_->Launch(step_.rows, &step.stats); !st.ok()) {
    Fatal(st);
    return false;
  }
  step.launched = start;
  step.ids.reserve(batch.items.size());
  for (const ScheduledItem& item : batch.items) step.ids.push_back(item.seq->id);
  step.slots.assign(batch.items.size(), -1);
  step.batch = std::move(batch);
  launched_.push_back(std::move(step));
  return true;
}

void Engine::Commit(LaunchedStep* step) {
  step_.sampled.clear();
  for (size_t i = 0; i < step->batch.items.size(); ++i) {
    ScheduledItem& item = step->batch.items[i];
    // A sequence that left the engine since the launch (finished, aborted) is gone.
    if (!active_.contains(step->ids[i])) item.seq = nullptr;
    if (!item.sample) continue;
    step_.sampled.push_back(kPendingToken);
    if (item.seq != nullptr) step->slots[i] = item.seq->num_tokens();
  }
  scheduler_.CommitStep(step->batch, step_.sampled);
  step->committed = true;
}

bool Engine::FinishOldest() {
  LaunchedStep step = std::move(launched_.front());
  launched_.pop_front();
  step_.samples.clear();
  if (absl::Status st = backend_->Finish(&step_.samples); !st.ok()) {
    Fatal(st);
    return false;
  }
  const absl::Time done = absl::Now();
  // The step's own time: from its launch, or from the previous step's end when it was queued
  // behind that one (overlap_steps).
  const absl::Time began = std::max(step.launched, last_finish_);
  last_finish_ = done;
  RecordStepMetrics(step.batch, step.stats, absl::ToDoubleSeconds(done - began));
  size_t k = 0;
  int discarded = 0;
  for (size_t i = 0; i < step.batch.items.size(); ++i) {
    const ScheduledItem& item = step.batch.items[i];
    if (!item.sample) continue;
    PKV_CHECK_MSG(k < step_.samples.size(), "the backend returned fewer samples than rows");
    const SampleResult& sample = step_.samples[k++];
    if (!active_.contains(step.ids[i])) {  // left the engine since the launch
      ++discarded;
      continue;
    }
    Sequence* seq = item.seq;
    seq->tokens[step.slots[i]] = sample.token_id;
    HandleSample(seq, sample, done);  // may finish (and free) seq
  }
  if (metrics_ != nullptr && discarded > 0) metrics_->RecordTokensDiscarded(discarded);
  AbortBrokenStreams();
  return true;
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
