// Placement: session affinity (sticky while placeable, re-placed otherwise), two random choices
// preferring the less loaded, exclusion of failed workers, and the LRU bound of the session map.
#include "router/placement.h"

#include <algorithm>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pkv::router {
namespace {

std::vector<WorkerLoad> Workers(const std::vector<uint64_t>& loads) {
  std::vector<WorkerLoad> out;
  for (int i = 0; i < static_cast<int>(loads.size()); ++i) out.push_back({i, true, loads[i]});
  return out;
}

TEST(PlacementTest, TwoChoicesNeverPicksTheMostLoadedOfThree) {
  // With three workers, the chosen one is the less loaded of two distinct draws, so the single
  // most loaded worker can never win, and the least loaded wins 2/3 of the time.
  std::mt19937_64 rng(1);
  std::mt19937 load_rng(2);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<uint64_t> loads(3);
    for (auto& l : loads) l = load_rng() % 1000;
    std::sort(loads.begin(), loads.end());
    if (loads[1] == loads[2]) continue;
    std::shuffle(loads.begin(), loads.end(), load_rng);
    const int most = static_cast<int>(std::max_element(loads.begin(), loads.end()) - loads.begin());
    const int chosen = ChooseLeastLoadedOfTwo(Workers(loads), {}, rng);
    EXPECT_NE(chosen, most) << "loads " << loads[0] << " " << loads[1] << " " << loads[2];
  }
}

TEST(PlacementTest, TwoChoicesFrequenciesMatchTheRule) {
  // Loads 0 < 1 < 2 < 3: worker k wins when it is drawn with a more loaded partner. P(k wins) =
  // (number of partners above k) / C(4,2) = (3-k)/6 -> 1/2, 1/3, 1/6, 0.
  std::mt19937_64 rng(7);
  std::map<int, int> wins;
  const int kTrials = 60000;
  for (int t = 0; t < kTrials; ++t) ++wins[ChooseLeastLoadedOfTwo(Workers({0, 1, 2, 3}), {}, rng)];
  EXPECT_NEAR(wins[0] / double(kTrials), 1.0 / 2, 0.02);
  EXPECT_NEAR(wins[1] / double(kTrials), 1.0 / 3, 0.02);
  EXPECT_NEAR(wins[2] / double(kTrials), 1.0 / 6, 0.02);
  EXPECT_EQ(wins[3], 0);
}

TEST(PlacementTest, SkipsUnplaceableAndHonoursExclusion) {
  std::mt19937_64 rng(3);
  std::vector<WorkerLoad> workers = Workers({5, 0, 9});
  workers[1].placeable = false;  // least loaded but unhealthy
  for (int t = 0; t < 100; ++t) {
    const int w = ChooseLeastLoadedOfTwo(workers, {}, rng);
    EXPECT_EQ(w, 0);  // of {0, 2}, 0 is less loaded
    EXPECT_EQ(ChooseLeastLoadedOfTwo(workers, {0}, rng), 2);
  }
  // Everything excluded: fall back to the placeable ones rather than fail.
  const int w = ChooseLeastLoadedOfTwo(workers, {0, 2}, rng);
  EXPECT_TRUE(w == 0 || w == 2);
  for (auto& x : workers) x.placeable = false;
  EXPECT_EQ(ChooseLeastLoadedOfTwo(workers, {}, rng), -1);
}

TEST(PlacementTest, SessionIsStickyWhileItsWorkerIsPlaceable) {
  std::mt19937_64 rng(11);
  SessionAffinityMap sessions(100);
  std::vector<WorkerLoad> workers = Workers({3, 3, 3, 3});
  auto first = ChoosePlacement("s1", workers, {}, false, sessions, rng);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->reason, PlacementReason::kLeastLoaded);
  std::mt19937 load_rng(5);
  for (int t = 0; t < 50; ++t) {
    for (auto& w : workers) w.load = load_rng() % 100;  // load changes do not move the session
    auto again = ChoosePlacement("s1", workers, {}, false, sessions, rng);
    ASSERT_TRUE(again.has_value());
    EXPECT_EQ(again->worker, first->worker);
    EXPECT_EQ(again->reason, PlacementReason::kAffinity);
  }
}

TEST(PlacementTest, SessionMovesWhenItsWorkerIsUnhealthyAndStaysMoved) {
  std::mt19937_64 rng(13);
  SessionAffinityMap sessions(100);
  std::vector<WorkerLoad> workers = Workers({1, 1, 1});
  const int original = ChoosePlacement("s", workers, {}, false, sessions, rng)->worker;
  workers[original].placeable = false;
  auto moved = ChoosePlacement("s", workers, {}, false, sessions, rng);
  ASSERT_TRUE(moved.has_value());
  EXPECT_NE(moved->worker, original);
  EXPECT_EQ(moved->reason, PlacementReason::kFailover);
  // The map now points at the new worker, even after the original recovers.
  workers[original].placeable = true;
  auto after = ChoosePlacement("s", workers, {}, false, sessions, rng);
  EXPECT_EQ(after->worker, moved->worker);
  EXPECT_EQ(after->reason, PlacementReason::kAffinity);
}

TEST(PlacementTest, RetryExcludesTheFailedStickyWorker) {
  std::mt19937_64 rng(17);
  SessionAffinityMap sessions(100);
  std::vector<WorkerLoad> workers = Workers({0, 0});
  const int first = ChoosePlacement("s", workers, {}, false, sessions, rng)->worker;
  auto retry = ChoosePlacement("s", workers, {first}, true, sessions, rng);
  EXPECT_NE(retry->worker, first);
  EXPECT_EQ(retry->reason, PlacementReason::kFailover);
}

TEST(PlacementTest, NoSessionNoMapEntry) {
  std::mt19937_64 rng(19);
  SessionAffinityMap sessions(100);
  auto p = ChoosePlacement("", Workers({4, 2}), {}, false, sessions, rng);
  EXPECT_EQ(p->worker, 1);
  EXPECT_EQ(sessions.size(), 0u);
  std::vector<WorkerLoad> none = Workers({1});
  none[0].placeable = false;
  EXPECT_FALSE(ChoosePlacement("s", none, {}, false, sessions, rng).has_value());
}

TEST(SessionAffinityMapTest, EvictsLeastRecentlyUsedBeyondCapacity) {
  SessionAffinityMap map(3);
  map.Set("a", 0);
  map.Set("b", 1);
  map.Set("c", 2);
  EXPECT_EQ(map.Lookup("a"), 0);  // a is now the most recent; b the least
  map.Set("d", 3);
  EXPECT_EQ(map.size(), 3u);
  EXPECT_FALSE(map.Contains("b"));
  EXPECT_TRUE(map.Contains("a"));
  map.Set("c", 7);  // an update refreshes c: order is now c, d, a
  map.Set("e", 4);  // so e evicts a
  EXPECT_FALSE(map.Contains("a"));
  EXPECT_EQ(map.Lookup("c"), 7);
}

TEST(SessionAffinityMapTest, RandomOperationsMatchAReferenceLru) {
  std::mt19937 rng(99);
  const size_t kCap = 8;
  SessionAffinityMap map(kCap);
  std::vector<std::pair<std::string, int>> ref;  // front = most recent
  for (int op = 0; op < 5000; ++op) {
    const std::string key = "k" + std::to_string(rng() % 20);
    auto it = std::find_if(ref.begin(), ref.end(), [&](auto& e) { return e.first == key; });
    if (rng() % 2 == 0) {
      const int value = static_cast<int>(rng() % 100);
      map.Set(key, value);
      if (it != ref.end()) ref.erase(it);
      ref.insert(ref.begin(), {key, value});
      if (ref.size() > kCap) ref.pop_back();
    } else {
      const std::optional<int> got = map.Lookup(key);
      if (it == ref.end()) {
        EXPECT_FALSE(got.has_value());
      } else {
        EXPECT_EQ(got, it->second);
        auto entry = *it;
        ref.erase(it);
        ref.insert(ref.begin(), entry);
      }
    }
    ASSERT_EQ(map.size(), ref.size());
  }
}

}  // namespace
}  // namespace pkv::router
