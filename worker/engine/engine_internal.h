// Types private to the engine's implementation files (engine.cc, engine_step.cc,
// engine_output.cc).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "pkv/v1/worker.pb.h"
#include "worker/engine/engine.h"
#include "worker/engine/request_sink.h"
#include "worker/scheduler/sequence.h"
#include "worker/tokenizer/text_stream.h"

namespace pkv {

// Per-request state the scheduler thread keeps beside the scheduler's Sequence.
struct Engine::ActiveRequest {
  std::shared_ptr<RequestSink> sink;
  std::unique_ptr<TextStream> text;
  std::string request_id;
  absl::Time arrival;
  absl::Time first_scheduled = absl::InfinitePast();
  absl::Time first_token = absl::InfinitePast();
  absl::Time last_token = absl::InfinitePast();
  int32_t emitted = 0;  // tokens streamed by this worker
  uint32_t migrations = 0;
};

struct Engine::InboxItem {
  enum class Kind { kAdd, kCancel, kCancelAll };
  Kind kind = Kind::kAdd;
  uint64_t id = 0;
  AbortReason reason = AbortReason::kClientCancel;
  std::unique_ptr<Sequence> seq;          // kAdd
  std::unique_ptr<ActiveRequest> active;  // kAdd
};

}  // namespace pkv
