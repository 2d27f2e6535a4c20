// A ModelBackend that runs another one and injects the test faults of test_faults.h into its
// steps, so that the engine's own step has no fault checks. The worker installs it only when
// --test_fault names a fault; a production worker runs its backend directly.
//
// What each fault does to Step() (steps counted from 1; a fault makes the engine fail every
// request with INTERNAL and the worker exit 1, exactly like a real backend error):
//   fail_kv_alloc_after:N  the first step with a row of the (N+1)-th distinct sequence fails with
//                          RESOURCE_EXHAUSTED before running: the allocator of a device that
//                          places a new sequence's K/V when it is first written ran out
//   slow_step_ms:X         every step sleeps X ms before running (long-lived streams in tests)
//   hang_step_after:N      step N+1 blocks forever: a wedged GPU (gRPC still answers)
//   fail_forward_after:N   step N+1 runs, then reports INTERNAL: a failed forward pass
// Forward() and the model's description pass through unchanged.
//
// Thread-safety: like every backend, owned and called by the scheduler thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "worker/engine/test_faults.h"
#include "worker/model/model_backend.h"

namespace pkv {

class FaultInjectingBackend : public ModelBackend {
 public:
  // REQUIRES: inner != nullptr.
  FaultInjectingBackend(std::unique_ptr<ModelBackend> inner, TestFaults faults);

  const ModelConfig& config() const override { return inner_->config(); }
  int32_t page_size() const override { return inner_->page_size(); }
  int64_t num_kv_pages() const override { return inner_->num_kv_pages(); }
  std::string backend_name() const override { return inner_->backend_name(); }
  std::string dtype_name() const override { return inner_->dtype_name(); }
  KvCacheDtype kv_cache_dtype() const override { return inner_->kv_cache_dtype(); }
  bool batch_invariant() const override { return inner_->batch_invariant(); }

  absl::Status Step(absl::Span<const BatchRow> rows, std::vector<SampleResult>* samples,
                    StepStats* stats) override;
  absl::Status Forward(absl::Span<const BatchRow> rows, std::vector<float>* logits) override {
    return inner_->Forward(rows, logits);
  }

 private:
  // True when `rows` bring the sequence that fail_kv_alloc_after refuses; records new ones.
  bool KvAllocationFails(absl::Span<const BatchRow> rows);

  const std::unique_ptr<ModelBackend> inner_;
  const TestFaults faults_;
  int64_t steps_run_ = 0;                    // Step() calls that reached the inner backend
  absl::flat_hash_set<uint64_t> sequences_;  // distinct sequence ids stepped (fail_kv_alloc_after)
};

}  // namespace pkv
