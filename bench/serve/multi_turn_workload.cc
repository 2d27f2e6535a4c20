// The multi_turn workload: conversations that resend their whole history each turn.
#include <deque>
#include <map>

#include "absl/strings/str_cat.h"
#include "bench/serve/rng.h"
#include "bench/serve/workload_kinds.h"

namespace pkv::serve_bench {
namespace {

class MultiTurnWorkload : public Workload {
 public:
  explicit MultiTurnWorkload(const WorkloadOptions& options)
      : options_(options), system_(SystemPrompt(options)) {}

  // A ready conversation's next turn first (oldest first), else a new conversation.
  std::optional<RequestSpec> Next() override {
    if (!ready_.empty()) {
      const int64_t id = ready_.front();
      ready_.pop_front();
      return Turn(id, live_[id]);
    }
    if (options_.max_conversations > 0 &&
        static_cast<int>(live_.size()) >= options_.max_conversations) {
      return std::nullopt;
    }
    const int64_t id = next_conversation_++;
    Conversation& c = live_[id];
    c.history = system_;
    return Turn(id, c);
  }

  void OnReply(const RequestSpec& spec, const std::vector<uint32_t>& reply, bool ok) override {
    auto it = live_.find(spec.conversation);
    if (it == live_.end()) return;
    Conversation& c = it->second;
    c.history = spec.prompt;
    c.history.insert(c.history.end(), reply.begin(), reply.end());
    c.next_turn = spec.turn + 1;
    // Ends on failure, after the last turn, or when the next turn could not fit the context.
    const size_t next_min = c.history.size() + 2;  // >= 1 user token and 1 output token
    if (!ok || c.next_turn >= options_.turns ||
        (options_.max_context > 0 && next_min > options_.max_context)) {
      live_.erase(it);
      return;
    }
    ready_.push_back(spec.conversation);
  }

 private:
  struct Conversation {
    std::vector<uint32_t> history;  // the previous turn's prompt + its reply (system at first)
    int next_turn = 0;
  };

  RequestSpec Turn(int64_t id, Conversation& c) {
    Rng rng = Rng::For(options_.seed, kStreamTurn,
                       (static_cast<uint64_t>(id) << 16) | static_cast<uint64_t>(c.next_turn));
    RequestSpec spec;
    spec.conversation = id;
    spec.turn = c.next_turn;
    if (options_.session_ids) spec.session_id = absl::StrCat("conv-", id);
    spec.prompt = c.history;
    int user = DrawLength(options_.input, rng);
    if (options_.max_context > 0) {  // keep the history whole: shorten the new user turn
      const int room = static_cast<int>(options_.max_context) - static_cast<int>(c.history.size());
      user = std::max(1, std::min(user, room - 1));
    }
    const std::vector<uint32_t> tokens = DrawTokens(options_, user, rng);
    spec.prompt.insert(spec.prompt.end(), tokens.begin(), tokens.end());
    spec.max_tokens = static_cast<uint32_t>(DrawLength(options_.output, rng));
    FitToContext(options_.max_context, spec);
    return spec;
  }

  const WorkloadOptions options_;
  const std::vector<uint32_t> system_;
  std::map<int64_t, Conversation> live_;  // waiting for a reply, or in ready_
  std::deque<int64_t> ready_;             // conversations whose next turn can be sent
  int64_t next_conversation_ = 0;
};

}  // namespace

std::unique_ptr<Workload> MakeMultiTurnWorkload(const WorkloadOptions& options) {
  return std::make_unique<MultiTurnWorkload>(options);
}

}  // namespace pkv::serve_bench
