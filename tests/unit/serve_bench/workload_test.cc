// Workload generators: multi-turn prompts extend the previous turn exactly, the system prompt is
// one shared prefix, long_doc questions share their document, prompts avoid EOS and fit the
// context, and the seed fixes everything.
#include "bench/serve/workload.h"

#include <algorithm>
#include <set>

#include "bench/serve/rng.h"
#include "gtest/gtest.h"

namespace pkv::serve_bench {
namespace {

WorkloadOptions Options(WorkloadKind kind) {
  WorkloadOptions o;
  o.kind = kind;
  o.seed = 11;
  o.vocab_size = 512;
  o.max_context = 1024;
  o.eos_token_ids = {511};
  o.input = {24, 0.5, 1 << 20};
  o.output = {8, 0.5, 1 << 20};
  o.system_prompt_tokens = 40;
  o.turns = 3;
  return o;
}

bool StartsWith(const std::vector<uint32_t>& v, const std::vector<uint32_t>& prefix) {
  return v.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), v.begin());
}

std::unique_ptr<Workload> Make(const WorkloadOptions& o) {
  auto w = MakeWorkload(o);
  EXPECT_TRUE(w.ok()) << w.status();
  return std::move(*w);
}

TEST(ServeBenchWorkloadTest, SharedSystemPromptIsIdentical) {
  const WorkloadOptions o = Options(WorkloadKind::kShareGpt);
  const std::vector<uint32_t> system = SystemPrompt(o);
  ASSERT_EQ(system.size(), 40u);
  auto w = Make(o);
  std::set<std::vector<uint32_t>> suffixes;
  for (int i = 0; i < 50; ++i) {
    const RequestSpec spec = *w->Next();
    ASSERT_TRUE(StartsWith(spec.prompt, system));
    ASSERT_GT(spec.prompt.size(), system.size());
    suffixes.insert(std::vector<uint32_t>(spec.prompt.begin() + 40, spec.prompt.end()));
    for (uint32_t id : spec.prompt) ASSERT_TRUE(id < 511) << id;  // no EOS, inside the vocab
    EXPECT_GE(spec.max_tokens, 1u);
    EXPECT_TRUE(spec.session_id.empty());
  }
  EXPECT_EQ(suffixes.size(), 50u);  // the user parts differ
}

TEST(ServeBenchWorkloadTest, MultiTurnExtendsThePreviousTurnExactly) {
  WorkloadOptions o = Options(WorkloadKind::kMultiTurn);
  o.max_conversations = 1;
  auto w = Make(o);
  const RequestSpec t0 = *w->Next();
  EXPECT_EQ(t0.turn, 0);
  EXPECT_TRUE(StartsWith(t0.prompt, SystemPrompt(o)));
  EXPECT_FALSE(w->Next().has_value());  // the only conversation waits for its reply
  const std::vector<uint32_t> reply0 = {5, 6, 7, 8};
  w->OnReply(t0, reply0, true);
  const RequestSpec t1 = *w->Next();
  EXPECT_EQ(t1.conversation, t0.conversation);
  EXPECT_EQ(t1.session_id, t0.session_id);
  EXPECT_EQ(t1.turn, 1);
  std::vector<uint32_t> history = t0.prompt;
  history.insert(history.end(), reply0.begin(), reply0.end());
  ASSERT_TRUE(StartsWith(t1.prompt, history));
  EXPECT_GT(t1.prompt.size(), history.size());  // new user tokens follow
  const std::vector<uint32_t> reply1 = {9, 10};
  w->OnReply(t1, reply1, true);
  const RequestSpec t2 = *w->Next();
  history = t1.prompt;
  history.insert(history.end(), reply1.begin(), reply1.end());
  ASSERT_TRUE(StartsWith(t2.prompt, history));
  w->OnReply(t2, {1}, true);  // the last of 3 turns: the next request is a new conversation
  const RequestSpec next = *w->Next();
  EXPECT_NE(next.conversation, t0.conversation);
  EXPECT_EQ(next.turn, 0);
  EXPECT_NE(next.session_id, t0.session_id);
}

TEST(ServeBenchWorkloadTest, MultiTurnFailedTurnEndsItsConversation) {
  WorkloadOptions o = Options(WorkloadKind::kMultiTurn);
  auto w = Make(o);
  const RequestSpec a = *w->Next();
  w->OnReply(a, {}, false);
  const RequestSpec b = *w->Next();
  EXPECT_NE(b.conversation, a.conversation);
}

TEST(ServeBenchWorkloadTest, MultiTurnStaysInsideTheContext) {
  WorkloadOptions o = Options(WorkloadKind::kMultiTurn);
  o.max_context = 200;
  o.turns = 100;
  o.max_conversations = 1;
  auto w = Make(o);
  int turns = 0;
  std::optional<RequestSpec> spec = w->Next();
  int64_t conversation = spec->conversation;
  while (spec && spec->conversation == conversation) {
    ASSERT_LE(spec->prompt.size() + spec->max_tokens, 200u);
    w->OnReply(*spec, std::vector<uint32_t>(spec->max_tokens, 3), true);
    spec = w->Next();
    ++turns;
  }
  EXPECT_GT(turns, 1);
  EXPECT_LT(turns, 100);  // ended when the history filled the context
}

TEST(ServeBenchWorkloadTest, LongDocQuestionsShareTheirDocument) {
  WorkloadOptions o = Options(WorkloadKind::kLongDoc);
  o.num_docs = 3;
  o.doc_tokens = 100;
  auto w = Make(o);
  std::vector<RequestSpec> specs;
  for (int i = 0; i < 6; ++i) specs.push_back(*w->Next());
  for (int i = 0; i < 3; ++i) {
    const std::vector<uint32_t> doc(specs[i].prompt.begin(), specs[i].prompt.begin() + 140);
    EXPECT_TRUE(StartsWith(specs[i + 3].prompt, doc));
    EXPECT_EQ(specs[i].session_id, specs[i + 3].session_id);
    EXPECT_TRUE(StartsWith(specs[i].prompt, SystemPrompt(o)));
  }
  EXPECT_NE(std::vector<uint32_t>(specs[0].prompt.begin() + 40, specs[0].prompt.begin() + 140),
            std::vector<uint32_t>(specs[1].prompt.begin() + 40, specs[1].prompt.begin() + 140));
}

TEST(ServeBenchWorkloadTest, SeedFixesPrompts) {
  WorkloadOptions o = Options(WorkloadKind::kShareGpt);
  auto a = Make(o), b = Make(o);
  o.seed = 12;
  auto c = Make(o);
  const RequestSpec sa = *a->Next();
  EXPECT_EQ(sa.prompt, b->Next()->prompt);
  EXPECT_NE(sa.prompt, c->Next()->prompt);
}

TEST(ServeBenchWorkloadTest, LengthsFollowTheLognormalMean) {
  Rng rng(5);
  double sum = 0;
  constexpr int kN = 20000;
  for (int i = 0; i < kN; ++i) sum += DrawLength({200, 1.0, 1 << 20}, rng);
  EXPECT_NEAR(sum / kN / 200, 1.0, 0.05);  // lognormal sigma 1: sd of the mean ~1.5%
  EXPECT_EQ(DrawLength({17, 0, 100}, rng), 17);
  EXPECT_EQ(DrawLength({170, 0, 100}, rng), 100);
}

TEST(ServeBenchWorkloadTest, RejectsBadOptions) {
  WorkloadOptions o = Options(WorkloadKind::kShareGpt);
  o.vocab_size = 1;
  EXPECT_FALSE(MakeWorkload(o).ok());
  EXPECT_FALSE(ParseWorkloadKind("chat").ok());
  EXPECT_EQ(*ParseWorkloadKind("long_doc"), WorkloadKind::kLongDoc);
}

}  // namespace
}  // namespace pkv::serve_bench
