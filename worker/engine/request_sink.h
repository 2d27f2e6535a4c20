// Where the engine sends one request's output. Implemented by the gRPC stream
// (worker/service/generate_stream.h) and by tests. The engine calls these from its scheduler
// thread, so implementations must not block: they enqueue and return. After a terminal call
// (OnComplete or OnError) no further calls are made. Implementations are shared (std::shared_ptr)
// between the engine and the transport and must tolerate calls after the transport went away (they
// become no-ops).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "pkv/v1/worker.pb.h"
#include "worker/engine/worker_metrics.h"

namespace pkv {

class RequestSink {
 public:
  virtual ~RequestSink() = default;
  // The request entered the queue; `prompt_token_ids` is the tokenized prompt.
  virtual void OnAccepted(const std::vector<int32_t>& prompt_token_ids) = 0;
  virtual void OnChunk(pkv::v1::Chunk chunk) = 0;
  // Terminal: the request finished normally.
  virtual void OnComplete(pkv::v1::Complete complete) = 0;
  // Terminal: the request failed or was aborted.
  virtual void OnError(const absl::Status& status) = 0;
  // False once the consumer is gone or cannot keep up (then the engine aborts the request).
  virtual bool Healthy() const = 0;
  // Why an unhealthy sink broke, for pkv_seq_aborts_total{reason}: the client cancelled, its
  // deadline passed, or it stopped reading.
  virtual AbortReason BrokenReason() const { return AbortReason::kClientCancel; }
};

}  // namespace pkv
