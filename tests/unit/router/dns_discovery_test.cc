// Worker discovery from DNS: target parsing, resolving a local name, the pure reconciliation of a
// new answer with the discovered set, and the discovery loop's failure policy.
#include "router/dns_discovery.h"

#include <algorithm>
#include <atomic>
#include <iterator>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"

namespace pkv::router {
namespace {

TEST(DnsDiscoveryTest, ParsesNameAndPort) {
  absl::StatusOr<DnsTarget> t = ParseDnsTarget("pkv-workers.default.svc.cluster.local:50061");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->host, "pkv-workers.default.svc.cluster.local");
  EXPECT_EQ(t->port, 50061);
  for (const char* bad : {"", "name", "name:", ":80", "name:0", "name:65536", "name:x1"}) {
    absl::StatusOr<DnsTarget> b = ParseDnsTarget(bad);
    EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(b.status().message().find("--workers_dns"), absl::string_view::npos) << bad;
  }
}

TEST(DnsDiscoveryTest, ResolvesLocalhostAndNumericAddresses) {
  absl::StatusOr<std::vector<std::string>> local = ResolveARecords({"localhost", 4242});
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_NE(std::find(local->begin(), local->end(), "127.0.0.1:4242"), local->end());
  absl::StatusOr<std::vector<std::string>> numeric = ResolveARecords({"127.0.0.9", 7});
  ASSERT_TRUE(numeric.ok()) << numeric.status();
  EXPECT_EQ(*numeric, std::vector<std::string>{"127.0.0.9:7"});
}

TEST(DnsDiscoveryTest, ReconcileExample) {
  const DiscoveryChange c =
      ReconcileDiscovered({"10.0.0.1:1", "10.0.0.2:1"}, {"10.0.0.9:1"},
                          {"10.0.0.2:1", "10.0.0.3:1", "10.0.0.9:1", "10.0.0.3:1"});
  EXPECT_EQ(c.add, std::vector<std::string>{"10.0.0.3:1"});
  EXPECT_EQ(c.remove, std::vector<std::string>{"10.0.0.1:1"});
}

// Random sets: applying the change to the discovered set gives exactly the answer minus the
// static workers; nothing static is ever added or removed; nothing is both added and removed.
TEST(DnsDiscoveryTest, ReconcileProperties) {
  std::mt19937_64 rng(20260623);
  auto address = [&] { return absl::StrCat("10.0.0.", rng() % 12, ":5"); };
  for (int iter = 0; iter < 2000; ++iter) {
    std::set<std::string> discovered, statics;
    std::vector<std::string> resolved;
    for (int i = rng() % 6; i > 0; --i) statics.insert(address());
    for (int i = rng() % 8; i > 0; --i) {
      const std::string a = address();
      if (!statics.contains(a)) discovered.insert(a);
    }
    for (int i = rng() % 10; i > 0; --i) resolved.push_back(address());
    const DiscoveryChange c = ReconcileDiscovered(discovered, statics, resolved);
    std::set<std::string> after = discovered;
    for (const auto& a : c.add) {
      EXPECT_FALSE(discovered.contains(a));
      EXPECT_FALSE(statics.contains(a));
      after.insert(a);
    }
    for (const auto& a : c.remove) {
      EXPECT_TRUE(discovered.contains(a));
      EXPECT_EQ(std::count(c.add.begin(), c.add.end(), a), 0);
      after.erase(a);
    }
    std::set<std::string> expected;
    for (const auto& a : resolved) {
      if (!statics.contains(a)) expected.insert(a);
    }
    EXPECT_EQ(after, expected);
    EXPECT_TRUE(std::is_sorted(c.add.begin(), c.add.end()));
    EXPECT_TRUE(std::is_sorted(c.remove.begin(), c.remove.end()));
  }
}

// NOT_FOUND (no records) empties the set; other failures keep the last answer (no apply).
TEST(DnsDiscoveryTest, LoopAppliesAnswersAndIgnoresResolverFailures) {
  absl::Mutex mu;
  std::vector<absl::StatusOr<std::vector<std::string>>> script = {
      std::vector<std::string>{"10.0.0.1:5"},
      absl::UnavailableError("SERVFAIL"),
      absl::NotFoundError("NXDOMAIN"),
      std::vector<std::string>{"10.0.0.2:5", "10.0.0.3:5"},
  };
  std::atomic<int> calls{0};
  std::vector<std::vector<std::string>> applied;
  DnsDiscovery discovery(
      "fake",
      [&]() -> absl::StatusOr<std::vector<std::string>> {
        const int i = calls.fetch_add(1);
        return script[std::min<size_t>(i, script.size() - 1)];
      },
      absl::Milliseconds(5),
      [&](const std::vector<std::string>& addresses) {
        absl::MutexLock lock(&mu);
        applied.push_back(addresses);
      });
  discovery.Start();
  {
    absl::MutexLock lock(&mu);
    ASSERT_EQ(applied.size(), 1u) << "Start() resolves once before returning";
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (calls.load() < 6 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  discovery.Stop();
  absl::MutexLock lock(&mu);
  ASSERT_GE(applied.size(), 3u);
  EXPECT_EQ(applied[0], std::vector<std::string>{"10.0.0.1:5"});
  EXPECT_TRUE(applied[1].empty()) << "NXDOMAIN means no workers";
  EXPECT_EQ(applied[2], (std::vector<std::string>{"10.0.0.2:5", "10.0.0.3:5"}));
  EXPECT_EQ(static_cast<int>(applied.size()), calls.load() - 1) << "the SERVFAIL was not applied";
}

}  // namespace
}  // namespace pkv::router
