// The router's estimate of which worker holds which prompt prefixes in its KV prefix cache, as
// cache-aware routers keep it (SGLang's router, llm-d's precise prefix scorer in its approximate
// mode): the router remembers the prefix blocks of every prompt it placed on a worker, so the
// next prompt sharing a prefix can go where those pages likely still are. An estimate only: the
// worker may have evicted them (each worker's entry set is bounded and LRU, standing in for the
// worker's own eviction), and a restarted worker is cold. Nothing here affects correctness.
//
// Blocks: a token-id prompt is cut into blocks of `block_tokens` ids, a text prompt into blocks of
// `block_bytes` bytes (the router does not tokenize); only full blocks count. Block i is keyed by
// a 64-bit hash chained over every block up to it (XXH3_64, seeded with the previous key), so a
// key names a whole prefix: k_0 = XXH3(seed 0; block 0), k_i = XXH3(seed k_{i-1}; block i).
// A text prompt and a token prompt never share keys (distinct domain seeds).
//
// PrefixIndex is not thread-safe (Placer guards it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"
#include "pkv/v1/generation.pb.h"

namespace pkv::router {

// REQUIRES: block_tokens > 0, block_bytes > 0.
std::vector<uint64_t> PromptBlockHashes(const pkv::v1::GenerateRequest& request,
                                        int32_t block_tokens, int32_t block_bytes);

class PrefixIndex {
 public:
  // Remembers at most `max_blocks_per_worker` block keys per worker (LRU beyond).
  explicit PrefixIndex(size_t max_blocks_per_worker) : capacity_(max_blocks_per_worker) {}

  // Leading blocks of `hashes` the router placed on `worker` (and has not forgotten).
  int32_t MatchedBlocks(int worker, absl::Span<const uint64_t> hashes) const;
  // Records `hashes` as placed on `worker`, most recently used.
  void Record(int worker, absl::Span<const uint64_t> hashes);
  size_t num_blocks(int worker) const;

 private:
  struct WorkerBlocks {
    std::list<uint64_t> lru;  // front = most recently used
    absl::flat_hash_map<uint64_t, std::list<uint64_t>::iterator> index;
  };
  size_t capacity_;
  absl::flat_hash_map<int, WorkerBlocks> workers_;
};

}  // namespace pkv::router
