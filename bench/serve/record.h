// What the serving benchmark records about one request, as its client saw it. Times are seconds
// since the run's start on the steady clock. Filled by the driver (driver.h), read by stats.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pkv::serve_bench {

struct RequestRecord {
  int64_t index = 0;            // send order within the run
  int64_t prompt_len = 0;       // token ids sent
  uint32_t max_tokens = 0;      // asked for (ignore_eos is set, so expected == completion_tokens)
  std::string session_id;       // the request's affinity key (empty = none)
  int64_t conversation = -1;    // multi_turn: its conversation; -1 otherwise
  int turn = 0;                 // multi_turn: 0-based turn
  bool warmup = false;          // a warm-up request (serve_bench.h): not in the statistics
  double send_s = 0;            // the call was started
  double first_token_s = -1;    // the first chunk with a token arrived; -1 if none did
  double end_s = 0;             // the final status arrived
  std::vector<double> chunk_s;  // [num chunks] arrival of each chunk with tokens, in order
  int64_t tokens_received = 0;  // token ids over all chunks
  int status_code = 0;          // grpc::StatusCode of the stream (0 = OK)
  std::string error_message;    // empty when OK
  // From the stream's Complete message (zeros when none arrived).
  bool completed = false;
  uint32_t prompt_tokens = 0;
  uint32_t completion_tokens = 0;
  uint32_t cached_tokens = 0;
  std::string worker_id;
  // The worker's own clock (Complete.timings, from its arrival at the worker's engine): to its
  // first scheduled step and to its first token; -1 when no Complete arrived.
  double worker_queue_s = -1;
  double worker_ttft_s = -1;

  bool ok() const { return status_code == 0 && completed; }
  double ttft_s() const { return first_token_s - send_s; }
  double e2e_s() const { return end_s - send_s; }
};

}  // namespace pkv::serve_bench
