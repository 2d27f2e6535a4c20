// The one flat parameter struct of the decode-attention and merge kernels, filled by the launcher
// (decode_launch.cu) from a plan, its workspace layout and the caller's tensors. Plain C++ (no
// CUDA types) so host code and tests can include it.
//
// Numerics: scores are s = scale * q.k. Kernels keep the online-softmax state in base 2
// (scale * log2(e) is applied to the fp32 q.k products), so partial LSEs in the workspace are
// log2(sum_t 2^(s_t * log2 e)) = lse_natural * log2(e). The LSE the engine returns to callers
// (`lse` below) is in natural-log units, like ReferenceDecodeAttention's. A (row, head) that read
// no token has LSE -inf and output 0; the merge gives such partials weight 0 (never NaN).
#pragma once

#include <cstdint>

#include "kernels/decode/fast_divmod.h"
#include "kernels/decode/plan.h"

namespace pkv::decode {

enum class DType : int32_t { kFloat16 = 0, kBFloat16 = 1 };
inline const char* DTypeName(DType t) { return t == DType::kFloat16 ? "fp16" : "bf16"; }

struct DecodeParams {
  // Field order: what a CTA reads before its first global load (the launch slice, the item and
  // page-id arrays, the ring depth, the page division) comes first, in the first 64 bytes of the
  // constant bank, so the kernel's start misses fewer constant-cache lines (decode5).

  // Plan (device copies in the workspace).
  const WorkItem* items = nullptr;           // [item capacity]
  const int32_t* item_pids = nullptr;        // [item capacity][kItemPagePrefix], or nullptr
  const int32_t* cta_item_indptr = nullptr;  // [grid + 1] for persistent launches, else nullptr
  const int32_t* header = nullptr;           // {num_items, num_ctas, num_merges, num_rows}

  // This launch's slice of the plan: items (or merge entries) [first, first + count). When
  // count_from_header is set (graph-sized plans) the count is read from the header instead.
  int32_t first = 0;
  int32_t count = 0;
  int32_t count_from_header = 0;
  int32_t stages = 0;  // shared-memory ring depth (tiles in flight), 2..kMaxStages

  int32_t page_size = 0;  // 1..128
  FastDivmod page_div;    // division by page_size

  // Tensors (device memory, element type `dtype`).
  const void* q = nullptr;            // [num_rows][num_q_heads][head_dim]
  const int32_t* page_ids = nullptr;  // [block-table entries]; item.page_base indexes a row's run
  const void* k_cache = nullptr;      // [num_pages][num_kv_heads][page_size][head_dim] of
  const void* v_cache = nullptr;      //   `dtype`, or of FP8 codes (k_scale, v_scale)
  int32_t num_q_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t group = 0;  // num_q_heads / num_kv_heads, 1..8
  // num_kv_heads * page_size: token rows one page spans over all KV heads. The kernel addresses
  // a K/V row as the 32-bit index page_id * page_rows + kv_head * page_size + slot times the row
  // bytes (REQUIRES fewer than 2^32 rows a cache, see DecodeTensors).
  uint32_t page_rows = 0;
  float scale_log2 = 0.f;  // softmax scale * log2(e)
  float k_scale = 1.f;     // FP8 pages: dequantization scales (fp8_kv.h); 16-bit pages: 1
  float v_scale = 1.f;
  int32_t l2_prefetch = 0;      // K/V loads' L2 prefetch-size hint in bytes: 0, 128 or 256
  int32_t merge_in_kernel = 0;  // 1: the last split of a pair merges; 0: a merge launch does
  int32_t head_dim = 0;         // 64, 128, 256 (the kernels are compiled per head_dim)

  void* out = nullptr;                 // [num_rows][num_q_heads][head_dim]
  float* lse = nullptr;                // [num_rows][num_q_heads], natural log; nullptr: not written
  const MergeEntry* merges = nullptr;  // [merge capacity]
  float* partial_lse = nullptr;        // [num_partials][group], log2 units
  float* partial_o = nullptr;          // [num_partials][group][head_dim], normalised output
  int32_t* counters = nullptr;         // [num_rows * num_kv_heads] merge tickets, zero at rest
};

inline constexpr int kMaxStages = 8;

}  // namespace pkv::decode
