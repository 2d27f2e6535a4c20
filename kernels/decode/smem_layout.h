// Dynamic shared-memory layout of one decode-attention CTA, used by the kernel and by the host
// launcher to size it. A tile is 16 tokens per warp; `stages` tiles of K and V are in flight.
//   ring  [stages][K, V][tile tokens][head_dim] elements of kv_elem_bytes, 16-byte chunks of a
//         token row XOR-swizzled by (row & 7) so ldmatrix reads of 8 rows hit 8 different bank
//         groups (FP8 rows: fp8_convert.cuh's swizzles)
//   q     [8][head_dim + 8]: the group's query rows (rows >= G are zero); +8 pads the row stride
//         off a multiple of 128 bytes for conflict-free ldmatrix
//   pids  int32[stages * tile tokens]: page ids of the first `stages` tiles (page size >= 1)
//   misc  int32[4]: the merge ticket
// After the ring is drained, the cross-warp combine ([warps][8][head_dim + 4] fp32 plus m, l)
// and the in-kernel merge (kMergeSmemBytes) reuse the ring; both fit in two stages.
#pragma once

#include <cstdint>

#include "kernels/decode/fast_divmod.h"

namespace pkv::decode {

struct AttentionSmem {
  int32_t head_dim;
  int32_t warps;
  int32_t stages;
  int32_t kv_elem_bytes = 2;  // 2: fp16/bf16 pages; 1: FP8 pages (half the ring)

  PKV_HOST_DEVICE int32_t tile_tokens() const { return warps * 16; }
  PKV_HOST_DEVICE int32_t tile_bytes() const { return warps * 16 * head_dim * kv_elem_bytes; }
  PKV_HOST_DEVICE int32_t q_offset() const { return stages * 2 * tile_bytes(); }
  PKV_HOST_DEVICE int32_t q_row_elems() const { return head_dim + 8; }
  PKV_HOST_DEVICE int32_t pid_offset() const { return q_offset() + 8 * q_row_elems() * 2; }
  PKV_HOST_DEVICE int32_t pid_capacity() const { return stages * tile_tokens(); }
  PKV_HOST_DEVICE int32_t misc_offset() const { return pid_offset() + pid_capacity() * 4; }
  PKV_HOST_DEVICE int32_t total_bytes() const { return misc_offset() + 16; }
};

}  // namespace pkv::decode
