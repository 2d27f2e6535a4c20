// The paged KV-cache layout shared by the CPU reference, the CUDA decode routes and the model
// runtimes (DESIGN.md, "Decode engine contract").
//
// Per layer, K and V are each one array  [num_pages][num_kv_heads][page_size][head_dim]  of the
// cache's element type. Token t of a row lives in page  page_ids[page_indptr[row] + t / page_size]
// at slot  t % page_size. A row's pages are listed in a CSR block table and are in no particular
// order: the cache is never repacked. Keeping [page][head] outermost makes one (page, head) a
// contiguous page_size*head_dim run, so a work item for one KV head streams whole 16-byte vectors.
//
// GQA: query head q uses KV head q / group_size(), group_size = num_q_heads / num_kv_heads.
//
// FP8 KV (kernels/attention/fp8_kv.h): the same layout of uint8 codes (E4M3 or E5M2,
// kernels/common/fp8.h) with one float scale per (layer, K or V): the value of code c is
// Fp8ToFloat(c) * scale. Half the bytes of fp16 pages, so twice the tokens for the same memory.
#pragma once

#include <cstdint>

namespace pkv {

struct KvShape {
  int32_t num_q_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t page_size = 16;
  int32_t kv_elem_bytes = 2;  // bytes of one cached K or V element: 2 (fp16/bf16) or 1 (FP8)

  int32_t group_size() const { return num_q_heads / num_kv_heads; }
  // Elements of one (page, kv head) run and of one whole page.
  int64_t head_page_elems() const { return static_cast<int64_t>(page_size) * head_dim; }
  int64_t page_elems() const { return head_page_elems() * num_kv_heads; }
};

// The block table of a batch, CSR over rows. Host or device pointers depending on the user.
// REQUIRES: page_indptr[0] == 0, non-decreasing; row r holds at least ceil(lengths[r]/page_size)
// pages; lengths[r] >= 0 (a row of length 0 attends to nothing and gets a zero output).
struct BlockTableView {
  const int32_t* page_indptr = nullptr;  // [num_rows + 1]
  const int32_t* page_ids = nullptr;     // [page_indptr[num_rows]]
  const int32_t* lengths = nullptr;      // [num_rows] real KV tokens N*_i of each row
  int32_t num_rows = 0;
};

// One layer's K and V arrays, each [num_pages][num_kv_heads][page_size][head_dim].
template <typename T>
struct PagedKvView {
  T* k = nullptr;
  T* v = nullptr;
  int64_t num_pages = 0;
  KvShape shape;

  // Element offset of (page, kv_head, slot, 0) in k or v.
  int64_t Offset(int64_t page, int32_t kv_head, int32_t slot) const {
    return (page * shape.num_kv_heads + kv_head) * shape.head_page_elems() +
           static_cast<int64_t>(slot) * shape.head_dim;
  }
};

}  // namespace pkv
