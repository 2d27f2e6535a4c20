// The prefix cache's mechanics: chained page hashes (prefix_hash.h) and the cached / evictable
// page states of PagePool (sharing, LRU eviction order, held pages never evicted, the ledger).
// The hash values are checked against an independent XXH3 computation over the documented byte
// layout, not against HashPage itself.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "worker/kv_cache/block_table.h"
#include "worker/kv_cache/page_pool.h"
#include "worker/kv_cache/prefix_hash.h"
#include "xxhash.h"

namespace pkv {
namespace {

void ExpectLedger(const PagePool& pool) {
  EXPECT_EQ(pool.num_used() + pool.num_free(), pool.num_pages());
  EXPECT_LE(pool.num_evictable(), pool.num_free());
  EXPECT_EQ(pool.allocs_total() - pool.frees_total(), static_cast<uint64_t>(pool.num_used()));
}

std::vector<int32_t> Iota(int32_t n, int32_t first) {
  std::vector<int32_t> v(n);
  for (int32_t i = 0; i < n; ++i) v[i] = first + i;
  return v;
}

// The header's layout: XXH3_128bits(seed = salt) over parent.lo, parent.hi, tokens (LE int32).
PageHash Reference(PageHash parent, const std::vector<int32_t>& page, uint64_t salt) {
  std::vector<unsigned char> bytes(16 + 4 * page.size());
  for (int b = 0; b < 8; ++b) {
    bytes[b] = static_cast<unsigned char>(parent.lo >> (8 * b));
    bytes[8 + b] = static_cast<unsigned char>(parent.hi >> (8 * b));
  }
  for (size_t i = 0; i < page.size(); ++i) {
    const uint32_t t = static_cast<uint32_t>(page[i]);
    for (int b = 0; b < 4; ++b) bytes[16 + 4 * i + b] = static_cast<unsigned char>(t >> (8 * b));
  }
  const XXH128_hash_t h = XXH3_128bits_withSeed(bytes.data(), bytes.size(), salt);
  return PageHash{h.low64, h.high64};
}

TEST(PrefixHashTest, ChainMatchesTheDocumentedLayout) {
  const std::vector<int32_t> tokens = Iota(10, 100);  // two full pages of 4, and 2 tokens
  std::vector<PageHash> chain;
  ExtendPageHashes(tokens, 4, 2, /*salt=*/7, &chain);
  ASSERT_EQ(chain.size(), 2u);
  const PageHash h0 = Reference(PageHash{}, {100, 101, 102, 103}, 7);
  EXPECT_EQ(chain[0], h0);
  EXPECT_EQ(chain[1], Reference(h0, {104, 105, 106, 107}, 7));
}

TEST(PrefixHashTest, HashNamesTheWholePrefixAndTheSalt) {
  std::vector<int32_t> a = Iota(8, 0), b = Iota(8, 0);
  b[1] = 999;  // differs in page 0 only
  std::vector<PageHash> ha, hb, hs;
  ExtendPageHashes(a, 4, 2, 1, &ha);
  ExtendPageHashes(b, 4, 2, 1, &hb);
  ExtendPageHashes(a, 4, 2, 2, &hs);
  EXPECT_NE(ha[0], hb[0]);
  EXPECT_NE(ha[1], hb[1]) << "page 1 has equal tokens but a different prefix";
  EXPECT_NE(ha[0], hs[0]) << "another salt (model, dtype) must give other keys";
  EXPECT_NE(ha[0], ha[1]);
}

// Pages of the same tokens stored as float and as FP8 are different bytes: the KV dtype seeds the
// chain, so no page key of one dtype matches one of the other.
TEST(PrefixHashTest, KvCacheDtypeIsPartOfThePageIdentity) {
  PrefixCacheIdentity id;
  id.model_name = "models/tiny";
  id.num_layers = 2;
  id.num_kv_heads = 2;
  id.head_dim = 16;
  id.dtype = "float32";
  id.page_size = 4;
  id.kv_cache_dtype = "auto";
  const uint64_t salt_auto = PrefixCacheSalt(id);
  id.kv_cache_dtype = "fp8_e4m3";
  const uint64_t salt_e4m3 = PrefixCacheSalt(id);
  id.kv_cache_dtype = "fp8_e5m2";
  const uint64_t salt_e5m2 = PrefixCacheSalt(id);
  EXPECT_NE(salt_auto, salt_e4m3);
  EXPECT_NE(salt_auto, salt_e5m2);
  EXPECT_NE(salt_e4m3, salt_e5m2);
  EXPECT_EQ(PrefixCacheSalt(id), salt_e5m2) << "deterministic";
  const std::vector<int32_t> tokens = Iota(8, 0);
  std::vector<PageHash> h_auto, h_e4m3;
  ExtendPageHashes(tokens, 4, 2, salt_auto, &h_auto);
  ExtendPageHashes(tokens, 4, 2, salt_e4m3, &h_e4m3);
  for (const PageHash& a : h_auto) {
    for (const PageHash& b : h_e4m3) EXPECT_NE(a, b);
  }
}

TEST(PrefixHashTest, ExtendIsIncremental) {
  const std::vector<int32_t> tokens = Iota(12, 5);
  std::vector<PageHash> all, steps;
  ExtendPageHashes(tokens, 4, 3, 9, &all);
  ExtendPageHashes(tokens, 4, 1, 9, &steps);
  ExtendPageHashes(tokens, 4, 1, 9, &steps);  // no-op
  ASSERT_EQ(steps.size(), 1u);
  ExtendPageHashes(tokens, 4, 3, 9, &steps);
  EXPECT_EQ(all, steps);
}

PageHash Key(uint64_t k) { return PageHash{k, ~k}; }

TEST(PrefixCachePoolTest, PublishedPageIsSharedAndKeptWhenReleased) {
  PagePool pool(4);
  std::vector<int32_t> pages;
  ASSERT_TRUE(pool.Allocate(2, &pages));
  EXPECT_TRUE(pool.Publish(pages[0], Key(1)));
  EXPECT_FALSE(pool.Publish(pages[0], Key(2))) << "a page has one hash";
  EXPECT_FALSE(pool.Publish(pages[1], Key(1))) << "a hash names one page";
  EXPECT_EQ(pool.Lookup(Key(1)), pages[0]);
  EXPECT_EQ(pool.Lookup(Key(2)), -1);
  pool.Retain(pages[0]);  // a second sequence shares it
  EXPECT_EQ(pool.RefCount(pages[0]), 2);
  pool.Release(pages[0]);
  pool.Release(pages[0]);
  pool.Release(pages[1]);
  EXPECT_EQ(pool.num_free(), 4);
  EXPECT_EQ(pool.num_evictable(), 1);
  EXPECT_EQ(pool.num_cached(), 1);
  EXPECT_EQ(pool.Lookup(Key(1)), pages[0]) << "an unreferenced cached page is kept";
  ExpectLedger(pool);
  pool.Retain(pages[0]);  // a hit revives it
  EXPECT_EQ(pool.num_evictable(), 0);
  EXPECT_EQ(pool.num_used(), 1);
  ExpectLedger(pool);
  pool.Release(pages[0]);
  ExpectLedger(pool);
}

TEST(PrefixCachePoolTest, AllocateTakesFreePagesBeforeEvicting) {
  PagePool pool(3);
  std::vector<int32_t> pages;
  ASSERT_TRUE(pool.Allocate(1, &pages));
  ASSERT_TRUE(pool.Publish(pages[0], Key(1)));
  pool.Release(pages[0]);
  std::vector<int32_t> more;
  ASSERT_TRUE(pool.Allocate(2, &more));
  EXPECT_EQ(std::count(more.begin(), more.end(), pages[0]), 0);
  EXPECT_EQ(pool.Lookup(Key(1)), pages[0]);
  EXPECT_EQ(pool.evictions_total(), 0u);
  ASSERT_TRUE(pool.Allocate(1, &more));  // only the cached page is left
  EXPECT_EQ(more.back(), pages[0]);
  EXPECT_EQ(pool.Lookup(Key(1)), -1);
  EXPECT_FALSE(pool.IsCached(pages[0]));
  EXPECT_EQ(pool.evictions_total(), 1u);
  ExpectLedger(pool);
  for (int32_t p : more) pool.Release(p);
  EXPECT_EQ(pool.num_evictable(), 0) << "an evicted page comes back uncached";
}

TEST(PrefixCachePoolTest, EvictsLeastRecentlyReleasedFirstAndNeverAHeldPage) {
  PagePool pool(4);
  std::vector<int32_t> p;
  ASSERT_TRUE(pool.Allocate(4, &p));
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(pool.Publish(p[i], Key(10 + i)));
  pool.Release(p[2]);
  pool.Release(p[0]);
  pool.Release(p[3]);  // p[1] stays held
  pool.Retain(p[0]);   // a hit: p[0] leaves the LRU list...
  pool.Release(p[0]);  // ...and comes back as the most recent
  std::vector<int32_t> got;
  ASSERT_TRUE(pool.Allocate(1, &got));
  EXPECT_EQ(got.back(), p[2]);
  ASSERT_TRUE(pool.Allocate(1, &got));
  EXPECT_EQ(got.back(), p[3]);
  ASSERT_TRUE(pool.Allocate(1, &got));
  EXPECT_EQ(got.back(), p[0]);
  EXPECT_FALSE(pool.Allocate(1, &got)) << "the held cached page is not evictable";
  EXPECT_EQ(pool.Lookup(Key(11)), p[1]);
  EXPECT_EQ(pool.num_cached(), 1);
  ExpectLedger(pool);
  for (int32_t page : got) pool.Release(page);
  pool.Release(p[1]);
  EXPECT_EQ(pool.num_free(), pool.num_pages());
  ExpectLedger(pool);
}

TEST(PrefixCachePoolTest, ReleaseAllQueuesTailPagesForEvictionFirst) {
  PagePool pool(3);
  BlockTable table;
  ASSERT_TRUE(table.EnsureCapacity(12, 4, &pool));
  const std::vector<int32_t> pages = table.pages();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(pool.Publish(pages[i], Key(i)));
  table.ReleaseAll(&pool);
  std::vector<int32_t> got;
  ASSERT_TRUE(pool.Allocate(1, &got));
  EXPECT_EQ(got[0], pages[2]) << "the tail page goes first; the head keeps the chain reachable";
  EXPECT_EQ(pool.Lookup(Key(0)), pages[0]);
  pool.Release(got[0]);
}

TEST(PrefixCachePoolTest, AppendSharedRetainsCachedPages) {
  PagePool pool(4);
  BlockTable a;
  ASSERT_TRUE(a.EnsureCapacity(8, 4, &pool));
  ASSERT_TRUE(pool.Publish(a.pages()[0], Key(1)));
  ASSERT_TRUE(pool.Publish(a.pages()[1], Key(2)));
  BlockTable b;
  b.AppendShared({pool.Lookup(Key(1)), pool.Lookup(Key(2))}, &pool);
  ASSERT_TRUE(b.EnsureCapacity(9, 4, &pool));
  EXPECT_EQ(b.pages()[0], a.pages()[0]);
  EXPECT_EQ(pool.RefCount(a.pages()[1]), 2);
  EXPECT_EQ(pool.num_used(), 3);
  a.ReleaseAll(&pool);
  EXPECT_EQ(pool.RefCount(b.pages()[0]), 1);
  b.ReleaseAll(&pool);
  EXPECT_EQ(pool.num_free(), 4);
  EXPECT_EQ(pool.num_evictable(), 2);
  ExpectLedger(pool);
}

TEST(PrefixCachePoolDeathTest, RetainOfAFreeUncachedPageDies) {
  PagePool pool(2);
  EXPECT_DEATH(pool.Retain(0), "Retain of a free page");
  std::vector<int32_t> p;
  ASSERT_TRUE(pool.Allocate(1, &p));
  pool.Release(p[0]);
  EXPECT_DEATH(pool.Publish(p[0], Key(1)), "nobody holds");
}

}  // namespace
}  // namespace pkv
