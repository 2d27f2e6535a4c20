// Launchers of the CUDA decode routes. Every route of plan.h runs through LaunchDecode: one
// attention launch (the fused, split, workqueue and persistent kernels are one kernel reading
// different item lists) plus, under MergeMode::kSeparate or for bucketed-exact, merge launches.
//
// A step, as the worker runs it (see bench/kernels/ and tests/device/ for complete uses):
//   ConfigureDecodeKernels(config)                        once per process (sets smem limits)
//   limits = QueryDeviceLimits(device, shape, dtype, config)      once per process
//   layout = LayoutWorkspace(CapacityFor(max_rows, ...), shape, nullptr, nullptr)  once per bucket
//   cudaMalloc(workspace, layout.total_bytes); cudaMemset(counters region, 0)      once per bucket
//   each step: PlanDecode(...) -> LayoutWorkspace(capacity, shape, &plan, pinned_image)
//              UploadPlan(pinned_image, layout, workspace, stream)
//              LaunchDecode(plan, layout, tensors, workspace, config, scale, stream)
// UploadPlan + LaunchDecode may be captured in a CUDA graph when the plan is graph-sized
// (PlanOptions::capacity_rows): replaying it after re-planning into the same pinned image runs
// the new plan.
//
// Launchers take an explicit stream, allocate nothing, never synchronise, check the launch and
// return absl::Status. Not thread-safe with respect to the same workspace (one step at a time).
// The merge-ticket counters are reset by the kernels themselves, so they stay zero between
// launches as long as each launch runs to completion.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/attention/fp8_kv.h"
#include "kernels/decode/decode_params.h"
#include "kernels/decode/plan.h"
#include "kernels/decode/workspace.h"

namespace pkv::decode {

// Run-time variants of the attention kernel (no recompilation): the tile is warps * 16 tokens,
// the shared-memory ring holds `stages` tiles of K and V.
struct KernelConfig {
  int32_t warps = 4;        // 2, 4 or 8
  int32_t stages = 3;       // 2..kMaxStages
  int32_t l2_prefetch = 0;  // L2 prefetch-size hint on the K/V copies: 0, 128 or 256 bytes
};

// The configuration the worker runs for a KV cache dtype. FP8 pages: 8 warps, because a tile of
// FP8 codes is half the bytes and more instructions per byte (conversion) than a 16-bit one, so
// it needs twice the warps in flight. Measured on the H200's held-out grid at 3 stages (w8 vs w4,
// bench/results/2026-12-02-h200-fp8tune): every cell under 512 MiB (fp16 size) faster, none of
// them slower than 16-bit pages, which w4 FP8 was by up to 25%.
KernelConfig DefaultKernelConfig(KvCacheDtype kv_dtype);

// The configurations ChooseKernelConfig picks from for a KV dtype and head dim (the default
// first); the worker sizes its workspaces for all of them and drops one its GPU cannot fit (a
// ~196 KB ring on a ~100 KB consumer SM). 16-bit pages: w4s3, and w8s3 at head dim <= 128 (at 256
// its ring exceeds every GPU's shared memory); FP8 pages: w8s3, w4s3.
int32_t CandidateKernelConfigs(KvCacheDtype kv_dtype, int32_t head_dim, KernelConfig out[2]);

// The configuration for one step's batch (batch rows, coefficient of variation of their lengths).
// FP8 pages: w4s3 when batch >= kFp8W4MinBatch and len_cv >= kFp8W4MinCv, else w8s3. Why: w4s3
// runs 4 CTAs of half the tile per SM (528 slots on the H200, the same 16 warps), so many-row
// skewed batches, whose long rows set the step's tail, split finer and balance better; elsewhere
// the 8-warp tile's fewer barriers per byte win. 16-bit pages: w8s3 when batch <= k16W8MaxBatch
// (head dim <= 128), else w4s3: a one- or two-row step is a few items whose dependent chain
// (CTA start, page ids, the first K/V round trip, the combine) is the cost, and eight warps a
// CTA put two on each scheduler to overlap it. Constants fitted on calibration grids only: see
// decode_launch.cu.
KernelConfig ChooseKernelConfig(KvCacheDtype kv_dtype, int32_t head_dim, int32_t batch,
                                double len_cv);

// The caller's tensors for one layer (device pointers).
struct DecodeTensors {
  DType dtype = DType::kFloat16;  // q and out; also the pages' type when kv_dtype is kAuto
  KvCacheDtype kv_dtype = KvCacheDtype::kAuto;  // FP8: pages hold codes dequantized by kv_scales
  Fp8KvScales kv_scales;
  const void* q = nullptr;  // [num_rows][num_q_heads][head_dim]
  // [num_pages][num_kv_heads][page_size][head_dim]. REQUIRES num_pages * num_kv_heads *
  // page_size < 2^32 (the kernel's 32-bit row index): 256 GiB a cache at the smallest row, 64
  // bytes (head dim 64, FP8), more than any one GPU holds.
  const void* k_cache = nullptr;
  const void* v_cache = nullptr;
  const int32_t* page_ids = nullptr;  // device copy of the block table's page ids
  void* out = nullptr;                // [num_rows][num_q_heads][head_dim]
  float* lse = nullptr;               // [num_rows][num_q_heads] natural log, or nullptr
};

// Dynamic shared memory of one attention CTA (kv_elem_bytes: 2, or 1 for FP8 pages).
int64_t AttentionSmemBytes(int32_t head_dim, const KernelConfig& config, int32_t kv_elem_bytes = 2);

// Sets the dynamic shared-memory limit of every attention kernel for `config`. Call once per
// process (and again after changing config to a larger one). INVALID_ARGUMENT for a config
// outside the supported set, or one whose shared memory exceeds the device's per-block limit.
absl::Status ConfigureDecodeKernels(const KernelConfig& config);

// SM count and attention CTAs resident per SM for this shape, dtype and config (FP8 pages when
// shape.kv_elem_bytes == 1: the E4M3 kernel's occupancy, which E5M2's shares).
absl::StatusOr<DeviceLimits> QueryDeviceLimits(int device, const KvShape& shape, DType dtype,
                                               const KernelConfig& config);

// Copies the plan image (host memory, pinned for async copies; written by LayoutWorkspace in
// filling mode) into the workspace. Graph-sized plans copy the full capacity image so a captured
// copy node serves every plan.
absl::Status UploadPlan(const uint8_t* image, const WorkspaceLayout& layout, bool graph_sized,
                        void* workspace, cudaStream_t stream);

// Enqueues the plan's launches on `stream`. `scale` is the softmax scale (1/sqrt(head_dim)
// usually). REQUIRES: the workspace holds this plan (UploadPlan earlier on the same stream) and
// was laid out by `layout`; its counters region was zeroed once when it was allocated.
// pdl: launch as a programmatic dependent of the stream's previous kernel (pdl.cuh; sm_90 code
// only, see gpu::PdlUsable): the kernels read their plan and block table before waiting for it,
// so neither may be written by a kernel of the same step.
absl::Status LaunchDecode(const DecodePlan& plan, const WorkspaceLayout& layout,
                          const DecodeTensors& tensors, void* workspace, const KernelConfig& config,
                          float scale, cudaStream_t stream, bool pdl = false);

}  // namespace pkv::decode
