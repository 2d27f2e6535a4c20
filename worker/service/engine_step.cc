// The engine's scheduler-thread work: inbox processing, one step (schedule -> run -> postprocess),
// and the terminal paths of a request.
#include <algorithm>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "worker/service/engine.h"
#include "worker/service/engine_internal.h"

namespace pkv {
namespace {

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

}  // namespace

void Engine::ProcessInbox(std::vector<InboxItem>* items) {
  for (size_t i = 0; i < items->size(); ++i) {
    InboxItem& item = (*items)[i];
    switch (item.kind) {
      case InboxItem::Kind::kAdd: {
        std::vector<int32_t> prompt(item.seq->tokens.begin(),
                                    item.seq->tokens.begin() + item.seq->num_prompt_tokens);
        ActiveRequest* active = item.active.get();
        active_[item.id] = std::move(item.active);
        const int64_t fail_after = options_.faults.fail_kv_alloc_after;
        if (fail_after >= 0 && admitted_ >= fail_after) {
          // Test fault: the KV allocator fails like a device out of memory (a fatal backend
          // error). Requests later in this batch of the inbox fail with the running ones.
          for (size_t j = i + 1; j < items->size(); ++j) {
            InboxItem& later = (*items)[j];
            if (later.kind == InboxItem::Kind::kAdd) active_[later.id] = std::move(later.active);
          }
          Fatal(absl::ResourceExhaustedError("test fault: KV page allocation failed"));
          return;
        }
        absl::Status st = scheduler_.Add(std::move(item.seq));
        if (!st.ok()) {
          RejectRequest(item.id, st);  // refused at the door: not an abort of a sequence
          break;
        }
        ++admitted_;
        if (metrics_ != nullptr) metrics_->RecordPromptTokens(static_cast<int>(prompt.size()));
        active->sink->OnAccepted(prompt);
        break;
      }
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

void Engine::RunStep() {
  const absl::Time now = absl::Now();
  std::vector<DroppedSequence> expired;
  ScheduledBatch batch = scheduler_.Schedule(now, &expired);
  for (DroppedSequence& d : expired) {
    FailRequest(d.seq->id, absl::DeadlineExceededError("deadline expired in the worker"),
                AbortReason::kDeadline);
  }
  if (batch.empty()) return;

  const TestFaults& faults = options_.faults;
  if (faults.slow_step_ms > 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(faults.slow_step_ms));
  if (faults.hang_step_after >= 0 && static_cast<int64_t>(steps_) >= faults.hang_step_after) {
    PKV_LOG(WARNING) << "test fault: hanging the scheduler thread";
    while (true) std::this_thread::sleep_for(std::chrono::hours(1));
  }

  std::vector<BatchRow> rows;
  rows.reserve(batch.items.size());
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
    rows.push_back(row);
  }

  std::vector<SampleResult> samples;
  StepStats stats;
  absl::Status st = backend_->Step(rows, &samples, &stats);
  if (st.ok() && faults.fail_forward_after >= 0 &&
      static_cast<int64_t>(steps_) >= faults.fail_forward_after) {
    st = absl::InternalError("test fault: forward pass failed");
  }
  ++steps_;
  if (!st.ok()) {
    Fatal(st);
    return;
  }
  const double step_seconds = Seconds(absl::Now() - now);
  if (metrics_ != nullptr) {
    if (batch.num_decode > 0) {
      metrics_->RecordDecodeStep(stats.decode_route, step_seconds, stats.decode_launches,
                                 stats.decode_split_occupancy);
    }
    if (batch.num_prefill_tokens > 0) metrics_->RecordPrefillTokens(batch.num_prefill_tokens);
  }

  std::vector<int32_t> sampled;
  sampled.reserve(samples.size());
  for (const SampleResult& s : samples) sampled.push_back(s.token_id);
  scheduler_.CommitStep(batch, sampled);

  const absl::Time done = absl::Now();
  size_t k = 0;
  for (const ScheduledItem& item : batch.items) {
    if (!item.sample) continue;
    HandleSample(item.seq, samples[k++], done);  // may finish (and free) item.seq
  }
  // A consumer that stopped reading is cut loose here, within one step (RELIABILITY S3).
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

void Engine::HandleSample(Sequence* seq, const SampleResult& sample, absl::Time now) {
  ActiveRequest& a = *active_[seq->id];
  const SamplingParams& p = seq->params;
  const int32_t token = sample.token_id;
  const std::vector<int32_t>& eos = backend_->config().eos_token_ids;
  if (!p.ignore_eos && std::find(eos.begin(), eos.end(), token) != eos.end()) {
    FinishRequest(seq, pkv::v1::FINISH_REASON_EOS, "", /*last_token_withheld=*/true);
    return;
  }
  if (std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), token) !=
      p.stop_token_ids.end()) {
    FinishRequest(seq, pkv::v1::FINISH_REASON_STOP, absl::StrCat(token),
                  /*last_token_withheld=*/true);
    return;
  }
  // The transport saw a cancel this step has not processed yet: the token is computed in vain
  // (pkv_tokens_after_cancel_total; at most one step's worth per request, RELIABILITY C1).
  if (metrics_ != nullptr && !a.sink->Healthy()) metrics_->RecordTokensAfterCancel(1);
  TextStream::Delta delta = a.text->Push(token);
  pkv::v1::Chunk chunk;
  chunk.add_token_ids(static_cast<uint32_t>(token));
  chunk.set_text(std::move(delta.text));
  if (p.logprobs) {
    pkv::v1::TokenLogprob* lp = chunk.add_logprobs();
    lp->set_token_id(static_cast<uint32_t>(token));
    lp->set_logprob(sample.logprob);
    lp->set_token_bytes(std::string(tokenizer_->TokenBytes(token)));
    for (const TopLogprobEntry& e : sample.top) {
      pkv::v1::TopLogprob* t = lp->add_top();
      t->set_token_id(static_cast<uint32_t>(e.token_id));
      t->set_logprob(e.logprob);
      t->set_token_bytes(std::string(tokenizer_->TokenBytes(e.token_id)));
    }
  }
  a.sink->OnChunk(std::move(chunk));
  ++a.emitted;
  if (metrics_ != nullptr) {
    metrics_->RecordGeneratedTokens(1);
    if (a.first_token == absl::InfinitePast()) {
      metrics_->RecordTimeToFirstToken(Seconds(now - a.arrival));
    } else {
      metrics_->RecordInterTokenLatency(Seconds(now - a.last_token));
    }
  }
  if (a.first_token == absl::InfinitePast()) a.first_token = now;
  a.last_token = now;

  if (delta.stopped) {
    FinishRequest(seq, pkv::v1::FINISH_REASON_STOP, std::string(a.text->stop_string()), false);
  } else if (seq->num_generated() >= p.max_tokens || seq->num_tokens() >= options_.max_context) {
    FinishRequest(seq, pkv::v1::FINISH_REASON_LENGTH, "", false);
  }
}

void Engine::FinishRequest(Sequence* seq, pkv::v1::FinishReason reason, std::string matched_stop,
                           bool last_token_withheld) {
  const uint64_t id = seq->id;
  auto it = active_.find(id);
  std::unique_ptr<ActiveRequest> a = std::move(it->second);
  active_.erase(it);
  // After a stop-string match the text past the match is dropped; otherwise flush what the
  // detokenizer held back (a partial UTF-8 character or a possible stop-string prefix).
  if (!a->text->stopped()) {
    std::string tail = a->text->Flush();
    if (!tail.empty()) {
      pkv::v1::Chunk chunk;
      chunk.set_text(std::move(tail));
      a->sink->OnChunk(std::move(chunk));
    }
  }
  const absl::Time now = absl::Now();
  pkv::v1::Complete c;
  c.set_finish_reason(reason);
  c.set_prompt_tokens(static_cast<uint32_t>(seq->num_prompt_tokens));
  // Emitted tokens (resumed ones included); an EOS or stop token id is neither emitted nor counted.
  c.set_completion_tokens(
      static_cast<uint32_t>(seq->num_generated() - (last_token_withheld ? 1 : 0)));
  c.mutable_timings()->set_queue_seconds(
      a->first_scheduled == absl::InfinitePast() ? 0 : Seconds(a->first_scheduled - a->arrival));
  c.mutable_timings()->set_time_to_first_token_seconds(
      a->first_token == absl::InfinitePast() ? 0 : Seconds(a->first_token - a->arrival));
  c.mutable_timings()->set_total_seconds(Seconds(now - a->arrival));
  c.set_worker_id(options_.worker_id);
  c.set_migrations(a->migrations);
  c.set_request_id(a->request_id);
  c.set_matched_stop(std::move(matched_stop));
  c.set_cached_tokens(static_cast<uint32_t>(seq->num_cached_tokens));
  if (metrics_ != nullptr) metrics_->RecordRequestDuration(Seconds(now - a->arrival));
  std::unique_ptr<Sequence> done = scheduler_.Finish(id);
  a->sink->OnComplete(std::move(c));
  MarkTerminal(a->request_id, id);
}

void Engine::FailRequest(uint64_t id, const absl::Status& status, AbortReason reason) {
  auto it = active_.find(id);
  if (it == active_.end()) return;
  std::unique_ptr<ActiveRequest> a = std::move(it->second);
  active_.erase(it);
  if (metrics_ != nullptr) {
    metrics_->RecordAbort(reason);
    metrics_->RecordRequestError(StatusCodeName(status.code()));
  }
  a->sink->OnError(status);
  MarkTerminal(a->request_id, id);
}

void Engine::RejectRequest(uint64_t id, const absl::Status& status) {
  auto it = active_.find(id);
  if (it == active_.end()) return;
  std::unique_ptr<ActiveRequest> a = std::move(it->second);
  active_.erase(it);
  if (metrics_ != nullptr) metrics_->RecordRequestError(StatusCodeName(status.code()));
  a->sink->OnError(status);
  MarkTerminal(a->request_id, id);
}

void Engine::Fatal(const absl::Status& cause) {
  const absl::Status fatal =
      absl::InternalError(absl::StrCat("backend failure: ", cause.message()));
  PKV_LOG(ERROR) << fatal;
  {
    absl::MutexLock lock(&mu_);
    failed_ = true;
  }
  // Requests still in the inbox were accepted by Submit(); they fail like the running batch.
  std::vector<InboxItem> pending;
  {
    absl::MutexLock lock(&mu_);
    pending.swap(inbox_);
  }
  for (InboxItem& item : pending) {
    if (item.kind != InboxItem::Kind::kAdd) continue;
    active_[item.id] = std::move(item.active);
  }
  FailEverything(fatal, AbortReason::kError);
  if (options_.on_fatal) options_.on_fatal(fatal);
}

void Engine::FailEverything(const absl::Status& status, AbortReason reason) {
  std::vector<uint64_t> ids;
  ids.reserve(active_.size());
  for (const auto& [id, a] : active_) ids.push_back(id);
  for (uint64_t id : ids) {
    scheduler_.Abort(id);
    FailRequest(id, status, reason);
  }
}

}  // namespace pkv
