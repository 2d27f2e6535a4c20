// Launcher of the prefill-attention kernel and its one run-time -> compile-time dispatch.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "kernels/prefill/prefill_attention.cuh"
#include "kernels/prefill/prefill_kernel_table.h"
#include "kernels/prefill/prefill_launch.h"

namespace pkv::prefill {
namespace {

constexpr int kHeadDims[] = {64, 128};
constexpr DType kDTypes[] = {DType::kFloat16, DType::kBFloat16};

constexpr KvCacheDtype kKvDTypes[] = {KvCacheDtype::kAuto, KvCacheDtype::kFp8E4M3,
                                      KvCacheDtype::kFp8E5M2};

absl::StatusOr<const void*> SelectKernel(int32_t head_dim, DType dtype, KvCacheDtype kv,
                                         bool split) {
  if (dtype != DType::kFloat16 && dtype != DType::kBFloat16) {
    return absl::InvalidArgumentError("prefill: unsupported dtype; supported: fp16, bf16");
  }
  const bool fp8 = IsFp8(kv);
  switch (head_dim) {
    case 64:
      return fp8 ? internal::PrefillKernelFp8D64(dtype, kv, split)
                 : internal::PrefillKernelD64(dtype, split);
    case 128:
      return fp8 ? internal::PrefillKernelFp8D128(dtype, kv, split)
                 : internal::PrefillKernelD128(dtype, split);
    default:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("prefill: head_dim ", head_dim, " is not compiled; supported: 64, 128"));
}

}  // namespace

bool PrefillHeadDimSupported(int32_t head_dim) { return head_dim == 64 || head_dim == 128; }

int64_t PrefillSmemBytes(int32_t head_dim) {
  return int64_t{dev::kBlockM + 4 * dev::kBlockN} * head_dim * 2;
}

absl::Status ConfigurePrefillKernels() {
  for (int d : kHeadDims) {
    for (DType t : kDTypes) {
      for (KvCacheDtype kv : kKvDTypes) {
        for (bool split : {false, true}) {
          PKV_ASSIGN_OR_RETURN(const void* k, SelectKernel(d, t, kv, split));
          PKV_CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(k,
                                                        cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                        static_cast<int>(PrefillSmemBytes(d))));
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::Status LaunchPrefillAttention(const PrefillArgs& a, cudaStream_t stream) {
  const bool split = a.split_partials != nullptr;
  PKV_ASSIGN_OR_RETURN(const void* kernel, SelectKernel(a.head_dim, a.dtype, a.kv_dtype, split));
  if (split) {
    PKV_RETURN_IF_ERROR(ValidatePrefillSplitRule(a.split_rule));
    if (a.split_rule.group * a.num_kv_heads != a.num_q_heads) {
      return absl::InvalidArgumentError(absl::StrCat("prefill: split tiles planned for group ",
                                                     a.split_rule.group, ", but H_q ",
                                                     a.num_q_heads, " / H_kv ", a.num_kv_heads));
    }
    if (a.positions == nullptr || a.num_tokens < 0 || a.split_token_begin < 0) {
      return absl::InvalidArgumentError(
          "prefill: split tiles need positions, num_tokens >= 0 and split_token_begin >= 0");
    }
  }
  const bool fp8 = IsFp8(a.kv_dtype);
  if (fp8 && !(a.kv_scales.k > 0.f && a.kv_scales.v > 0.f)) {
    return absl::InvalidArgumentError(absl::StrCat("prefill: FP8 KV scales k=", a.kv_scales.k,
                                                   " v=", a.kv_scales.v, " must be positive"));
  }
  if (a.num_kv_heads <= 0 || a.num_q_heads <= 0 || a.num_q_heads % a.num_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat("prefill: H_q ", a.num_q_heads,
                                                   " is not a multiple of H_kv ", a.num_kv_heads));
  }
  if (a.page_size < 1 || a.page_size > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("prefill: page_size ", a.page_size, " is not in [1, 1024]"));
  }
  if (a.q == nullptr || a.k_cache == nullptr || a.v_cache == nullptr || a.page_ids == nullptr ||
      a.tiles == nullptr || a.out == nullptr) {
    return absl::InvalidArgumentError("prefill: null tensor pointer");
  }
  if (a.num_tiles <= 0) return absl::OkStatus();
  if (a.num_tiles > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("prefill: ", a.num_tiles, " query tiles exceed the grid limit 65535"));
  }
  dev::PrefillParams p;
  p.q = a.q;
  p.k_cache = a.k_cache;
  p.v_cache = a.v_cache;
  p.page_ids = a.page_ids;
  p.tiles = a.tiles;
  p.out = a.out;
  p.num_q_heads = a.num_q_heads;
  p.num_kv_heads = a.num_kv_heads;
  p.group = a.num_q_heads / a.num_kv_heads;
  p.page_size = a.page_size;
  p.scale_log2 = a.scale * static_cast<float>(M_LOG2E);
  p.k_scale = fp8 ? a.kv_scales.k : 1.f;
  p.v_scale = fp8 ? a.kv_scales.v : 1.f;
  p.part_o = static_cast<float*>(a.split_partials);
  p.max_splits = a.split_rule.max_splits;
  p.part_token_base = a.split_token_begin;
  // (m, l) pairs after every O: PrefillSplitPartialBytes.
  p.part_ml = split ? p.part_o + int64_t{a.num_tokens} * a.num_q_heads * p.max_splits * a.head_dim
                    : nullptr;
  void* args[] = {&p};
  // x = q head (the G heads sharing a KV head run side by side and share its tiles in L2; split
  // tiles: the KV head, its G heads packed in the tile's rows), y = tile (heaviest first).
  PKV_CUDA_RETURN_IF_ERROR(
      cudaLaunchKernel(kernel, dim3(split ? a.num_kv_heads : a.num_q_heads, a.num_tiles),
                       dim3(dev::kThreads), args, PrefillSmemBytes(a.head_dim), stream));
  if (!split || a.num_tokens == 0) return absl::OkStatus();
  const void* merge = a.head_dim == 64 ? internal::PrefillSplitMergeKernelD64(a.dtype)
                                       : internal::PrefillSplitMergeKernelD128(a.dtype);
  const int64_t pairs = int64_t{a.num_tokens} * a.num_q_heads;  // a warp each, 4 a CTA
  const int32_t* positions = a.positions;
  int32_t num_tokens = a.num_tokens, min_split = a.split_rule.min_split_tokens;
  void* merge_args[] = {&p, &positions, &num_tokens, &min_split};
  PKV_CUDA_RETURN_IF_ERROR(cudaLaunchKernel(merge, dim3(static_cast<uint32_t>((pairs + 3) / 4)),
                                            dim3(128), merge_args, 0, stream));
  return absl::OkStatus();
}

}  // namespace pkv::prefill
