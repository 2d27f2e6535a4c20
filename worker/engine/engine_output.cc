// A request's output on the scheduler thread: each sampled token checked for a stop, detokenized
// and streamed to the request's sink; then exactly one terminal call (complete, failed, rejected).
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "worker/engine/engine.h"
#include "worker/engine/engine_internal.h"

namespace pkv {
namespace {

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

// EOS (unless ignore_eos) or one of the request's stop ids ends the request, and the token is
// withheld from the output; FINISH_REASON_UNSPECIFIED for any other token.
pkv::v1::FinishReason StopTokenReason(const SamplingParams& p, const std::vector<int32_t>& eos,
                                      int32_t token) {
  if (!p.ignore_eos && std::find(eos.begin(), eos.end(), token) != eos.end()) {
    return pkv::v1::FINISH_REASON_EOS;
  }
  if (std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), token) !=
      p.stop_token_ids.end()) {
    return pkv::v1::FINISH_REASON_STOP;
  }
  return pkv::v1::FINISH_REASON_UNSPECIFIED;
}

// One streamed token: its id, its detokenized text and, when asked for, its logprobs.
pkv::v1::Chunk TokenChunk(const SampleResult& sample, const SamplingParams& p, std::string text,
                          const Tokenizer& tokenizer) {
  const int32_t token = sample.token_id;
  pkv::v1::Chunk chunk;
  chunk.add_token_ids(static_cast<uint32_t>(token));
  chunk.set_text(std::move(text));
  if (!p.logprobs) return chunk;
  pkv::v1::TokenLogprob* lp = chunk.add_logprobs();
  lp->set_token_id(static_cast<uint32_t>(token));
  lp->set_logprob(sample.logprob);
  lp->set_token_bytes(std::string(tokenizer.TokenBytes(token)));
  for (const TopLogprobEntry& e : sample.top) {
    pkv::v1::TopLogprob* t = lp->add_top();
    t->set_token_id(static_cast<uint32_t>(e.token_id));
    t->set_logprob(e.logprob);
    t->set_token_bytes(std::string(tokenizer.TokenBytes(e.token_id)));
  }
  return chunk;
}

}  // namespace

void Engine::HandleSample(Sequence* seq, const SampleResult& sample, absl::Time now) {
  const SamplingParams& p = seq->params;
  const int32_t token = sample.token_id;
  const pkv::v1::FinishReason stop = StopTokenReason(p, backend_->config().eos_token_ids, token);
  if (stop != pkv::v1::FINISH_REASON_UNSPECIFIED) {
    FinishRequest(seq, stop, stop == pkv::v1::FINISH_REASON_STOP ? absl::StrCat(token) : "",
                  /*last_token_withheld=*/true);
    return;
  }
  ActiveRequest& a = *active_[seq->id];
  // The transport saw a cancel this step has not processed yet: the token is computed in vain
  // (pkv_tokens_after_cancel_total; at most one step's worth per request, RELIABILITY C1).
  if (metrics_ != nullptr && !a.sink->Healthy()) metrics_->RecordTokensAfterCancel(1);
  TextStream::Delta delta = a.text->Push(token);
  a.sink->OnChunk(TokenChunk(sample, p, std::move(delta.text), *tokenizer_));
  RecordEmittedToken(&a, now);

  if (delta.stopped) {
    FinishRequest(seq, pkv::v1::FINISH_REASON_STOP, std::string(a.text->stop_string()), false);
  } else if (seq->num_generated() >= p.max_tokens || seq->num_tokens() >= options_.max_context) {
    FinishRequest(seq, pkv::v1::FINISH_REASON_LENGTH, "", false);
  }
}

void Engine::RecordEmittedToken(ActiveRequest* a, absl::Time now) {
  ++a->emitted;
  if (metrics_ != nullptr) {
    metrics_->RecordGeneratedTokens(1);
    if (a->first_token == absl::InfinitePast()) {
      metrics_->RecordTimeToFirstToken(Seconds(now - a->arrival));
    } else {
      metrics_->RecordInterTokenLatency(Seconds(now - a->last_token));
    }
  }
  if (a->first_token == absl::InfinitePast()) a->first_token = now;
  a->last_token = now;
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
  pkv::v1::Complete c =
      CompleteMessage(*seq, *a, reason, std::move(matched_stop), last_token_withheld, now);
  if (metrics_ != nullptr) metrics_->RecordRequestDuration(Seconds(now - a->arrival));
  std::unique_ptr<Sequence> done = scheduler_.Finish(id);
  a->sink->OnComplete(std::move(c));
  MarkTerminalAfterDelivery(a->request_id, id);
}

pkv::v1::Complete Engine::CompleteMessage(const Sequence& seq, const ActiveRequest& a,
                                          pkv::v1::FinishReason reason, std::string matched_stop,
                                          bool last_token_withheld, absl::Time now) const {
  pkv::v1::Complete c;
  c.set_finish_reason(reason);
  c.set_prompt_tokens(static_cast<uint32_t>(seq.num_prompt_tokens));
  // Emitted tokens (resumed ones included); an EOS or stop token id is neither emitted nor counted.
  c.set_completion_tokens(
      static_cast<uint32_t>(seq.num_generated() - (last_token_withheld ? 1 : 0)));
  c.mutable_timings()->set_queue_seconds(
      a.first_scheduled == absl::InfinitePast() ? 0 : Seconds(a.first_scheduled - a.arrival));
  c.mutable_timings()->set_time_to_first_token_seconds(
      a.first_token == absl::InfinitePast() ? 0 : Seconds(a.first_token - a.arrival));
  c.mutable_timings()->set_total_seconds(Seconds(now - a.arrival));
  c.set_worker_id(options_.worker_id);
  c.set_migrations(a.migrations);
  c.set_request_id(a.request_id);
  c.set_matched_stop(std::move(matched_stop));
  c.set_cached_tokens(static_cast<uint32_t>(seq.num_cached_tokens));
  return c;
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
  MarkTerminalAfterDelivery(a->request_id, id);
}

void Engine::RejectRequest(uint64_t id, const absl::Status& status) {
  auto it = active_.find(id);
  if (it == active_.end()) return;
  std::unique_ptr<ActiveRequest> a = std::move(it->second);
  active_.erase(it);
  if (metrics_ != nullptr) metrics_->RecordRequestError(StatusCodeName(status.code()));
  a->sink->OnError(status);
  MarkTerminalAfterDelivery(a->request_id, id);
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
  launched_.clear();  // nothing more is asked of a failed backend
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
