#include "router/prefix_index.h"

#include "common/status_macros.h"
#include "xxhash.h"

namespace pkv::router {
namespace {

// Domain seeds of the first block so text and token prompts never collide by construction.
constexpr uint64_t kTokenDomain = 0x746f6b656e73ull;  // "tokens"
constexpr uint64_t kTextDomain = 0x74657874ull;       // "text"

std::vector<uint64_t> ChainBlocks(const void* data, size_t size, size_t block_bytes,
                                  uint64_t seed) {
  std::vector<uint64_t> keys;
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (size_t off = 0; off + block_bytes <= size; off += block_bytes) {
    seed = XXH3_64bits_withSeed(bytes + off, block_bytes, seed);
    keys.push_back(seed);
  }
  return keys;
}

}  // namespace

std::vector<uint64_t> PromptBlockHashes(const pkv::v1::GenerateRequest& request,
                                        int32_t block_tokens, int32_t block_bytes) {
  PKV_CHECK_MSG(block_tokens > 0 && block_bytes > 0, "block sizes must be positive");
  if (request.prompt_case() == pkv::v1::GenerateRequest::kTokenIds) {
    const auto& ids = request.token_ids().ids();  // uint32, host (little-endian) order
    return ChainBlocks(ids.data(), sizeof(uint32_t) * static_cast<size_t>(ids.size()),
                       sizeof(uint32_t) * static_cast<size_t>(block_tokens), kTokenDomain);
  }
  const std::string& text = request.text();
  return ChainBlocks(text.data(), text.size(), static_cast<size_t>(block_bytes), kTextDomain);
}

int32_t PrefixIndex::MatchedBlocks(int worker, absl::Span<const uint64_t> hashes) const {
  auto it = workers_.find(worker);
  if (it == workers_.end()) return 0;
  int32_t n = 0;
  for (uint64_t h : hashes) {
    if (!it->second.index.contains(h)) break;
    ++n;
  }
  return n;
}

void PrefixIndex::Record(int worker, absl::Span<const uint64_t> hashes) {
  if (hashes.empty() || capacity_ == 0) return;
  WorkerBlocks& w = workers_[worker];
  // Last block first, so the prefix's head ends most recently used and is forgotten last.
  for (auto h = hashes.rbegin(); h != hashes.rend(); ++h) {
    auto it = w.index.find(*h);
    if (it != w.index.end()) {
      w.lru.splice(w.lru.begin(), w.lru, it->second);
      continue;
    }
    w.lru.push_front(*h);
    w.index.emplace(*h, w.lru.begin());
  }
  while (w.index.size() > capacity_) {
    w.index.erase(w.lru.back());
    w.lru.pop_back();
  }
}

size_t PrefixIndex::num_blocks(int worker) const {
  auto it = workers_.find(worker);
  return it == workers_.end() ? 0 : it->second.index.size();
}

}  // namespace pkv::router
