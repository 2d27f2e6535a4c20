// Worker discovery from DNS (router --workers_dns=name:port): the A records of a name, typically a
// Kubernetes headless Service (one record per ready worker pod), re-resolved every interval.
// Discovered workers live next to the static --workers list: DNS adds and removes only what it
// discovered, never a static entry (an address in both lists is static).
//
// Failure policy: a name without records (NXDOMAIN / no data: e.g. no ready worker pod) is an
// empty answer, so every discovered worker is removed (its streams still finish); a resolver
// failure (timeout, SERVFAIL, no resolver) keeps the last known set, so a DNS outage never empties
// a healthy router.
//
// DnsDiscovery owns one thread that resolves (getaddrinfo blocks; never on a gRPC thread) and
// hands every successful answer to `apply`. Thread-safe: Start and Stop from one control thread.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace pkv::router {

struct DnsTarget {
  std::string host;
  int port = 0;
};

// "name:port" (port 1..65535, non-empty name); INVALID_ARGUMENT naming the flag otherwise.
absl::StatusOr<DnsTarget> ParseDnsTarget(absl::string_view name_port);

// IPv4 A records of target.host as sorted, unique "a.b.c.d:port" strings. NOT_FOUND when the name
// has no records, UNAVAILABLE for a resolver failure.
absl::StatusOr<std::vector<std::string>> ResolveARecords(const DnsTarget& target);

// What one answer changes among the discovered workers.
struct DiscoveryChange {
  std::vector<std::string> add;     // newly discovered (sorted)
  std::vector<std::string> remove;  // discovered before, absent now (sorted)
};

// Pure reconciliation: `discovered` = what DNS added so far and still has; `static_workers` are
// never added or removed by DNS; `resolved` = the new answer (any order, duplicates allowed).
DiscoveryChange ReconcileDiscovered(const std::set<std::string>& discovered,
                                    const std::set<std::string>& static_workers,
                                    const std::vector<std::string>& resolved);

class DnsDiscovery {
 public:
  // `resolve` is ResolveARecords bound to a target in production, a fake in tests. `apply` gets
  // every usable answer (the full list, possibly empty) on the discovery thread.
  using Resolver = std::function<absl::StatusOr<std::vector<std::string>>()>;
  using Apply = std::function<void(const std::vector<std::string>& addresses)>;

  DnsDiscovery(std::string name, Resolver resolve, absl::Duration interval, Apply apply);
  ~DnsDiscovery();  // Stop()
  DnsDiscovery(const DnsDiscovery&) = delete;
  DnsDiscovery& operator=(const DnsDiscovery&) = delete;

  // Resolves once synchronously (so the first placement already sees DNS workers), then every
  // interval on the thread.
  void Start();
  void Stop();

 private:
  void ResolveOnce();
  void Loop();

  const std::string name_;  // for logs
  const Resolver resolve_;
  const absl::Duration interval_;
  const Apply apply_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool failing_ = false;  // discovery thread only: log a failure once per outage
  std::thread thread_;
};

}  // namespace pkv::router
