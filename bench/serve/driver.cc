#include "bench/serve/driver.h"

#include <algorithm>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "bench/serve/stream_call.h"

namespace pkv::serve_bench {
namespace {

// Owns the run's state on the caller's thread; reactors only touch `done_` under `mu_`.
class Dispatcher final : public CallSink {
 public:
  Dispatcher(const LoadOptions& options, Workload& workload)
      : options_(options),
        workload_(workload),
        t0_(Clock::now()),
        router_stub_(pkv::v1::Generation::NewStub(options.channel)),
        worker_stub_(pkv::v1::Worker::NewStub(options.channel)) {
    if (options.request_rate > 0) {
      arrival_.emplace(options.arrival, options.request_rate, options.seed);
      next_arrival_s_ = arrival_->NextGapSeconds();
    }
  }

  void OnFinished(FinishedCall call) override {
    absl::MutexLock lock(&mu_);
    done_.push_back(std::move(call));
  }

  std::vector<RequestRecord> Run() {
    double next_progress_s = 0;
    while (true) {
      Collect();
      const double now = Now();
      const bool open = SendingOpen(now);
      if (open) SendDue(now);
      if (now >= next_progress_s) {
        Report(now);
        next_progress_s = now + absl::ToDoubleSeconds(options_.progress_interval);
      }
      if (!open && in_flight_ == 0) break;
      WaitForEvent();
    }
    Report(Now());
    return std::move(records_);
  }

 private:
  double Now() const { return std::chrono::duration<double>(Clock::now() - t0_).count(); }

  bool SendingOpen(double now) const {
    if (options_.num_requests > 0 && sent_ >= options_.num_requests) return false;
    const double bound = absl::ToDoubleSeconds(options_.duration);
    return bound <= 0 || now < bound;
  }

  // Sleeps until a stream finishes, the next arrival is due or progress is due (<= interval).
  void WaitForEvent() {
    double wake_s = Now() + absl::ToDoubleSeconds(options_.progress_interval);
    if (arrival_ && backlog_ == 0 && SendingOpen(Now())) wake_s = std::min(wake_s, next_arrival_s_);
    const absl::Duration wait = absl::Seconds(std::max(0.0, wake_s - Now()));
    absl::MutexLock lock(&mu_);
    auto has_done = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !done_.empty(); };
    mu_.AwaitWithTimeout(absl::Condition(&has_done), wait);
  }

  void Collect() {
    std::vector<FinishedCall> done;
    {
      absl::MutexLock lock(&mu_);
      done.swap(done_);
    }
    for (FinishedCall& call : done) {
      --in_flight_;
      ++finished_;
      if (call.record.ok()) ++ok_;
      workload_.OnReply(call.spec, call.reply, call.record.ok());
      records_.push_back(std::move(call.record));
    }
  }

  // Open loop: every arrival due by `now` (late ones at once, so the schedule is kept on
  // average). Closed loop: top up to `concurrency`. An arrival the workload cannot serve yet
  // (multi_turn at its conversation cap) waits in `backlog_` for a reply.
  void SendDue(double now) {
    int64_t want = 0;
    if (arrival_) {
      while (next_arrival_s_ <= now) {
        ++backlog_;
        next_arrival_s_ += arrival_->NextGapSeconds();
      }
      want = backlog_;
    } else {
      want = std::max<int64_t>(0, options_.concurrency - in_flight_);
    }
    while (want > 0 && SendingOpen(now)) {
      std::optional<RequestSpec> spec = workload_.Next();
      if (!spec) break;
      Send(std::move(*spec));
      --want;
      if (arrival_) --backlog_;
    }
  }

  void Send(RequestSpec spec) {
    pkv::v1::GenerateRequest request;
    request.set_request_id(absl::StrCat(options_.request_id_prefix, "-", sent_));
    request.mutable_token_ids()->mutable_ids()->Add(spec.prompt.begin(), spec.prompt.end());
    request.set_session_id(spec.session_id);
    pkv::v1::SamplingParams* s = request.mutable_sampling();
    s->set_max_tokens(spec.max_tokens);
    s->set_ignore_eos(true);
    s->set_seed(options_.seed + static_cast<uint64_t>(sent_));
    if (options_.temperature) s->set_temperature(*options_.temperature);
    if (options_.top_p) s->set_top_p(*options_.top_p);
    FinishedCall call;
    call.record.index = sent_;
    call.record.prompt_len = static_cast<int64_t>(spec.prompt.size());
    call.record.max_tokens = spec.max_tokens;
    call.record.session_id = spec.session_id;
    call.record.conversation = spec.conversation;
    call.record.turn = spec.turn;
    call.spec = std::move(spec);
    ++sent_;
    ++in_flight_;
    if (options_.target == Target::kRouter) {
      Start(new StreamCall<RouterApi>(std::move(call), std::move(request), this, t0_),
            router_stub_.get());
    } else {
      Start(new StreamCall<WorkerApi>(std::move(call), std::move(request), this, t0_),
            worker_stub_.get());
    }
  }

  template <typename Call, typename Stub>
  void Start(Call* call, Stub* stub) {
    grpc::ClientContext& ctx = call->context();
    ctx.set_deadline(std::chrono::system_clock::now() +
                     absl::ToChronoMilliseconds(options_.request_timeout));
    for (const auto& [key, value] : options_.metadata) ctx.AddMetadata(key, value);
    call->Start(stub);
  }

  void Report(double now) {
    if (!options_.progress) return;
    LoadProgress p;
    p.sent = sent_;
    p.finished = finished_;
    p.ok = ok_;
    p.in_flight = in_flight_;
    p.total = options_.num_requests;
    p.elapsed_s = now;
    p.duration_s = absl::ToDoubleSeconds(options_.duration);
    options_.progress(p);
  }

  const LoadOptions& options_;
  Workload& workload_;
  const Clock::time_point t0_;
  std::unique_ptr<pkv::v1::Generation::Stub> router_stub_;
  std::unique_ptr<pkv::v1::Worker::Stub> worker_stub_;
  std::optional<ArrivalProcess> arrival_;
  double next_arrival_s_ = 0;
  int64_t backlog_ = 0;  // arrivals due but not yet sent
  int64_t sent_ = 0, finished_ = 0, ok_ = 0, in_flight_ = 0;
  std::vector<RequestRecord> records_;

  absl::Mutex mu_;
  std::vector<FinishedCall> done_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::vector<RequestRecord> RunLoad(const LoadOptions& options, Workload& workload) {
  Dispatcher dispatcher(options, workload);
  return dispatcher.Run();
}

}  // namespace pkv::serve_bench
