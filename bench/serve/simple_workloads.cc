// The stateless workload kinds: sharegpt (independent requests) and long_doc (questions about a
// few shared documents).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "bench/serve/rng.h"
#include "bench/serve/workload_kinds.h"

namespace pkv::serve_bench {
namespace {

class ShareGptWorkload : public Workload {
 public:
  explicit ShareGptWorkload(const WorkloadOptions& options)
      : options_(options), system_(SystemPrompt(options)) {}

  std::optional<RequestSpec> Next() override {
    Rng rng = Rng::For(options_.seed, kStreamRequest, next_++);
    RequestSpec spec;
    spec.prompt = system_;
    const std::vector<uint32_t> user = DrawTokens(options_, DrawLength(options_.input, rng), rng);
    spec.prompt.insert(spec.prompt.end(), user.begin(), user.end());
    spec.max_tokens = static_cast<uint32_t>(DrawLength(options_.output, rng));
    FitToContext(options_.max_context, spec);
    return spec;
  }

 private:
  const WorkloadOptions options_;
  const std::vector<uint32_t> system_;
  uint64_t next_ = 0;
};

class LongDocWorkload : public Workload {
 public:
  explicit LongDocWorkload(const WorkloadOptions& options) : options_(options) {
    const std::vector<uint32_t> system = SystemPrompt(options);
    for (int d = 0; d < options.num_docs; ++d) {
      Rng rng = Rng::For(options.seed, kStreamDocument, static_cast<uint64_t>(d));
      std::vector<uint32_t> doc = system;
      const std::vector<uint32_t> body = DrawTokens(options, options.doc_tokens, rng);
      doc.insert(doc.end(), body.begin(), body.end());
      docs_.push_back(std::move(doc));
    }
  }

  std::optional<RequestSpec> Next() override {
    const uint64_t i = next_++;
    const int d = static_cast<int>(i % docs_.size());
    Rng rng = Rng::For(options_.seed, kStreamRequest, i);
    RequestSpec spec;
    spec.prompt = docs_[d];
    const std::vector<uint32_t> q = DrawTokens(options_, DrawLength(options_.input, rng), rng);
    spec.prompt.insert(spec.prompt.end(), q.begin(), q.end());
    spec.max_tokens = static_cast<uint32_t>(DrawLength(options_.output, rng));
    if (options_.session_ids) spec.session_id = absl::StrCat("doc-", d);
    FitToContext(options_.max_context, spec);
    return spec;
  }

 private:
  const WorkloadOptions options_;
  std::vector<std::vector<uint32_t>> docs_;  // [num_docs], each system prompt + doc_tokens
  uint64_t next_ = 0;
};

}  // namespace

void FitToContext(uint32_t max_context, RequestSpec& spec) {
  if (max_context == 0) return;
  if (spec.prompt.size() >= max_context) spec.prompt.resize(max_context - 1);
  const uint32_t room = max_context - static_cast<uint32_t>(spec.prompt.size());
  spec.max_tokens = std::clamp<uint32_t>(spec.max_tokens, 1, room);
}

std::unique_ptr<Workload> MakeShareGptWorkload(const WorkloadOptions& options) {
  return std::make_unique<ShareGptWorkload>(options);
}

std::unique_ptr<Workload> MakeLongDocWorkload(const WorkloadOptions& options) {
  return std::make_unique<LongDocWorkload>(options);
}

}  // namespace pkv::serve_bench
