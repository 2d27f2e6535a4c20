#include "worker/kv_cache/page_pool.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace pkv {
namespace {

void ExpectLedger(const PagePool& pool) {
  EXPECT_EQ(pool.num_used() + pool.num_free(), pool.num_pages());
  EXPECT_EQ(pool.allocs_total() - pool.frees_total(), static_cast<uint64_t>(pool.num_used()));
}

TEST(PagePoolTest, StartsAllFree) {
  PagePool pool(7);
  EXPECT_EQ(pool.num_pages(), 7);
  EXPECT_EQ(pool.num_free(), 7);
  EXPECT_EQ(pool.num_used(), 0);
  for (int32_t p = 0; p < 7; ++p) EXPECT_EQ(pool.RefCount(p), 0);
  ExpectLedger(pool);
}

TEST(PagePoolTest, AllocateHandsOutDistinctValidIdsAndAppends) {
  PagePool pool(10);
  std::vector<int32_t> out = {-42};  // Allocate appends, never clears
  ASSERT_TRUE(pool.Allocate(4, &out));
  ASSERT_TRUE(pool.Allocate(6, &out));
  ASSERT_EQ(out.size(), 11u);
  EXPECT_EQ(out[0], -42);
  std::set<int32_t> ids(out.begin() + 1, out.end());
  EXPECT_EQ(ids.size(), 10u);
  EXPECT_EQ(*ids.begin(), 0);
  EXPECT_EQ(*ids.rbegin(), 9);
  for (int32_t p : ids) EXPECT_EQ(pool.RefCount(p), 1);
  EXPECT_EQ(pool.num_free(), 0);
  ExpectLedger(pool);
}

TEST(PagePoolTest, AllocateIsAllOrNothing) {
  PagePool pool(5);
  std::vector<int32_t> out;
  ASSERT_TRUE(pool.Allocate(3, &out));
  const std::vector<int32_t> before = out;
  EXPECT_FALSE(pool.Allocate(3, &out));  // only 2 free
  EXPECT_EQ(out, before);
  EXPECT_EQ(pool.num_free(), 2);
  EXPECT_EQ(pool.allocs_total(), 3u);
  EXPECT_TRUE(pool.Allocate(0, &out));
  EXPECT_EQ(out, before);
  EXPECT_TRUE(pool.Allocate(2, &out));
  EXPECT_FALSE(pool.Allocate(1, &out));
  ExpectLedger(pool);
}

TEST(PagePoolTest, RefcountRetainRelease) {
  PagePool pool(3);
  std::vector<int32_t> out;
  ASSERT_TRUE(pool.Allocate(1, &out));
  const int32_t page = out[0];
  pool.Retain(page);
  pool.Retain(page);
  EXPECT_EQ(pool.RefCount(page), 3);
  pool.Release(page);
  pool.Release(page);
  EXPECT_EQ(pool.RefCount(page), 1);
  EXPECT_EQ(pool.num_used(), 1);  // still held by one holder
  EXPECT_EQ(pool.frees_total(), 0u);
  pool.Release(page);
  EXPECT_EQ(pool.RefCount(page), 0);
  EXPECT_EQ(pool.num_used(), 0);
  EXPECT_EQ(pool.frees_total(), 1u);
  ExpectLedger(pool);
}

TEST(PagePoolTest, FreedPagesAreReused) {
  PagePool pool(4);
  std::vector<int32_t> all;
  ASSERT_TRUE(pool.Allocate(4, &all));
  pool.Release(all[2]);
  pool.Release(all[0]);
  std::vector<int32_t> again;
  ASSERT_TRUE(pool.Allocate(2, &again));
  std::sort(again.begin(), again.end());
  std::vector<int32_t> expected = {all[0], all[2]};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(again, expected);
  EXPECT_EQ(pool.allocs_total(), 6u);
  EXPECT_EQ(pool.frees_total(), 2u);
  ExpectLedger(pool);
}

// Random allocate / retain / release traffic against a shadow refcount model.
TEST(PagePoolTest, RandomTrafficKeepsLedger) {
  for (uint32_t seed = 1; seed <= 5; ++seed) {
    std::mt19937 rng(seed);
    const int32_t num_pages = 1 + static_cast<int32_t>(rng() % 40);
    PagePool pool(num_pages);
    std::vector<int32_t> shadow(num_pages, 0);
    for (int step = 0; step < 2000; ++step) {
      const uint32_t op = rng() % 3;
      if (op == 0) {
        const int32_t n = static_cast<int32_t>(rng() % 5);
        const int32_t free_before = pool.num_free();
        std::vector<int32_t> out;
        const bool ok = pool.Allocate(n, &out);
        ASSERT_EQ(ok, n <= free_before);
        ASSERT_EQ(out.size(), ok ? static_cast<size_t>(n) : 0u);
        for (int32_t p : out) {
          ASSERT_EQ(shadow[p], 0) << "allocated a page in use";
          shadow[p] = 1;
        }
      } else {
        std::vector<int32_t> held;
        for (int32_t p = 0; p < num_pages; ++p)
          if (shadow[p] > 0) held.push_back(p);
        if (held.empty()) continue;
        const int32_t p = held[rng() % held.size()];
        if (op == 1) {
          pool.Retain(p);
          ++shadow[p];
        } else {
          pool.Release(p);
          --shadow[p];
        }
      }
      int32_t used = 0;
      for (int32_t p = 0; p < num_pages; ++p) {
        ASSERT_EQ(pool.RefCount(p), shadow[p]);
        used += shadow[p] > 0;
      }
      ASSERT_EQ(pool.num_used(), used);
      ExpectLedger(pool);
    }
  }
}

TEST(PagePoolDeathTest, ReleaseUnderflowAborts) {
  PagePool pool(2);
  std::vector<int32_t> out;
  ASSERT_TRUE(pool.Allocate(1, &out));
  pool.Release(out[0]);
  EXPECT_DEATH(pool.Release(out[0]), "refcount underflow");
}

TEST(PagePoolDeathTest, ReleaseOfNeverAllocatedPageAborts) {
  PagePool pool(2);
  EXPECT_DEATH(pool.Release(1), "refcount underflow");
}

TEST(PagePoolDeathTest, OutOfRangeIdsAbort) {
  PagePool pool(2);
  EXPECT_DEATH(pool.Release(2), "out of range");
  EXPECT_DEATH(pool.Retain(-1), "out of range");
  EXPECT_DEATH(pool.RefCount(5), "out of range");
}

TEST(PagePoolDeathTest, RetainOfFreePageAborts) {
  PagePool pool(2);
  EXPECT_DEATH(pool.Retain(0), "Retain of a free page");
}

}  // namespace
}  // namespace pkv
