// Keys of the prefix cache: a 128-bit hash per full KV page, chained over every token up to the
// end of that page, so equal keys mean equal token prefixes (and so equal K/V), not just an equal
// page of tokens:
//   h_0 = H(salt; 0, 0, tokens[0, P))        h_i = H(salt; h_{i-1}, tokens[i*P, (i+1)*P))
// H is XXH3_128bits seeded with `salt`, over the 16 bytes of the parent hash followed by the
// page's token ids as little-endian int32. The salt covers whatever else changes the K/V for the
// same tokens: model identity and shapes, activation dtype, KV cache dtype, page size
// (PrefixCacheIdentity). With 128 bits an
// accidental collision among even 2^40 cached pages has probability ~2^-48, so a hit is not
// verified against the tokens (vLLM and SGLang make the same choice with 256/64-bit keys).
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace pkv {

struct PageHash {
  uint64_t lo = 0;
  uint64_t hi = 0;

  friend bool operator==(const PageHash& a, const PageHash& b) {
    return a.lo == b.lo && a.hi == b.hi;
  }
  friend bool operator!=(const PageHash& a, const PageHash& b) { return !(a == b); }
  template <typename H>
  friend H AbslHashValue(H h, const PageHash& k) {
    return H::combine(std::move(h), k.lo, k.hi);
  }
};

// Salt for a worker's cache: XXH3_64bits of `identity`, a string naming everything besides the
// tokens that determines the K/V (PrefixCacheIdentity below builds it).
uint64_t PrefixCacheSalt(std::string_view identity);

// Everything besides the tokens that decides which bytes a KV page holds. The KV dtype is part of
// it even though a worker has one: FP8 pages and 16-bit pages of the same tokens are different
// bytes, so a cache shared or persisted across workers (or restarts with another
// --kv_cache_dtype) must never match one for the other.
struct PrefixCacheIdentity {
  std::string_view model_name;
  int32_t num_layers = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  std::string_view dtype;           // the model's activation dtype ("float32", "bfloat16", ...)
  std::string_view kv_cache_dtype;  // "auto", "fp8_e4m3", "fp8_e5m2" (KvCacheDtypeName)
  int32_t page_size = 0;
};
uint64_t PrefixCacheSalt(const PrefixCacheIdentity& identity);

// Hash of one full page given its parent's (nullptr for the first page of a sequence).
// REQUIRES: tokens points at num_tokens ids.
PageHash HashPage(const PageHash* parent, const int32_t* tokens, int32_t num_tokens, uint64_t salt);

// Extends `hashes` (the chain of the first hashes->size() pages of `tokens`) to its first
// `num_pages` full pages; does nothing when it already has that many. The chain only depends on
// the tokens, which a sequence only appends to, so callers keep it across steps and preemptions.
// REQUIRES: page_size > 0, num_pages * page_size <= tokens.size().
void ExtendPageHashes(const std::vector<int32_t>& tokens, int32_t page_size, int32_t num_pages,
                      uint64_t salt, std::vector<PageHash>* hashes);

}  // namespace pkv
