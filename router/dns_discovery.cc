#include "router/dns_discovery.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace pkv::router {

absl::StatusOr<DnsTarget> ParseDnsTarget(absl::string_view name_port) {
  const size_t colon = name_port.rfind(':');
  DnsTarget target;
  if (colon == absl::string_view::npos || colon == 0 ||
      !absl::SimpleAtoi(name_port.substr(colon + 1), &target.port) || target.port <= 0 ||
      target.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--workers_dns '", name_port,
                     "' is not name:port (e.g. pkv-workers.default.svc.cluster.local:50061)"));
  }
  target.host = std::string(name_port.substr(0, colon));
  return target;
}

absl::StatusOr<std::vector<std::string>> ResolveARecords(const DnsTarget& target) {
  addrinfo hints{};
  hints.ai_family = AF_INET;  // A records; the headless Service publishes one per ready pod
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  const int rc = getaddrinfo(target.host.c_str(), nullptr, &hints, &result);
  if (rc == EAI_NONAME
#ifdef EAI_NODATA
      || rc == EAI_NODATA
#endif
  ) {
    return absl::NotFoundError(absl::StrCat("no A records for ", target.host));
  }
  if (rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot resolve ", target.host, ": ", gai_strerror(rc)));
  }
  std::vector<std::string> out;
  for (const addrinfo* ai = result; ai != nullptr; ai = ai->ai_next) {
    if (ai->ai_family != AF_INET) continue;
    char ip[INET_ADDRSTRLEN] = {};
    const auto* in = reinterpret_cast<const sockaddr_in*>(ai->ai_addr);
    if (inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip)) == nullptr) continue;
    out.push_back(absl::StrCat(ip, ":", target.port));
  }
  freeaddrinfo(result);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

DiscoveryChange ReconcileDiscovered(const std::set<std::string>& discovered,
                                    const std::set<std::string>& static_workers,
                                    const std::vector<std::string>& resolved) {
  std::set<std::string> wanted;
  for (const std::string& address : resolved) {
    if (!static_workers.contains(address)) wanted.insert(address);
  }
  DiscoveryChange change;
  std::set_difference(wanted.begin(), wanted.end(), discovered.begin(), discovered.end(),
                      std::back_inserter(change.add));
  std::set_difference(discovered.begin(), discovered.end(), wanted.begin(), wanted.end(),
                      std::back_inserter(change.remove));
  return change;
}

DnsDiscovery::DnsDiscovery(std::string name, Resolver resolve, absl::Duration interval, Apply apply)
    : name_(std::move(name)),
      resolve_(std::move(resolve)),
      interval_(interval),
      apply_(std::move(apply)) {}

DnsDiscovery::~DnsDiscovery() { Stop(); }

void DnsDiscovery::Start() {
  ResolveOnce();
  thread_ = std::thread([this] { Loop(); });
}

void DnsDiscovery::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void DnsDiscovery::ResolveOnce() {
  absl::StatusOr<std::vector<std::string>> answer = resolve_();
  if (!answer.ok() && answer.status().code() != absl::StatusCode::kNotFound) {
    if (!failing_) {
      PKV_LOG(WARNING) << "worker discovery: " << answer.status().message()
                       << "; keeping the last known workers of " << name_;
    }
    failing_ = true;
    return;
  }
  if (failing_) {
    PKV_LOG(INFO) << "worker discovery: " << name_ << " resolves again";
  }
  failing_ = false;
  apply_(answer.ok() ? *answer : std::vector<std::string>());
}

void DnsDiscovery::Loop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      auto stop = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stopping_; };
      mu_.AwaitWithTimeout(absl::Condition(&stop), interval_);
      if (stopping_) return;
    }
    ResolveOnce();
  }
}

}  // namespace pkv::router
