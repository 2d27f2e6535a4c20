// The outgoing side of one client Generate stream: what to write next, with at most one write in
// flight (gRPC allows one), and when to Finish.
//
// While a write is in flight, newly relayed chunks are coalesced into one pending chunk (token
// ids, text and logprobs appended in order), so a slow client costs one growing message rather
// than a queue of many, and the worker is never pushed back on. The pending chunk is bounded by
// the request's own output (max_tokens <= max_context).
//
// Order is preserved: chunks, then the Complete, then the status. A non-OK status is sent after
// the chunks already queued (ABORTED after 12 tokens tells the client about exactly those 12).
// Not thread-safe: the owning stream guards it with its mutex and performs the returned action
// after unlocking.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>

#include "grpcpp/support/status.h"
#include "pkv/v1/generation.pb.h"

namespace pkv::router {

class ResponseQueue {
 public:
  struct Action {
    enum class Kind { kNone, kWrite, kWriteAndFinish, kFinish };
    Kind kind = Kind::kNone;
    const pkv::v1::GenerateResponse* message = nullptr;  // kWrite / kWriteAndFinish; owned here
    grpc::Status status;                                 // kWriteAndFinish / kFinish
  };

  void PushChunk(pkv::v1::Chunk chunk);
  // The last message of a successful stream; Next() then finishes with OK after writing it.
  void PushComplete(pkv::v1::Complete complete);
  // Ends the stream with `status` once the queued messages are written. The first call wins.
  void SetFinal(grpc::Status status);
  // The client is gone: drop every message not yet handed to gRPC and any final status not yet
  // sent (the caller sets the one that now applies, e.g. CANCELLED).
  void DropPending();

  // The next thing to do; marks it started. kNone while a write is in flight or nothing is due.
  Action Next();
  void WriteDone() { write_in_flight_ = false; }

  bool has_final() const { return final_.has_value(); }
  bool finish_started() const { return finish_started_; }
  // Tokens in chunks handed to the queue so far (written or pending).
  uint64_t tokens_queued() const { return tokens_queued_; }

 private:
  std::deque<pkv::v1::GenerateResponse> pending_;
  pkv::v1::GenerateResponse in_flight_;  // the message gRPC is writing; stable until done
  bool write_in_flight_ = false;
  bool finish_started_ = false;
  std::optional<grpc::Status> final_;
  uint64_t tokens_queued_ = 0;
};

}  // namespace pkv::router
