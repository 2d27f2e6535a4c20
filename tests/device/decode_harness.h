// Test harness for the CUDA decode routes: builds a random paged KV cache with a non-contiguous
// block table, runs a plan through the engine (workspace poisoned, outputs poisoned) and compares
// every output element and LSE with ReferenceDecodeAttention. FP8 KV cases quantize the same
// random K/V into FP8 pages and compare with ReferenceDecodeAttentionFp8 (tight) and with the
// 16-bit reference of the unquantized K/V (the accuracy bound). Needs a GPU.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "kernels/attention/fp8_kv.h"
#include "kernels/attention/kv_layout.h"
#include "kernels/decode/decode_launch.h"
#include "kernels/decode/plan.h"

namespace pkv::decode::testing {

struct Case {
  KvShape shape{32, 8, 128, 16};
  DType dtype = DType::kFloat16;
  KvCacheDtype kv_dtype = KvCacheDtype::kAuto;  // FP8: shape.kv_elem_bytes is set to 1 for it
  std::vector<int32_t> lengths;
  Route route = Route::kWorkqueue;
  MergeMode merge = MergeMode::kInKernel;
  KernelConfig config;
  DeviceLimits limits{0, 0};  // {0, 0}: the GPU's own (QueryDeviceLimits)
  float q_scale = 1.f;        // larger values make the softmax peakier
  int32_t min_split_tokens = 128;
  bool page_prefix = true;  // plan with the host block table (DecodePlan::item_pids)
  std::string Name() const;
};

struct CompareResult {
  int64_t checked = 0;
  int64_t bad = 0;  // out of tolerance or NaN
  int64_t bad_lse = 0;
  double max_err = 0.0;
  std::string first_bad;
};

// One random problem on the host and the GPU. Not thread-safe.
class DecodeProblem {
 public:
  // Random Q/K/V in [-1, 1) (Q times case.q_scale) and a shuffled page pool with spare pages.
  DecodeProblem(const Case& c, std::mt19937& rng);
  ~DecodeProblem();
  DecodeProblem(const DecodeProblem&) = delete;
  DecodeProblem& operator=(const DecodeProblem&) = delete;

  // Plans c.route and runs it on `stream`, outputs poisoned first; returns the device outputs.
  absl::Status Run(const Case& c, cudaStream_t stream, std::vector<uint16_t>* out,
                   std::vector<float>* lse, DecodePlan* plan_out = nullptr);
  // Compares with the CPU reference of the same KV (computed once, lazily).
  CompareResult Compare(const std::vector<uint16_t>& out, const std::vector<float>& lse);
  // FP8 only: compares with the 16-bit reference of the K/V before quantization, within
  // |err| <= atol (outputs) and lse_atol (LSEs).
  CompareResult CompareUnquantized(const std::vector<uint16_t>& out, const std::vector<float>& lse,
                                   double atol, double lse_atol);

  // Replaces the lengths (within the pages already allocated per row) for graph-replay tests.
  void SetLengths(const std::vector<int32_t>& lengths);
  const std::vector<int32_t>& lengths() const { return lengths_; }
  const std::vector<int32_t>& page_indptr() const { return page_indptr_; }
  const std::vector<int32_t>& page_ids() const { return page_ids_; }
  int64_t out_elems() const { return out_elems_; }
  int64_t num_heads_total() const {
    return static_cast<int64_t>(lengths_.size()) * shape_.num_q_heads;
  }

  // Device views for tests that drive the launchers themselves.
  DecodeTensors tensors() const;
  void PoisonOutputs(cudaStream_t stream) const;
  absl::Status Download(cudaStream_t stream, std::vector<uint16_t>* out,
                        std::vector<float>* lse) const;

 private:
  void ComputeReference(bool unquantized, std::vector<float>* out, std::vector<float>* lse);
  CompareResult CompareWith(const std::vector<uint16_t>& out, const std::vector<float>& lse,
                            const std::vector<float>& ref_out, const std::vector<float>& ref_lse,
                            double atol, double rtol, double lse_atol) const;

  KvShape shape_;
  DType dtype_;
  KvCacheDtype kv_dtype_;
  Fp8KvScales scales_;
  std::vector<uint8_t> kq_, vq_;  // FP8 codes of k_, v_ (FP8 cases)
  std::vector<int32_t> lengths_;
  std::vector<int32_t> page_indptr_;
  std::vector<int32_t> page_ids_;
  std::vector<uint16_t> q_, k_, v_;  // fp16 or bf16 bits
  int64_t num_pages_ = 0;
  int64_t out_elems_ = 0;
  std::vector<float> ref_out_, ref_lse_, unq_out_, unq_lse_;
  bool ref_valid_ = false;
  bool unq_valid_ = false;
  void* d_q_ = nullptr;
  void* d_k_ = nullptr;
  void* d_v_ = nullptr;
  int32_t* d_pages_ = nullptr;
  void* d_out_ = nullptr;
  float* d_lse_ = nullptr;
};

// Workspace for plans of up to `max_rows` rows: laid out by capacity, poisoned (0xFF: NaN
// partials) except the ticket counters, which start at zero.
class Workspace {
 public:
  Workspace(int32_t max_rows, const KvShape& shape, const DeviceLimits& limits,
            const PlanOptions& options);
  ~Workspace();
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;
  const WorkspaceLayout& layout() const { return layout_; }
  const PlanSizes& capacity() const { return capacity_; }
  void* device() const { return device_; }
  uint8_t* image() const { return image_; }  // pinned host image of the plan
  // Fills the image from `plan` (REQUIRES: it fits the capacity).
  absl::Status Fill(const DecodePlan& plan);
  // True when every ticket counter is back to zero.
  bool CountersAreZero() const;

 private:
  PlanSizes capacity_;
  WorkspaceLayout layout_;
  KvShape shape_;
  void* device_ = nullptr;
  uint8_t* image_ = nullptr;
};

absl::StatusOr<DeviceLimits> LimitsFor(const Case& c);

}  // namespace pkv::decode::testing
