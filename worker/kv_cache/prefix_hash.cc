#include "worker/kv_cache/prefix_hash.h"

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "xxhash.h"

namespace pkv {

uint64_t PrefixCacheSalt(std::string_view identity) {
  return XXH3_64bits(identity.data(), identity.size());
}

uint64_t PrefixCacheSalt(const PrefixCacheIdentity& id) {
  // Debian's absl::StrCat takes absl::string_view, which is not std::string_view there.
  return PrefixCacheSalt(absl::StrCat(
      "model=", std::string(id.model_name), ";layers=", id.num_layers,
      ";kv_heads=", id.num_kv_heads, ";head_dim=", id.head_dim, ";dtype=", std::string(id.dtype),
      ";kv_cache_dtype=", std::string(id.kv_cache_dtype), ";page=", id.page_size));
}

PageHash HashPage(const PageHash* parent, const int32_t* tokens, int32_t num_tokens,
                  uint64_t salt) {
  // One contiguous buffer: [parent.lo, parent.hi] then the token ids. x86 and aarch64 are little
  // endian, which is the byte order the comment in the header promises.
  std::vector<uint8_t> buf(16 + sizeof(int32_t) * static_cast<size_t>(num_tokens));
  const PageHash root;
  const PageHash& p = parent != nullptr ? *parent : root;
  std::memcpy(buf.data(), &p.lo, 8);
  std::memcpy(buf.data() + 8, &p.hi, 8);
  if (num_tokens > 0) std::memcpy(buf.data() + 16, tokens, sizeof(int32_t) * num_tokens);
  const XXH128_hash_t h = XXH3_128bits_withSeed(buf.data(), buf.size(), salt);
  return PageHash{h.low64, h.high64};
}

void ExtendPageHashes(const std::vector<int32_t>& tokens, int32_t page_size, int32_t num_pages,
                      uint64_t salt, std::vector<PageHash>* hashes) {
  PKV_CHECK_MSG(page_size > 0, "page_size must be positive");
  PKV_CHECK_MSG(int64_t{num_pages} * page_size <= static_cast<int64_t>(tokens.size()),
                "hashing a page that is not full");
  for (int32_t i = static_cast<int32_t>(hashes->size()); i < num_pages; ++i) {
    const PageHash* parent = i == 0 ? nullptr : &(*hashes)[i - 1];
    hashes->push_back(HashPage(parent, tokens.data() + int64_t{i} * page_size, page_size, salt));
  }
}

}  // namespace pkv
