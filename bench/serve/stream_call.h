// Internal to bench/serve: one benchmark stream as a gRPC ClientReadReactor. Reactions never
// block: they time-stamp, copy token ids, and on OnDone delete the reactor, then hand the finished
// call to its sink. Works for both APIs through a small traits struct.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "bench/serve/record.h"
#include "bench/serve/workload.h"
#include "grpcpp/grpcpp.h"
#include "pkv/v1/generation.grpc.pb.h"
#include "pkv/v1/worker.grpc.pb.h"

namespace pkv::serve_bench {

using Clock = std::chrono::steady_clock;

// A finished stream, handed from a reactor thread to the dispatcher.
struct FinishedCall {
  RequestSpec spec;
  RequestRecord record;
  std::vector<uint32_t> reply;  // token ids streamed
};

class CallSink {
 public:
  virtual ~CallSink() = default;
  // Called once per call from a gRPC thread; must not block for long.
  virtual void OnFinished(FinishedCall call) = 0;
};

struct RouterApi {
  using Stub = pkv::v1::Generation::Stub;
  using Request = pkv::v1::GenerateRequest;
  using Response = pkv::v1::GenerateResponse;
  static Request Wrap(pkv::v1::GenerateRequest r) { return r; }
};

struct WorkerApi {
  using Stub = pkv::v1::Worker::Stub;
  using Request = pkv::v1::WorkerGenerateRequest;
  using Response = pkv::v1::WorkerGenerateResponse;
  static Request Wrap(pkv::v1::GenerateRequest r) {
    Request w;
    *w.mutable_request() = std::move(r);
    return w;
  }
};

template <typename Api>
class StreamCall final : public grpc::ClientReadReactor<typename Api::Response> {
 public:
  // `t0` is the run's start (record times are relative to it). Deletes itself after OnDone.
  StreamCall(FinishedCall call, pkv::v1::GenerateRequest request, CallSink* sink,
             Clock::time_point t0)
      : call_(std::move(call)), request_(Api::Wrap(std::move(request))), sink_(sink), t0_(t0) {}

  grpc::ClientContext& context() { return ctx_; }

  void Start(typename Api::Stub* stub) {
    call_.record.send_s = Seconds(Clock::now());
    stub->async()->Generate(&ctx_, &request_, this);
    this->StartRead(&response_);
    this->StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;
    if (response_.has_chunk() && response_.chunk().token_ids_size() > 0) {
      const double now = Seconds(Clock::now());
      RequestRecord& r = call_.record;
      if (r.first_token_s < 0) r.first_token_s = now;
      r.chunk_s.push_back(now);
      r.tokens_received += response_.chunk().token_ids_size();
      for (uint32_t id : response_.chunk().token_ids()) call_.reply.push_back(id);
    } else if (response_.has_complete()) {
      const pkv::v1::Complete& c = response_.complete();
      RequestRecord& r = call_.record;
      r.completed = true;
      r.prompt_tokens = c.prompt_tokens();
      r.completion_tokens = c.completion_tokens();
      r.cached_tokens = c.cached_tokens();
      r.worker_id = c.worker_id();
      r.worker_queue_s = c.timings().queue_seconds();
      r.worker_ttft_s = c.timings().time_to_first_token_seconds();
    }
    this->StartRead(&response_);
  }

  void OnDone(const grpc::Status& status) override {
    RequestRecord& r = call_.record;
    r.end_s = Seconds(Clock::now());
    r.status_code = static_cast<int>(status.error_code());
    if (!status.ok()) r.error_message = status.error_message();
    // Destroy the call (its ClientContext) before the dispatcher hears of it, so that once it
    // has heard of every call none is left half torn down when RunLoad returns.
    FinishedCall done = std::move(call_);
    CallSink* sink = sink_;
    delete this;
    sink->OnFinished(std::move(done));
  }

 private:
  double Seconds(Clock::time_point t) const {
    return std::chrono::duration<double>(t - t0_).count();
  }

  FinishedCall call_;
  typename Api::Request request_;
  typename Api::Response response_;
  grpc::ClientContext ctx_;
  CallSink* const sink_;
  const Clock::time_point t0_;
};

}  // namespace pkv::serve_bench
