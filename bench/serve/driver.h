// The serving benchmark's load driver: sends a workload's requests over pkv.v1.Generation (the
// router) or pkv.v1.Worker (one worker, bypassing the router), open loop (an arrival process) or
// closed loop (a fixed number in flight), and records each stream (record.h).
//
// Threads: RunLoad's caller is the one dispatcher thread (it owns the workload, the arrival clock
// and the records); streams are gRPC callback reactors (ClientReadReactor) whose reactions only
// time-stamp, copy tokens and hand the finished record to the dispatcher through a mutex-guarded
// list. No thread per request.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "bench/serve/arrival.h"
#include "bench/serve/record.h"
#include "bench/serve/workload.h"
#include "grpcpp/channel.h"

namespace pkv::serve_bench {

enum class Target { kRouter, kWorker };

struct LoadProgress {
  int64_t sent = 0, finished = 0, ok = 0, in_flight = 0;
  int64_t total = 0;  // num_requests, 0 when the run is bounded by duration only
  double elapsed_s = 0;
  double duration_s = 0;  // the duration bound, 0 when none
};

struct LoadOptions {
  Target target = Target::kRouter;
  std::shared_ptr<grpc::Channel> channel;                     // REQUIRES: non-null
  std::vector<std::pair<std::string, std::string>> metadata;  // added to every call (API key)
  absl::Duration request_timeout = absl::Seconds(120);        // every stream's deadline
  // Open loop when request_rate > 0, else closed loop with `concurrency` (>= 1) in flight.
  double request_rate = 0;
  ArrivalKind arrival = ArrivalKind::kPoisson;
  int concurrency = 0;
  // Stop sending after num_requests (0 = no bound) or once `duration` has passed (zero = no
  // bound); REQUIRES: at least one bound. In-flight streams are then awaited.
  int64_t num_requests = 0;
  absl::Duration duration = absl::ZeroDuration();
  uint64_t seed = 0;  // arrivals, and each request's sampling seed (seed + index)
  // Every request's sampling; unset: the server's defaults (temperature 1, top_p 1).
  std::optional<float> temperature;
  std::optional<float> top_p;
  std::string request_id_prefix = "sb";
  // Called on the dispatcher thread about every progress_interval, and once at the end.
  std::function<void(const LoadProgress&)> progress;
  absl::Duration progress_interval = absl::Milliseconds(200);
};

// Runs the load to completion; the records come back in finish order.
std::vector<RequestRecord> RunLoad(const LoadOptions& options, Workload& workload);

}  // namespace pkv::serve_bench
