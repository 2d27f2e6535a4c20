// Launchers of the decode routes and the one run-time -> compile-time kernel dispatch.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "kernels/common/pdl.cuh"
#include "kernels/decode/decode_launch.h"
#include "kernels/decode/kernel_table.h"
#include "kernels/decode/merge.cuh"
#include "kernels/decode/smem_layout.h"

namespace pkv::decode {
namespace {

constexpr int kHeadDims[] = {64, 128, 256};
constexpr DType kDTypes[] = {DType::kFloat16, DType::kBFloat16};
constexpr KvCacheDtype kKvDtypes[] = {KvCacheDtype::kAuto, KvCacheDtype::kFp8E4M3,
                                      KvCacheDtype::kFp8E5M2};
int32_t KvElemBytes(KvCacheDtype kv) { return IsFp8(kv) ? 1 : 2; }
constexpr int kMergeThreads = 128;

// The single dispatch point: (head_dim, dtype, kv dtype) -> compiled kernels.
absl::StatusOr<internal::KernelPair> SelectKernels(int32_t head_dim, DType dtype,
                                                   KvCacheDtype kv = KvCacheDtype::kAuto) {
  if (dtype != DType::kFloat16 && dtype != DType::kBFloat16) {
    return absl::InvalidArgumentError("decode: unsupported dtype; supported: fp16, bf16");
  }
  const bool fp8 = IsFp8(kv);
  const Fp8Format f = fp8 ? Fp8FormatOf(kv) : Fp8Format::kE4M3;
  internal::KernelPair k;
  switch (head_dim) {
    case 64:
      k = internal::KernelsD64(dtype);
      if (fp8) k.attention = internal::Fp8AttentionD64(dtype, f);
      return k;
    case 128:
      k = internal::KernelsD128(dtype);
      if (fp8) k.attention = internal::Fp8AttentionD128(dtype, f);
      return k;
    case 256:
      k = internal::KernelsD256(dtype);
      if (fp8) k.attention = internal::Fp8AttentionD256(dtype, f);
      return k;
    default:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("decode: head_dim ", head_dim, " is not compiled; supported: 64, 128, 256"));
}

absl::Status ValidateConfig(const KernelConfig& c) {
  if ((c.warps != 2 && c.warps != 4 && c.warps != 8) || c.stages < 2 || c.stages > kMaxStages ||
      (c.l2_prefetch != 0 && c.l2_prefetch != 128 && c.l2_prefetch != 256)) {
    return absl::InvalidArgumentError(
        absl::StrCat("decode: kernel config warps=", c.warps, " stages=", c.stages,
                     " l2_prefetch=", c.l2_prefetch, "; supported: warps 2, 4, 8, stages 2..",
                     kMaxStages, ", l2_prefetch 0, 128, 256"));
  }
  return absl::OkStatus();
}

}  // namespace

KernelConfig DefaultKernelConfig(KvCacheDtype kv_dtype) {
  KernelConfig c;
  if (IsFp8(kv_dtype)) c.warps = 8;
  return c;
}

// FP8 pages' second configuration: 4 warps, 3 stages (ChooseKernelConfig's many-row ragged
// batches).
constexpr KernelConfig kFp8ManyRowsConfig{4, 3, 0};
// 16-bit pages' second configuration: 8 warps, 3 stages (ChooseKernelConfig's one- and two-row
// steps), whose ring needs head dim <= 128.
constexpr KernelConfig k16FewRowsConfig{8, 3, 0};
constexpr int32_t k16W8MaxHeadDim = 128;

int32_t CandidateKernelConfigs(KvCacheDtype kv_dtype, int32_t head_dim, KernelConfig out[2]) {
  out[0] = DefaultKernelConfig(kv_dtype);
  if (IsFp8(kv_dtype)) {
    out[1] = kFp8ManyRowsConfig;
    return 2;
  }
  if (head_dim > k16W8MaxHeadDim) return 1;
  out[1] = k16FewRowsConfig;
  return 2;
}

// FP8 w4s3 region of ChooseKernelConfig, fitted on the calibration grid only (seed 20260622, H200,
// routes workqueue/persistent/split; bench/kernels/config_rule.py fit) by exhaustive search over
// B in {1, 2, 4, ..., 256} x CV in {0, 0.1, ..., 3} for the lowest geometric-mean regret (a cell's
// best route under the chosen config over its best under either): 1.0044 (worst 1.094, zipf-B64)
// against 1.0211 (worst 1.212, bimodal-B32) for always-w8s3. Worked example: bimodal B = 32 (CV
// 1.63): w4s3 124.0 us vs w8s3 150.2 us; uniform B = 8 (CV 0.36): w8s3; every B <= 8 batch and
// every equal-length batch: w8s3, which is within 1.7% of w4s3 on all of them.
constexpr int32_t kFp8W4MinBatch = 16;
constexpr double kFp8W4MinCv = 0.4;
// 16-bit w8s3 region, fitted on the calibration grid only (H200, bf16, configs w4s3/w8s2/w8s3;
// bench/kernels/config_rule16.py, results/2026-12-05-h200-call20): w8s3 when B <= 2 gives a
// geomean regret of 1.0079 (worst 1.062) against 1.0207 (worst 1.140) for always-w4s3; on the
// held-out grid 1.0069 vs 1.0203, no cell more than 1.005x w4s3's time. Worked example:
// bucketed-B1-N4096 12.9 us (w8s3) vs 14.5 (w4s3); zipf-B4 49.1 vs 41.0, hence the bound.
constexpr int32_t k16W8MaxBatch = 2;

KernelConfig ChooseKernelConfig(KvCacheDtype kv_dtype, int32_t head_dim, int32_t batch,
                                double len_cv) {
  if (IsFp8(kv_dtype)) {
    return batch >= kFp8W4MinBatch && len_cv >= kFp8W4MinCv ? kFp8ManyRowsConfig
                                                            : DefaultKernelConfig(kv_dtype);
  }
  if (head_dim <= k16W8MaxHeadDim && batch <= k16W8MaxBatch) return k16FewRowsConfig;
  return DefaultKernelConfig(kv_dtype);
}

int64_t AttentionSmemBytes(int32_t head_dim, const KernelConfig& config, int32_t kv_elem_bytes) {
  return AttentionSmem{head_dim, config.warps, config.stages, kv_elem_bytes}.total_bytes();
}

absl::Status ConfigureDecodeKernels(const KernelConfig& config) {
  PKV_RETURN_IF_ERROR(ValidateConfig(config));
  int device = 0, optin = 0;
  PKV_CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  PKV_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  for (int d : kHeadDims) {
    for (KvCacheDtype kv : kKvDtypes) {
      const int64_t bytes = AttentionSmemBytes(d, config, KvElemBytes(kv));
      if (bytes > optin) continue;  // this head dim cannot run this config here; Launch rejects it
      for (DType t : kDTypes) {
        PKV_ASSIGN_OR_RETURN(internal::KernelPair k, SelectKernels(d, t, kv));
        PKV_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(
            k.attention, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<DeviceLimits> QueryDeviceLimits(int device, const KvShape& shape, DType dtype,
                                               const KernelConfig& config) {
  PKV_RETURN_IF_ERROR(ValidateShape(shape));
  PKV_RETURN_IF_ERROR(ValidateConfig(config));
  const KvCacheDtype kv = shape.kv_elem_bytes == 1 ? KvCacheDtype::kFp8E4M3 : KvCacheDtype::kAuto;
  PKV_ASSIGN_OR_RETURN(internal::KernelPair k, SelectKernels(shape.head_dim, dtype, kv));
  DeviceLimits limits;
  PKV_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&limits.num_sms, cudaDevAttrMultiProcessorCount, device));
  const int64_t smem = AttentionSmemBytes(shape.head_dim, config, shape.kv_elem_bytes);
  PKV_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(
      k.attention, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  PKV_CUDA_RETURN_IF_ERROR(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &limits.ctas_per_sm, k.attention, config.warps * 32, smem));
  if (limits.ctas_per_sm < 1) {
    return absl::InvalidArgumentError(absl::StrCat("decode: config warps=", config.warps,
                                                   " stages=", config.stages, " needs ", smem,
                                                   " bytes of shared memory; no CTA fits an SM"));
  }
  return limits;
}

absl::Status UploadPlan(const uint8_t* image, const WorkspaceLayout& layout, bool graph_sized,
                        void* workspace, cudaStream_t stream) {
  // A graph-sized copy covers the whole capacity image (up to the first non-plan region), so the
  // captured copy node is valid for every plan of the bucket.
  const int64_t bytes = graph_sized ? layout.partial_lse : layout.upload_bytes;
  PKV_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(workspace, image, bytes, cudaMemcpyHostToDevice, stream));
  if (!graph_sized && layout.upload_pid_bytes > 0) {  // the items' page-id prefixes follow
    PKV_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(static_cast<uint8_t*>(workspace) + layout.item_pids,
                                             image + layout.item_pids, layout.upload_pid_bytes,
                                             cudaMemcpyHostToDevice, stream));
  }
  return absl::OkStatus();
}

absl::Status LaunchDecode(const DecodePlan& plan, const WorkspaceLayout& layout,
                          const DecodeTensors& t, void* workspace, const KernelConfig& config,
                          float scale, cudaStream_t stream, bool pdl) {
  PKV_RETURN_IF_ERROR(ValidateShape(plan.shape));
  PKV_RETURN_IF_ERROR(ValidateConfig(config));
  if (t.q == nullptr || t.k_cache == nullptr || t.v_cache == nullptr || t.page_ids == nullptr ||
      t.out == nullptr || workspace == nullptr) {
    return absl::InvalidArgumentError("decode: null tensor or workspace pointer");
  }
  if (IsFp8(t.kv_dtype) != (plan.shape.kv_elem_bytes == 1) ||
      (IsFp8(t.kv_dtype) && !(t.kv_scales.k > 0.f && t.kv_scales.v > 0.f))) {
    return absl::InvalidArgumentError(
        absl::StrCat("decode: kv dtype ", KvCacheDtypeName(t.kv_dtype), " with a plan for ",
                     plan.shape.kv_elem_bytes, "-byte pages, scales k=", t.kv_scales.k,
                     " v=", t.kv_scales.v, "; FP8 needs 1-byte pages and positive scales"));
  }
  PKV_ASSIGN_OR_RETURN(internal::KernelPair k,
                       SelectKernels(plan.shape.head_dim, t.dtype, t.kv_dtype));
  uint8_t* ws = static_cast<uint8_t*>(workspace);
  const KvShape& s = plan.shape;
  DecodeParams p;
  p.q = t.q;
  p.k_cache = t.k_cache;
  p.v_cache = t.v_cache;
  p.page_ids = t.page_ids;
  p.out = t.out;
  p.lse = t.lse;
  p.items = reinterpret_cast<const WorkItem*>(ws + layout.items);
  p.item_pids =
      plan.item_pids.empty() ? nullptr : reinterpret_cast<const int32_t*>(ws + layout.item_pids);
  p.merges = reinterpret_cast<const MergeEntry*>(ws + layout.merges);
  p.header = reinterpret_cast<const int32_t*>(ws + layout.header);
  p.partial_lse = reinterpret_cast<float*>(ws + layout.partial_lse);
  p.partial_o = reinterpret_cast<float*>(ws + layout.partial_o);
  p.counters = reinterpret_cast<int32_t*>(ws + layout.counters);
  p.count_from_header = plan.graph_sized ? 1 : 0;
  p.num_q_heads = s.num_q_heads;
  p.num_kv_heads = s.num_kv_heads;
  p.group = s.group_size();
  p.head_dim = s.head_dim;
  p.page_size = s.page_size;
  p.page_div = FastDivmod::Make(static_cast<uint32_t>(s.page_size));
  p.page_rows = static_cast<uint32_t>(s.num_kv_heads) * static_cast<uint32_t>(s.page_size);
  p.scale_log2 = scale * static_cast<float>(M_LOG2E);
  p.k_scale = IsFp8(t.kv_dtype) ? t.kv_scales.k : 1.f;
  p.v_scale = IsFp8(t.kv_dtype) ? t.kv_scales.v : 1.f;
  p.stages = config.stages;
  p.merge_in_kernel = plan.merge == MergeMode::kInKernel ? 1 : 0;
  p.l2_prefetch = config.l2_prefetch;
  const int64_t smem = AttentionSmemBytes(s.head_dim, config, s.kv_elem_bytes);
  for (const LaunchSpec& l : plan.launches) {
    if (l.grid <= 0) continue;
    p.first = l.first;
    p.count = l.count;
    void* args[] = {&p};
    if (l.kind == LaunchSpec::Kind::kAttention) {
      p.cta_item_indptr =
          l.persistent ? reinterpret_cast<const int32_t*>(ws + layout.cta_indptr) : nullptr;
      PKV_CUDA_RETURN_IF_ERROR(gpu::LaunchMaybePdl(
          k.attention, dim3(l.grid), dim3(config.warps * 32), smem, stream, pdl, args));
    } else {
      p.cta_item_indptr = nullptr;
      PKV_CUDA_RETURN_IF_ERROR(gpu::LaunchMaybePdl(k.merge, dim3(l.grid), dim3(kMergeThreads),
                                                   dev::kMergeSmemBytes, stream, pdl, args));
    }
  }
  return absl::OkStatus();
}

}  // namespace pkv::decode
