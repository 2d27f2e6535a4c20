// The host half of one CUDA model step, plain C++ (no CUDA include) so it is unit-tested on any
// machine: validates a batch exactly as the CPU backend does, puts its tokens in the order the GPU
// runs them, and writes the per-step staging image that one host-to-device copy uploads.
//
// Token order: decode rows (one fed token) first, in batch order, then prefill rows in batch order.
// So the decode engine sees its rows' queries as one dense [num_decode_rows][H_q][D] block at the
// start of the q buffer, and the prefill kernel's rows follow.
//
// Staging image (one buffer; every region 16-byte aligned; offsets from LayoutStaging):
//   header          int32[8]   {num_tokens, num_decode_rows, num_sampled, num_tiles, 0...}
//   token_ids       int32[cap tokens]  FeedbackTokenId(k) (< 0) for a feedback row: the token is
//                                      sample k of the previous launched step, which the
//                                      embedding reads from the device's sampling results
//   positions       int32[cap tokens]
//   kv_slots        int32[cap tokens]  page * page_size + offset; -1 for graph padding
//   token_page_base int32[cap tokens]  the token's row's first page-id entry; -1 for padding
//   sample_token    int32[cap sampled] token index whose logits each sampled row uses
//   sample_params   SampleRowParams[cap sampled]
//   prefill_tiles   PrefillTile[cap tiles]
//   page_ids        int32[cap pages]   decode rows' block tables, then prefill rows'
// page_ids is last, so a step copies only [0, page_ids + used pages) even when the image is laid
// out for a CUDA-graph bucket's fixed capacity.
//
// Graph padding: a decode-only step replayed from a bucket's graph is padded to the bucket size
// with rows that feed token 0 at position 0, write no KV and are never sampled (the sampling
// kernel reads num_sampled from the header).
// Thread-safety: StepBuilder is not thread-safe (the backend owns one, on the scheduler thread).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/model/sampling_types.h"
#include "kernels/prefill/prefill_plan.h"
#include "kernels/prefill/prefill_split_plan.h"
#include "worker/model/model_backend.h"
#include "worker/model/model_config.h"

namespace pkv::cuda_backend {

// CUDA-graph batch-size buckets for decode-only steps: these sizes below max_rows, then max_rows
// itself, so every batch the backend accepts has a bucket.
inline constexpr int32_t kGraphBuckets[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};

// The bucket sizes for `max_rows` (ascending, last == max_rows).
std::vector<int32_t> GraphBuckets(int32_t max_rows);
// The smallest bucket >= num_rows, or 0 when num_rows is not in [1, max_rows].
int32_t GraphBucketFor(int32_t num_rows, int32_t max_rows);

// A staged token id that stands for sample k of the previous launched step (BatchRow::feedback);
// the embedding kernel resolves it on the device (EmbedNormArgs::feedback_ids).
constexpr int32_t FeedbackTokenId(int32_t k) { return -1 - k; }

struct StagingCaps {
  int32_t tokens = 0;
  int32_t sampled = 0;
  int32_t tiles = 0;
  int64_t page_ids = 0;
};

struct StagingLayout {
  int64_t header = 0;
  int64_t token_ids = 0;
  int64_t positions = 0;
  int64_t kv_slots = 0;
  int64_t token_page_base = 0;
  int64_t sample_token = 0;
  int64_t sample_params = 0;
  int64_t prefill_tiles = 0;
  int64_t page_ids = 0;
  int64_t total_bytes = 0;  // capacity of the whole image
  // Bytes a step must copy when it uses `num_page_ids` block-table entries.
  int64_t UsedBytes(int64_t num_page_ids) const { return page_ids + num_page_ids * 4; }
};
inline constexpr int32_t kHeaderInts = 8;

StagingLayout LayoutStaging(const StagingCaps& caps);

struct StepLimits {
  int32_t max_tokens = 0;    // tokens one step may feed
  int32_t max_rows = 0;      // rows one step may hold
  int64_t max_page_ids = 0;  // block-table entries one step may reference
};

// What the builder needs to know about the model and the cache.
struct StepShape {
  int32_t vocab_size = 0;
  int32_t max_position = 0;  // max_position_embeddings
  int32_t page_size = 0;
  int64_t num_kv_pages = 0;
  bool plan_prefill_tiles = false;  // the tensor-core prefill kernel runs this model's prefill rows
  // Uniform attention (kv_attention.h): the prefill kernel runs decode rows too, each as a
  // one-query tile, so every row gets tiles (decode rows' first, in token order).
  bool tiles_for_every_row = false;
  // With tiles_for_every_row: split tiles (prefill_split_plan.h: "Split attention at fixed key
  // positions") in windows of kPrefillSplitWindowTokens tokens; decode-only steps in the fixed
  // per-row layout (PlanSplitDecodeSlots) so graph buckets capture fixed launches.
  bool split_tiles = false;
  prefill::PrefillSplitRule split_rule;
};

// One step on the host. Vectors keep their capacity between steps (no allocation once warm).
struct StepHost {
  int32_t num_tokens = 0;       // T (before graph padding)
  int32_t num_decode_rows = 0;  // Bd: tokens [0, Bd) are the decode rows'
  int32_t num_sampled = 0;      // S
  int32_t padded_tokens = 0;    // T after graph padding (== T for eager steps)
  std::vector<int32_t> token_ids, positions, kv_slots, token_page_base;  // [padded_tokens]
  std::vector<int32_t> decode_lengths;      // [Bd] KV length after this step's write
  std::vector<int32_t> decode_page_indptr;  // [Bd + 1] into page_ids
  std::vector<prefill::PrefillRow> prefill_rows;
  std::vector<prefill::PrefillRow> tile_rows;  // scratch: the rows the tiles are planned over
  std::vector<prefill::PrefillTile> tiles;
  // Split tiles (StepShape::split_tiles): the windows of `tiles`, and whether they are the fixed
  // per-row layout (split_rule.max_splits tiles a row; PadForGraph extends it).
  std::vector<prefill::PrefillSplitWindow> split_windows;
  bool split_slots = false;
  prefill::PrefillSplitRule split_rule;
  std::vector<prefill::PrefillRow> split_scratch;
  std::vector<int32_t> page_ids;
  std::vector<int32_t> sample_token;                // [S] in batch row order
  std::vector<gpu::SampleRowParams> sample_params;  // [S]
  std::vector<int32_t> sample_top_logprobs;         // [S] entries the caller wants back
  bool any_logprobs = false;
  bool decode_only = false;          // every row feeds one token
  std::vector<int32_t> row_q_begin;  // [batch rows] scratch: each row's first token index

  StagingCaps Caps() const;  // exact caps of this step (eager layout)
};

class StepBuilder {
 public:
  StepBuilder(const StepShape& shape, const StepLimits& limits);

  // Validates `rows` (INVALID_ARGUMENT naming the row and the problem, as the CPU backend; plus
  // the limits above and top_logprobs <= kMaxTopLogprobs) and fills `out`. need_params: rows that
  // sample must carry SamplingParams (Step), or need not (Forward).
  absl::Status Build(absl::Span<const BatchRow> rows, bool need_params, StepHost* out) const;

  // Pads a decode-only step to `bucket` rows (graph replay). REQUIRES: host.decode_only and
  // host.num_tokens <= bucket. A step with tiles (tiles_for_every_row) gets one per padding row
  // (split slots: a row's slots): one query at position 0 reading the first block-table entry,
  // its output never used.
  static void PadForGraph(int32_t bucket, StepHost* host);

  // Uniform attention on or off (StepShape::tiles_for_every_row; the backend's deterministic
  // mode). Takes effect at the next Build.
  void set_tiles_for_every_row(bool enabled) { shape_.tiles_for_every_row = enabled; }
  // Split tiles on or off (StepShape::split_tiles). Takes effect at the next Build.
  void set_split_tiles(bool enabled) { shape_.split_tiles = enabled; }
  const StepShape& shape() const { return shape_; }

  // Writes the step into `image` laid out by `layout`; returns the bytes to copy.
  // REQUIRES: the step fits the layout's caps.
  static int64_t FillStaging(const StepHost& host, const StagingLayout& layout, uint8_t* image);

  const StepLimits& limits() const { return limits_; }

 private:
  absl::Status ValidateRow(const BatchRow& row, size_t r, bool need_params) const;

  StepShape shape_;
  StepLimits limits_;
};

// The CPU sampler's parameter checks (pkv::ValidateSamplingParams in sampler.h) plus the GPU's
// top_logprobs bound.
absl::Status ValidateCudaSamplingParams(const SamplingParams& p);

}  // namespace pkv::cuda_backend
