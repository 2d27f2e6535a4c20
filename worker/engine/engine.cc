// Engine: threading, submission, cancellation, drain and load publishing. The step (scheduler
// thread only) is in engine_step.cc, a request's output and terminal paths in engine_output.cc.
#include "worker/engine/engine.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "api/request_validation.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "worker/engine/engine_internal.h"
#include "worker/engine/sampling_convert.h"
#include "worker/kv_cache/prefix_hash.h"

namespace pkv {
namespace {

// The scheduler's configuration with the prefix cache's salt: everything besides the tokens that
// changes the K/V a page holds (model, its shapes, the activation and KV cache dtypes, the page
// size).
SchedulerConfig SaltedSchedulerConfig(const EngineOptions& options, const ModelBackend& backend) {
  const ModelConfig& c = backend.config();
  SchedulerConfig config = options.scheduler;
  const std::string dtype = backend.dtype_name();
  PrefixCacheIdentity id;
  id.model_name = options.model_name;
  id.num_layers = c.num_layers;
  id.num_kv_heads = c.num_kv_heads;
  id.head_dim = c.head_dim;
  id.dtype = dtype;
  id.kv_cache_dtype = KvCacheDtypeName(backend.kv_cache_dtype());
  id.page_size = backend.page_size();
  config.prefix_cache_salt = PrefixCacheSalt(id);
  return config;
}

}  // namespace

Engine::Engine(EngineOptions options, std::unique_ptr<ModelBackend> backend,
               std::unique_ptr<Tokenizer> tokenizer, WorkerMetrics* metrics)
    : options_(std::move(options)),
      backend_(std::move(backend)),
      tokenizer_(std::move(tokenizer)),
      metrics_(metrics),
      pool_(static_cast<int32_t>(backend_->num_kv_pages())),
      scheduler_(SaltedSchedulerConfig(options_, *backend_), &pool_) {
  absl::MutexLock lock(&mu_);
  load_.pages_free = pool_.num_free();
  load_.pages_total = pool_.num_pages();
}

Engine::~Engine() { Stop(absl::UnavailableError("worker shutting down")); }

void Engine::Start() {
  PublishLoad();  // metrics and GetLoad are meaningful before the first request
  thread_ = std::thread([this] { Loop(); });
}

void Engine::Stop(const absl::Status& status) {
  {
    absl::MutexLock lock(&mu_);
    if (!stopping_) {
      stopping_ = true;
      stop_status_ = status;
    }
    wake_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
  relay_.Shutdown();  // the loop's last terminal calls reach their transports
}

absl::StatusOr<std::vector<int32_t>> Engine::ResolvePrompt(
    const pkv::v1::GenerateRequest& request) const {
  std::vector<int32_t> ids;
  if (request.prompt_case() == pkv::v1::GenerateRequest::kTokenIds) {
    ids.reserve(request.token_ids().ids_size());
    for (uint32_t id : request.token_ids().ids()) ids.push_back(static_cast<int32_t>(id));
    return ids;
  }
  if (request.prompt_case() == pkv::v1::GenerateRequest::kChat) {
    if (options_.chat == nullptr) return absl::InvalidArgumentError("chat prompts are not served");
    // Rendered, then encoded with special tokens recognized and none added (chat_prompt.h).
    return options_.chat->Tokenize(request.chat(), *tokenizer_);
  }
  // Raw-text prompts get the tokenizer's own special tokens (e.g. Llama-3's BOS), as HF does.
  return tokenizer_->Encode(request.text(), /*add_special_tokens=*/true);
}

absl::StatusOr<uint64_t> Engine::Submit(const pkv::v1::WorkerGenerateRequest& wreq,
                                        absl::Time deadline, std::shared_ptr<RequestSink> sink) {
  const pkv::v1::GenerateRequest& req = wreq.request();
  const pkv::v1::ModelInfo info = GetModelInfo();
  PKV_RETURN_IF_ERROR(api::ValidateGenerateRequest(req, info, api::RequestLimits()));
  PKV_ASSIGN_OR_RETURN(std::vector<int32_t> prompt, ResolvePrompt(req));
  PKV_ASSIGN_OR_RETURN(const int32_t max_tokens, ValidateResolvedPrompt(prompt, wreq, info));

  auto seq = std::make_unique<Sequence>();
  seq->request_id = req.request_id();
  seq->num_prompt_tokens = static_cast<int32_t>(prompt.size());
  seq->tokens = std::move(prompt);
  for (uint32_t id : wreq.resume_token_ids()) seq->tokens.push_back(static_cast<int32_t>(id));
  seq->params = ConvertSamplingParams(req.sampling());
  seq->params.max_tokens = max_tokens;
  seq->priority = req.priority();
  seq->arrival_time = absl::Now();
  seq->deadline = deadline;

  auto active = std::make_unique<ActiveRequest>();
  active->sink = std::make_shared<RelayedSink>(std::move(sink), &relay_);
  active->request_id = req.request_id();
  active->arrival = seq->arrival_time;
  active->migrations = wreq.migrations();
  active->text = std::make_unique<TextStream>(tokenizer_.get(), seq->params.stop);
  if (wreq.resume_token_ids_size() > 0) {
    std::vector<int32_t> resumed(seq->tokens.begin() + seq->num_prompt_tokens, seq->tokens.end());
    active->text->Prime(resumed);
  }

  absl::MutexLock lock(&mu_);
  if (failed_) {
    return absl::UnavailableError(
        "worker hit a fatal backend error and is restarting; retry on another worker");
  }
  if (stopping_) return absl::UnavailableError("worker is shutting down");
  if (draining_) return absl::UnavailableError("worker is draining; retry on another worker");
  // The scheduler's bounds, checked here so a flood never piles up in the inbox.
  const int64_t capacity =
      int64_t{std::min(options_.scheduler.max_running, options_.scheduler.max_batch_tokens)} +
      options_.scheduler.max_waiting;
  if (in_flight_ >= capacity) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "worker is full: ", in_flight_, " requests in flight (max_running + max_waiting = ",
        capacity, "); retry later or on another worker"));
  }
  if (deadline <= absl::Now()) {
    return absl::DeadlineExceededError("deadline expired before the request was queued");
  }
  const uint64_t id = next_id_++;
  seq->id = id;
  if (!seq->request_id.empty()) ids_by_request_[seq->request_id] = id;
  // An idle engine's last progress is old; the stall clock starts with the first request.
  if (in_flight_++ == 0) load_.last_progress = absl::Now();
  InboxItem item;
  item.kind = InboxItem::Kind::kAdd;
  item.id = id;
  item.seq = std::move(seq);
  item.active = std::move(active);
  inbox_.push_back(std::move(item));
  wake_.Signal();
  return id;
}

void Engine::Cancel(uint64_t id, AbortReason reason) {
  absl::MutexLock lock(&mu_);
  InboxItem item;
  item.kind = InboxItem::Kind::kCancel;
  item.id = id;
  item.reason = reason;
  inbox_.push_back(std::move(item));
  wake_.Signal();
}

bool Engine::CancelByRequestId(const std::string& request_id) {
  uint64_t id = 0;
  {
    absl::MutexLock lock(&mu_);
    auto it = ids_by_request_.find(request_id);
    if (it == ids_by_request_.end()) return false;
    id = it->second;
  }
  Cancel(id, AbortReason::kClientCancel);
  return true;
}

void Engine::BeginDrain() {
  absl::MutexLock lock(&mu_);
  draining_ = true;
  load_.draining = true;
}

bool Engine::WaitIdle(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  while (in_flight_ > 0) {
    if (wake_.WaitWithDeadline(&mu_, deadline)) return in_flight_ == 0;
  }
  return true;
}

void Engine::CancelAll(AbortReason reason) {
  absl::MutexLock lock(&mu_);
  InboxItem item;
  item.kind = InboxItem::Kind::kCancelAll;
  item.reason = reason;
  inbox_.push_back(std::move(item));
  wake_.Signal();
}

absl::Duration Engine::StalledFor(absl::Time now) const {
  absl::MutexLock lock(&mu_);
  if (in_flight_ == 0 || load_.last_progress == absl::InfinitePast()) return absl::ZeroDuration();
  return std::max(absl::ZeroDuration(), now - load_.last_progress);
}

bool Engine::failed() const {
  absl::MutexLock lock(&mu_);
  return failed_;
}

EngineLoad Engine::GetLoad() const {
  absl::MutexLock lock(&mu_);
  return load_;
}

pkv::v1::ModelInfo Engine::GetModelInfo() const {
  const ModelConfig& c = backend_->config();
  pkv::v1::ModelInfo info;
  info.set_model_name(options_.model_name);
  info.set_vocab_size(static_cast<uint32_t>(c.vocab_size));
  info.set_max_context(static_cast<uint32_t>(options_.max_context));
  info.set_page_size(static_cast<uint32_t>(backend_->page_size()));
  for (int32_t eos : c.eos_token_ids) info.add_eos_token_ids(static_cast<uint32_t>(eos));
  info.set_backend(backend_->backend_name());
  info.set_dtype(backend_->dtype_name());
  info.set_kv_cache_dtype(KvCacheDtypeName(backend_->kv_cache_dtype()));
  info.set_batch_invariant(backend_->batch_invariant());
  info.set_num_layers(static_cast<uint32_t>(c.num_layers));
  info.set_num_q_heads(static_cast<uint32_t>(c.num_q_heads));
  info.set_num_kv_heads(static_cast<uint32_t>(c.num_kv_heads));
  info.set_head_dim(static_cast<uint32_t>(c.head_dim));
  info.set_hidden_size(static_cast<uint32_t>(c.hidden_size));
  info.set_kv_pages_total(static_cast<uint64_t>(backend_->num_kv_pages()));
  return info;
}

void Engine::Loop() {
  std::vector<InboxItem> items;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      // Sleep only when there is nothing to run; a waiting-but-unschedulable queue cannot exist
      // (Add rejects sequences that never fit), so the timeout only guards against a busy spin.
      while (inbox_.empty() && !stopping_ && scheduler_.idle() && launched_.empty()) {
        wake_.Wait(&mu_);
      }
      if (stopping_) break;
      items.swap(inbox_);
    }
    ProcessInbox(&items);
    items.clear();
    if (!scheduler_.idle() || !launched_.empty()) RunStep();
    PublishLoad();
  }
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    status = stop_status_;
    items.swap(inbox_);
  }
  ProcessInbox(&items);
  FailEverything(status, AbortReason::kShutdown);
  // A step still running (overlap_steps) is waited for, its samples dropped: the backend is
  // destroyed after this thread ends.
  while (!launched_.empty()) {
    std::vector<SampleResult> dropped;
    (void)backend_->Finish(&dropped);
    launched_.pop_front();
  }
  PublishLoad();
}

void Engine::PublishLoad() {
  EngineLoad load;
  load.running = scheduler_.num_running();
  load.waiting = scheduler_.num_waiting();
  load.queued_tokens = scheduler_.num_queued_tokens();
  load.pages_used = pool_.num_used();
  load.pages_free = pool_.num_free();
  load.pages_total = pool_.num_pages();
  load.pages_cached = pool_.num_cached();
  load.pages_evictable = pool_.num_evictable();
  load.prefix_cache_queries = scheduler_.prefix_cache_queries();
  load.prefix_cache_hits = scheduler_.prefix_cache_hits();
  if (metrics_ != nullptr) {
    metrics_->SetPrefixCache(load.pages_cached, load.pages_evictable, load.prefix_cache_queries,
                             load.prefix_cache_hits, pool_.evictions_total());
    metrics_->SetQueue(load.running, load.waiting);
    metrics_->SetKvPages(load.pages_used, load.pages_free, pool_.allocs_total(),
                         pool_.frees_total());
    metrics_->RecordPreemptions(scheduler_.num_preemptions());
  }
  absl::MutexLock lock(&mu_);
  load.draining = draining_;
  load.in_flight = in_flight_;
  load.last_progress = absl::Now();
  load_ = load;
}

void Engine::MarkTerminalAfterDelivery(const std::string& request_id, uint64_t id) {
  relay_.Post([this, request_id, id]() { MarkTerminal(request_id, id); });
}

void Engine::MarkTerminal(const std::string& request_id, uint64_t id) {
  absl::MutexLock lock(&mu_);
  auto it = ids_by_request_.find(request_id);
  if (it != ids_by_request_.end() && it->second == id) ids_by_request_.erase(it);
  --in_flight_;
  wake_.SignalAll();
}

}  // namespace pkv
