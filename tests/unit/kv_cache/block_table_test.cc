#include "worker/kv_cache/block_table.h"

#include <cstdint>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace pkv {
namespace {

// Independent oracle for ceil(n / p): the smallest k with k * p >= n.
int64_t CeilPages(int64_t num_tokens, int32_t page_size) {
  int64_t k = 0;
  while (k * page_size < num_tokens) ++k;
  return k;
}

TEST(BlockTableTest, PagesNeededAtPageBoundaries) {
  for (int32_t page_size : {1, 2, 15, 16, 17, 64}) {
    BlockTable table;
    for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{page_size - 1}, int64_t{page_size},
                      int64_t{page_size + 1}, int64_t{2 * page_size}, int64_t{2 * page_size + 1},
                      int64_t{7 * page_size - 1}}) {
      EXPECT_EQ(table.PagesNeeded(n, page_size), CeilPages(n, page_size))
          << "page_size=" << page_size << " n=" << n;
    }
  }
}

TEST(BlockTableTest, EnsureCapacityGrowsOnlyAtBoundaries) {
  for (int32_t page_size : {1, 16, 17}) {
    PagePool pool(64);
    BlockTable table;
    for (int64_t n = 0; n <= 3 * page_size + 1; ++n) {
      const int32_t before = table.num_pages();
      const int32_t needed = table.PagesNeeded(n, page_size);
      ASSERT_TRUE(table.EnsureCapacity(n, page_size, &pool));
      EXPECT_EQ(table.num_pages(), before + needed);
      EXPECT_EQ(table.num_pages(), CeilPages(n, page_size)) << "page_size=" << page_size;
      EXPECT_GE(table.Capacity(page_size), n);
      EXPECT_LT(table.Capacity(page_size) - n, page_size);  // never a spare whole page
      EXPECT_EQ(table.PagesNeeded(n, page_size), 0);
    }
    // Asking for less than held changes nothing.
    const std::vector<int32_t> held = table.pages();
    ASSERT_TRUE(table.EnsureCapacity(1, page_size, &pool));
    EXPECT_EQ(table.pages(), held);
    EXPECT_EQ(pool.num_used(), table.num_pages());
    table.ReleaseAll(&pool);
  }
}

TEST(BlockTableTest, EnsureCapacityIsAllOrNothing) {
  PagePool pool(3);
  BlockTable table;
  ASSERT_TRUE(table.EnsureCapacity(16, 16, &pool));
  EXPECT_FALSE(table.EnsureCapacity(16 * 4, 16, &pool));  // needs 3 more, 2 free
  EXPECT_EQ(table.num_pages(), 1);
  EXPECT_EQ(pool.num_used(), 1);
  EXPECT_TRUE(table.EnsureCapacity(16 * 3, 16, &pool));
  EXPECT_EQ(pool.num_free(), 0);
  table.ReleaseAll(&pool);
}

TEST(BlockTableTest, ReleaseAllReturnsEveryPage) {
  std::mt19937 rng(123);
  PagePool pool(50);
  std::vector<BlockTable> tables(5);
  for (int round = 0; round < 200; ++round) {
    BlockTable& t = tables[rng() % tables.size()];
    if (rng() % 4 == 0) {
      t.ReleaseAll(&pool);
      EXPECT_EQ(t.num_pages(), 0);
    } else {
      const int64_t want = t.Capacity(17) + static_cast<int64_t>(rng() % 40);
      const bool fits = t.PagesNeeded(want, 17) <= pool.num_free();
      EXPECT_EQ(t.EnsureCapacity(want, 17, &pool), fits);
    }
    // Tables never share a page, and together hold exactly the used pages.
    std::set<int32_t> seen;
    int32_t held = 0;
    for (const BlockTable& other : tables) {
      for (int32_t p : other.pages()) {
        EXPECT_TRUE(seen.insert(p).second) << "page " << p << " held twice";
        EXPECT_EQ(pool.RefCount(p), 1);
      }
      held += other.num_pages();
    }
    ASSERT_EQ(held, pool.num_used());
  }
  for (BlockTable& t : tables) t.ReleaseAll(&pool);
  EXPECT_EQ(pool.num_used(), 0);
  EXPECT_EQ(pool.allocs_total(), pool.frees_total());
}

TEST(BlockTableTest, MoveTransfersPages) {
  PagePool pool(4);
  BlockTable a;
  ASSERT_TRUE(a.EnsureCapacity(5, 2, &pool));
  const std::vector<int32_t> pages = a.pages();
  BlockTable b(std::move(a));
  EXPECT_EQ(a.num_pages(), 0);  // NOLINT(bugprone-use-after-move): the contract says empty
  EXPECT_EQ(b.pages(), pages);
  BlockTable c;
  c = std::move(b);
  EXPECT_EQ(b.num_pages(), 0);  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(c.pages(), pages);
  c.ReleaseAll(&pool);
  EXPECT_EQ(pool.num_used(), 0);
}

TEST(BlockTableDeathTest, DestroyingANonEmptyTableIsALeak) {
  EXPECT_DEATH(
      {
        PagePool pool(2);
        BlockTable table;
        (void)table.EnsureCapacity(1, 16, &pool);
      },
      "page leak");
}

TEST(BlockTableDeathTest, MoveAssignOverHeldPagesIsALeak) {
  EXPECT_DEATH(
      {
        PagePool pool(2);
        BlockTable a;
        BlockTable b;
        (void)a.EnsureCapacity(1, 16, &pool);
        (void)b.EnsureCapacity(1, 16, &pool);
        a = std::move(b);
      },
      "still holds pages");
}

}  // namespace
}  // namespace pkv
