// Workloads of the serving benchmark: what each request asks (prompt token ids, max_tokens,
// session). Prompts are token ids drawn uniformly from [0, vocab_size) minus the model's EOS ids,
// a pure function of the seed and the request's position (bench/serve/rng.h), so two runs with
// one seed send the same prompts (multi-turn: the same user turns; the replayed replies are the
// model's). Output lengths are forced: every request sets ignore_eos and its max_tokens.
//
// Kinds (WorkloadOptions::kind):
//   sharegpt    independent requests, lognormal input and output lengths (below)
//   multi_turn  conversations of `turns` turns; turn t's prompt = turn t-1's prompt + its reply's
//               token ids + new user tokens; every turn of a conversation carries its session_id
//   long_doc    `num_docs` documents of `doc_tokens` tokens; request i asks a question (input
//               length) about document i % num_docs, with session_id "doc-<d>"
// Every kind starts each prompt with the same `system_prompt_tokens` tokens when that is > 0.
//
// Lengths ("ShareGPT-like"): lognormal with the given mean and log-space sigma, clamped to
// [1, max]; sigma 0 = fixed length. ShareGPT conversations have a heavy right tail of lengths
// (many short turns, a few very long ones), which a lognormal with sigma near 1 mimics; the
// defaults are shape only, not fitted to the dataset, and scaled to the model's context.
//
// Not thread-safe: the driver calls Next/OnReply from its one dispatcher thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace pkv::serve_bench {

enum class WorkloadKind { kShareGpt, kMultiTurn, kLongDoc };

struct LengthDistribution {
  double mean = 64;
  double sigma = 0.0;  // log-space standard deviation; 0 = always round(mean)
  int max = 1 << 20;
};

struct WorkloadOptions {
  WorkloadKind kind = WorkloadKind::kShareGpt;
  uint64_t seed = 0;
  uint32_t vocab_size = 0;              // from GetModelInfo; REQUIRES > eos ids
  uint32_t max_context = 0;             // prompt + max_tokens bound; 0 = unbounded
  std::vector<uint32_t> eos_token_ids;  // never drawn into a prompt
  LengthDistribution input;             // user tokens per request (or per turn / question)
  LengthDistribution output;            // max_tokens per request
  int system_prompt_tokens = 0;         // shared prefix of every prompt
  int turns = 4;                        // multi_turn: turns per conversation
  int max_conversations = 0;            // multi_turn: live at once; 0 = unbounded
  int num_docs = 4;                     // long_doc
  int doc_tokens = 512;                 // long_doc
  // Conversations and documents carry a session id (router affinity); false leaves placement to
  // the router's prefix index and load alone.
  bool session_ids = true;
};

absl::StatusOr<WorkloadKind> ParseWorkloadKind(const std::string& name);
const char* WorkloadKindName(WorkloadKind kind);

struct RequestSpec {
  std::vector<uint32_t> prompt;
  uint32_t max_tokens = 1;
  std::string session_id;     // empty = no affinity
  int64_t conversation = -1;  // multi_turn: which conversation; -1 otherwise
  int turn = 0;               // multi_turn: 0-based turn
};

class Workload {
 public:
  virtual ~Workload() = default;
  // The next request to send, or nullopt when none can be sent now (multi_turn: every live
  // conversation waits for its reply and max_conversations are live). Ask again after OnReply.
  virtual std::optional<RequestSpec> Next() = 0;
  // A request returned by Next finished; `reply` holds the token ids it streamed. A failed turn
  // ends its conversation.
  virtual void OnReply(const RequestSpec& spec, const std::vector<uint32_t>& reply, bool ok) {}
};

// Lognormal length with mean `d.mean` (mu = ln(mean) - sigma^2 / 2), rounded, clamped to
// [1, d.max]. Pure function of the rng state.
class Rng;
int DrawLength(const LengthDistribution& d, Rng& rng);

// `n` prompt tokens from `rng`: uniform over [0, vocab_size) minus the EOS ids.
std::vector<uint32_t> DrawTokens(const WorkloadOptions& options, int n, Rng& rng);

// The fixed shared prefix (`system_prompt_tokens` tokens; empty when 0), from the seed alone.
std::vector<uint32_t> SystemPrompt(const WorkloadOptions& options);

absl::StatusOr<std::unique_ptr<Workload>> MakeWorkload(const WorkloadOptions& options);

}  // namespace pkv::serve_bench
