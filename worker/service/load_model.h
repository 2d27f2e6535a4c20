// The model a pkv-worker serves, loaded from --model for --backend (CPU, CUDA, tensor-parallel):
// the backend, its tokenizer and the context limit the worker advertises. Start-up only.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "worker/engine/test_faults.h"
#include "worker/model/model_backend.h"
#include "worker/service/worker_options.h"
#include "worker/tokenizer/tokenizer.h"

namespace pkv {

struct LoadedModel {
  // Wrapped in a FaultInjectingBackend when `faults` set any (fault_injecting_backend.h).
  std::unique_ptr<ModelBackend> backend;
  std::unique_ptr<Tokenizer> tokenizer;
  int32_t max_context = 0;  // --max_model_len, else the model's max_position_embeddings
};

// Loads backend + tokenizer and checks that one sequence of max_context tokens fits the KV pool
// (RELIABILITY V4: refuse rather than silently clamp, so the advertised limit is always real).
// Errors say what to do next.
absl::StatusOr<LoadedModel> LoadModel(const WorkerOptions& options, const TestFaults& faults);

}  // namespace pkv
