// Helpers shared by the reliability integration tests (migration, faults, overload, soak): a
// client stream that records everything a client can observe (tokens, text, Complete, status,
// trailers) and can cancel itself, metric scrapes, the per-worker quiescence check that closes
// every test (RELIABILITY.md I2/I3: no used pages, no sequences, page ledger balanced), and the
// resident memory of a process. Thread-safe where noted; everything else belongs to one test.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "pkv/v1/generation.grpc.pb.h"
#include "tests/harness/cluster.h"

namespace pkv::testing {

// The fault tests' per-stream deadline: a hang detector, not a bound.
inline constexpr absl::Duration kStreamDeadline = absl::Seconds(60);

// A router + `workers` workers with test faults enabled (--enable_test_faults plus worker_args on
// every worker, w0_args on worker 0 only); null (and a test failure) when it does not start.
std::unique_ptr<Cluster> StartCluster(int workers, std::vector<std::string> worker_args,
                                      std::vector<std::string> router_args = {},
                                      bool start_router = true,
                                      std::vector<std::string> w0_args = {});

// VmRSS of a live process in KiB (from /proc/<pid>/status); -1 when unreadable.
int64_t RssKiB(pid_t pid);

// Everything one client saw of one Generate call.
struct Outcome {
  grpc::Status status;
  std::vector<uint32_t> tokens;
  std::string text;
  bool completed = false;
  pkv::v1::Complete complete;
  std::multimap<std::string, std::string> trailers;
  absl::Duration elapsed;
  bool cancelled_by_client = false;  // StreamControl triggered the cancel
};

// Optional behaviour of Stream().
struct StreamControl {
  // Cancel once this many tokens arrived (>= 1), or after this long without that (whichever
  // first); neither by default.
  int cancel_after_tokens = -1;
  absl::Duration cancel_after = absl::InfiniteDuration();
  // Called after every chunk with the tokens received so far (on the calling thread).
  std::function<void(int tokens)> on_progress;
  // Extra request metadata (e.g. an API key).
  std::vector<std::pair<std::string, std::string>> metadata;
  // Wait for the channel to connect instead of failing fast (within the deadline). On by default:
  // on a loaded 2-core machine a fresh channel's first connect attempt can fail transiently (seen
  // twice in CI runs, as UNAVAILABLE before any token), which would fail a test about something
  // else. Only a test about connecting to a router that is down turns it off. Statuses the router
  // sends (UNAVAILABLE "no healthy worker" included) arrive either way.
  bool wait_for_ready = true;
};

// Runs one Generate call to its end with `deadline`. Thread-safe (one call per thread).
Outcome Stream(pkv::v1::Generation::Stub* stub, const pkv::v1::GenerateRequest& request,
               absl::Duration deadline, const StreamControl& control = {});

// One /metrics scrape; Value() of a sample, NaN when absent or the scrape failed.
class MetricsSnapshot {
 public:
  explicit MetricsSnapshot(const std::string& address);
  bool ok() const { return ok_; }
  double Value(const std::string& sample) const;

 private:
  bool ok_ = false;
  std::string text_;
};

// Polls worker `w`'s metrics until it holds no pages and no sequences and its page ledger balances
// (allocs == frees, used + free == total); the last observation otherwise.
absl::Status WaitWorkerQuiescent(const WorkerProc& w, absl::Duration timeout);

// A greedy, EOS-ignoring request for the tiny model: `prompt_len` token ids derived from `key`.
pkv::v1::GenerateRequest GreedyRequest(int key, int prompt_len, uint32_t max_tokens);
// The same with temperature 1 and a fixed seed (reproducible sampling).
pkv::v1::GenerateRequest SeededRequest(int key, int prompt_len, uint32_t max_tokens, uint64_t seed);

// Count of `code` among outcomes, and a "CODE: n, ..." summary for failure messages.
int CountCode(const std::vector<Outcome>& outcomes, grpc::StatusCode code);
std::string CodeSummary(const std::vector<Outcome>& outcomes);

// Blocks until `done` is true or the timeout passes (polling every 5 ms); returns done().
bool WaitFor(const std::function<bool()>& done, absl::Duration timeout);

// A router stub on its own HTTP/2 connection (a private subchannel pool), so concurrent
// clients are not multiplexed behind one connection's stream limit.
std::unique_ptr<pkv::v1::Generation::Stub> NewRouterStub(const Cluster& cluster);

// Runs requests[i] on its own thread and connection with controls[i] (if given); all outcomes.
std::vector<Outcome> RunConcurrently(const Cluster& cluster,
                                     const std::vector<pkv::v1::GenerateRequest>& requests,
                                     absl::Duration deadline,
                                     const std::vector<StreamControl>& controls = {});

// Samples summed over workers `which` (NaN if any scrape failed).
double SumOverWorkers(Cluster& cluster, const std::vector<int>& which, const std::string& sample);
double RouterSample(Cluster& cluster, const std::string& sample);

// A session id that the router pins to worker `w` (session affinity), found by asking: the
// tool for putting chosen requests on a chosen worker. Empty (and a test failure) if none lands.
std::string SessionOn(Cluster& cluster, int w);

// Waits until the router reports `healthy` healthy workers.
bool WaitRouterHealthy(Cluster& cluster, int healthy, absl::Duration timeout);

// The uninterrupted outputs of `requests` through the router: the oracle the faulted runs must
// reproduce (greedy, or seeded sampling). Fails the test on an error.
std::vector<Outcome> References(const Cluster& cluster,
                                const std::vector<pkv::v1::GenerateRequest>& requests);

}  // namespace pkv::testing
