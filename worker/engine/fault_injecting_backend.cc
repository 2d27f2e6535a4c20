#include "worker/engine/fault_injecting_backend.h"

#include <chrono>
#include <thread>
#include <utility>

#include "common/log.h"

namespace pkv {

FaultInjectingBackend::FaultInjectingBackend(std::unique_ptr<ModelBackend> inner, TestFaults faults)
    : inner_(std::move(inner)), faults_(faults) {}

bool FaultInjectingBackend::KvAllocationFails(absl::Span<const BatchRow> rows) {
  if (faults_.fail_kv_alloc_after < 0) return false;
  for (const BatchRow& row : rows) {
    if (sequences_.contains(row.sequence_id)) continue;
    if (static_cast<int64_t>(sequences_.size()) >= faults_.fail_kv_alloc_after) return true;
    sequences_.insert(row.sequence_id);
  }
  return false;
}

absl::Status FaultInjectingBackend::Step(absl::Span<const BatchRow> rows,
                                         std::vector<SampleResult>* samples, StepStats* stats) {
  if (KvAllocationFails(rows)) {
    return absl::ResourceExhaustedError("test fault: KV page allocation failed");
  }
  if (faults_.slow_step_ms > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(faults_.slow_step_ms));
  }
  if (faults_.hang_step_after >= 0 && steps_run_ >= faults_.hang_step_after) {
    PKV_LOG(WARNING) << "test fault: hanging the scheduler thread";
    while (true) std::this_thread::sleep_for(std::chrono::hours(1));
  }
  absl::Status status = inner_->Step(rows, samples, stats);
  if (status.ok() && faults_.fail_forward_after >= 0 && steps_run_ >= faults_.fail_forward_after) {
    status = absl::InternalError("test fault: forward pass failed");
  }
  ++steps_run_;
  return status;
}

}  // namespace pkv
