// Configuration of one pkv-router process. Filled from command-line flags by router_flags.cc (the
// binary) or directly by tests; the library never reads flags itself. Plain value type.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "api/request_validation.h"

namespace pkv::router {

struct RouterOptions {
  std::string listen = "127.0.0.1:50051";  // client-facing gRPC (port 0 = pick one)
  std::vector<std::string> workers;        // static host:port list, one pkv-worker each

  // Admission: at most max_inflight streams run; up to max_queue more wait at most
  // queue_timeout_ms for a slot; beyond that RESOURCE_EXHAUSTED with grpc-retry-pushback-ms.
  int max_inflight = 64;
  int max_queue = 64;
  int queue_timeout_ms = 5000;
  int retry_pushback_ms = 1000;  // value of the grpc-retry-pushback-ms trailer

  // Worker registry. A worker is placeable when its last health check said SERVING, it is not
  // draining, and its ModelInfo is known. unhealthy_threshold consecutive failed checks (500 ms
  // deadline each) mark it unhealthy; a refused connection on a Generate does so at once.
  int health_interval_ms = 500;
  int health_timeout_ms = 500;
  int unhealthy_threshold = 2;
  int load_interval_ms = 250;
  std::string worker_health_service = "pkv.v1.Worker";
  int worker_keepalive_ms = 1000;  // RELIABILITY.md 3.0: keepalive 1 s / timeout 1 s
  int worker_keepalive_timeout_ms = 1000;

  // Streams. A worker stream silent for stall_timeout_ms while tokens are expected counts as a
  // lost worker. Before the first token a lost/refusing worker is replaced, up to max_attempts
  // placements in total, with jittered exponential backoff from retry_backoff_ms.
  int stall_timeout_ms = 3000;
  int max_attempts = 3;
  int retry_backoff_ms = 50;
  int retry_backoff_max_ms = 1000;
  // Mid-stream migration (replay prompt + emitted tokens on another worker). 0 = off: a worker
  // lost after tokens were sent ends the stream with ABORTED.
  int max_migrations = 0;

  // Session affinity map bound (LRU eviction beyond it).
  int max_sessions = 100000;

  // Client-facing server limits (RELIABILITY.md P1/S5).
  int max_request_bytes = 1 << 20;
  int max_concurrent_streams = 100;

  api::RequestLimits limits;
};

// Splits "host:port,host:port" into addresses; rejects empty entries and entries without a port.
absl::StatusOr<std::vector<std::string>> ParseWorkerList(absl::string_view list);

// Checks ranges (positive intervals, max_attempts >= 1, ...); INVALID_ARGUMENT naming the flag.
absl::Status ValidateRouterOptions(const RouterOptions& options);

}  // namespace pkv::router
