// Internal to bench/serve: the workload kinds behind MakeWorkload and what they share.
#pragma once

#include <cstdint>
#include <memory>

#include "bench/serve/workload.h"

namespace pkv::serve_bench {

// Rng streams (Rng::For's second key), one per kind of draw.
inline constexpr uint64_t kStreamSystemPrompt = 1;
inline constexpr uint64_t kStreamRequest = 2;   // index: request number (sharegpt, long_doc)
inline constexpr uint64_t kStreamDocument = 3;  // index: document number
inline constexpr uint64_t kStreamTurn = 4;      // index: (conversation << 16) | turn

// Shrinks max_tokens, then the prompt's tail, so prompt + max_tokens <= max_context (0 = no bound).
void FitToContext(uint32_t max_context, RequestSpec& spec);

std::unique_ptr<Workload> MakeShareGptWorkload(const WorkloadOptions& options);
std::unique_ptr<Workload> MakeMultiTurnWorkload(const WorkloadOptions& options);
std::unique_ptr<Workload> MakeLongDocWorkload(const WorkloadOptions& options);

}  // namespace pkv::serve_bench
