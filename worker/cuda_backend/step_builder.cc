#include "worker/cuda_backend/step_builder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/model/sampler.h"

namespace pkv::cuda_backend {
namespace {

constexpr int64_t kAlign = 16;

int64_t Region(int64_t* cursor, int64_t bytes) {
  const int64_t offset = (*cursor + kAlign - 1) / kAlign * kAlign;
  *cursor = offset + bytes;
  return offset;
}

template <typename T>
void Put(uint8_t* image, int64_t offset, const std::vector<T>& v) {
  if (!v.empty()) std::memcpy(image + offset, v.data(), v.size() * sizeof(T));
}

gpu::SampleRowParams ToRowParams(const SamplingParams* p, int32_t sample_index) {
  gpu::SampleRowParams r;
  if (p == nullptr) return r;  // Forward(): greedy, no log-probabilities
  r.temperature = p->temperature;
  r.top_k = p->top_k;
  r.top_p = p->top_p;
  r.min_p = p->min_p;
  r.seed = p->seed;
  r.sample_index = sample_index;
  r.logprobs = p->logprobs ? 1 : 0;
  r.top_logprobs = p->logprobs ? p->top_logprobs : 0;
  return r;
}

}  // namespace

std::vector<int32_t> GraphBuckets(int32_t max_rows) {
  std::vector<int32_t> out;
  for (int32_t b : kGraphBuckets) {
    if (b < max_rows) out.push_back(b);
  }
  if (max_rows > 0) out.push_back(max_rows);
  return out;
}

int32_t GraphBucketFor(int32_t num_rows, int32_t max_rows) {
  if (num_rows <= 0 || num_rows > max_rows) return 0;
  for (int32_t b : kGraphBuckets) {
    if (b >= num_rows) return std::min(b, max_rows);
  }
  return max_rows;
}

StagingLayout LayoutStaging(const StagingCaps& caps) {
  StagingLayout l;
  int64_t cur = 0;
  const int64_t t = caps.tokens, s = caps.sampled;
  l.header = Region(&cur, kHeaderInts * 4);
  l.token_ids = Region(&cur, t * 4);
  l.positions = Region(&cur, t * 4);
  l.kv_slots = Region(&cur, t * 4);
  l.token_page_base = Region(&cur, t * 4);
  l.sample_token = Region(&cur, s * 4);
  l.sample_params = Region(&cur, s * int64_t{sizeof(gpu::SampleRowParams)});
  l.prefill_tiles = Region(&cur, int64_t{caps.tiles} * int64_t{sizeof(prefill::PrefillTile)});
  l.page_ids = Region(&cur, caps.page_ids * 4);
  l.total_bytes = (cur + kAlign - 1) / kAlign * kAlign;
  return l;
}

StagingCaps StepHost::Caps() const {
  StagingCaps c;
  c.tokens = padded_tokens;
  c.sampled = static_cast<int32_t>(sample_token.size());
  c.tiles = static_cast<int32_t>(tiles.size());
  c.page_ids = static_cast<int64_t>(page_ids.size());
  return c;
}

absl::Status ValidateCudaSamplingParams(const SamplingParams& p) {
  PKV_RETURN_IF_ERROR(pkv::ValidateSamplingParams(p));  // the CPU sampler's checks
  if (p.logprobs && p.top_logprobs > gpu::kMaxTopLogprobs) {
    return absl::InvalidArgumentError(absl::StrCat("sampling: top_logprobs ", p.top_logprobs,
                                                   " exceeds the CUDA backend's limit ",
                                                   gpu::kMaxTopLogprobs));
  }
  return absl::OkStatus();
}

StepBuilder::StepBuilder(const StepShape& shape, const StepLimits& limits)
    : shape_(shape), limits_(limits) {}

absl::Status StepBuilder::ValidateRow(const BatchRow& row, size_t r, bool need_params) const {
  auto bad = [r](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("batch row ", r, ": ", what));
  };
  // A feedback row's one token is a sample of the previous launched step, still on the device
  // (ModelBackend::Launch validated its index).
  const bool feedback = row.feedback >= 0;
  if (row.num_tokens < 1 || (row.tokens == nullptr && !feedback)) return bad("feeds no tokens");
  if (feedback && row.num_tokens != 1) return bad("feeds a sample of the previous step and more");
  if (row.start_pos < 0) return bad("negative start_pos");
  const int64_t end = static_cast<int64_t>(row.start_pos) + row.num_tokens;
  if (end > shape_.max_position) {
    return bad(absl::StrCat("position ", end - 1, " is past max_position_embeddings ",
                            shape_.max_position));
  }
  const int64_t needed = (end + shape_.page_size - 1) / shape_.page_size;
  if (row.num_pages < needed || row.pages == nullptr) {
    return bad(absl::StrCat("has ", row.num_pages, " pages, needs ", needed));
  }
  for (int64_t p = 0; p < needed; ++p) {
    if (row.pages[p] < 0 || row.pages[p] >= shape_.num_kv_pages) {
      return bad(absl::StrCat("page id ", row.pages[p], " is out of range [0, ",
                              shape_.num_kv_pages, ")"));
    }
  }
  for (int32_t i = 0; i < row.num_tokens && !feedback; ++i) {
    if (row.tokens[i] < 0 || row.tokens[i] >= shape_.vocab_size) {
      return bad(absl::StrCat("token id ", row.tokens[i], " is outside the vocabulary"));
    }
  }
  if (row.sample && need_params && row.params == nullptr) return bad("samples without params");
  if (row.sample && row.sample_index < 0) return bad("negative sample_index");
  if (row.sample && need_params) {
    absl::Status st = ValidateCudaSamplingParams(*row.params);
    if (!st.ok()) return bad(st.message());
  }
  return absl::OkStatus();
}

absl::Status StepBuilder::Build(absl::Span<const BatchRow> rows, bool need_params,
                                StepHost* out) const {
  int64_t total_tokens = 0, total_pages = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    PKV_RETURN_IF_ERROR(ValidateRow(rows[r], r, need_params));
    total_tokens += rows[r].num_tokens;
    total_pages +=
        (int64_t{rows[r].start_pos} + rows[r].num_tokens + shape_.page_size - 1) / shape_.page_size;
  }
  if (static_cast<int64_t>(rows.size()) > limits_.max_rows) {
    return absl::InvalidArgumentError(absl::StrCat("batch has ", rows.size(),
                                                   " rows; the CUDA backend holds at most ",
                                                   limits_.max_rows, " (--max_running)"));
  }
  if (total_tokens > limits_.max_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("batch feeds ", total_tokens,
                                                   " tokens; the CUDA backend takes at most ",
                                                   limits_.max_tokens, " per step"));
  }
  if (total_pages > limits_.max_page_ids) {
    return absl::InvalidArgumentError(absl::StrCat("batch references ", total_pages,
                                                   " block-table entries; at most ",
                                                   limits_.max_page_ids, " per step"));
  }
  StepHost& h = *out;
  for (auto* v : {&h.token_ids, &h.positions, &h.kv_slots, &h.token_page_base, &h.decode_lengths,
                  &h.decode_page_indptr, &h.page_ids, &h.sample_token, &h.sample_top_logprobs}) {
    v->clear();
  }
  h.prefill_rows.clear();
  h.tiles.clear();
  h.sample_params.clear();
  h.decode_page_indptr.push_back(0);
  h.any_logprobs = false;
  h.num_decode_rows = 0;
  std::vector<int32_t>& q_begin = h.row_q_begin;
  q_begin.assign(rows.size(), 0);
  const int32_t ps = shape_.page_size;
  for (int pass = 0; pass < 2; ++pass) {  // decode rows first, then prefill rows
    for (size_t r = 0; r < rows.size(); ++r) {
      const BatchRow& row = rows[r];
      const bool decode = row.num_tokens == 1;
      if (decode != (pass == 0)) continue;
      const int32_t end = row.start_pos + row.num_tokens;
      const int32_t page_base = static_cast<int32_t>(h.page_ids.size());
      h.page_ids.insert(h.page_ids.end(), row.pages, row.pages + (end + ps - 1) / ps);
      q_begin[r] = static_cast<int32_t>(h.token_ids.size());
      for (int32_t i = 0; i < row.num_tokens; ++i) {
        const int32_t pos = row.start_pos + i;
        h.token_ids.push_back(row.feedback >= 0 ? FeedbackTokenId(row.feedback) : row.tokens[i]);
        h.positions.push_back(pos);
        h.kv_slots.push_back(row.pages[pos / ps] * ps + pos % ps);
        h.token_page_base.push_back(page_base);
      }
      if (decode) {
        ++h.num_decode_rows;
        h.decode_lengths.push_back(end);
        h.decode_page_indptr.push_back(static_cast<int32_t>(h.page_ids.size()));
      } else {
        h.prefill_rows.push_back({q_begin[r], row.num_tokens, row.start_pos, page_base});
      }
    }
  }
  for (size_t r = 0; r < rows.size(); ++r) {
    const BatchRow& row = rows[r];
    if (!row.sample) continue;
    const SamplingParams* p = need_params ? row.params : nullptr;
    h.sample_token.push_back(q_begin[r] + row.num_tokens - 1);
    h.sample_params.push_back(ToRowParams(p, row.sample_index));
    h.sample_top_logprobs.push_back(h.sample_params.back().top_logprobs);
    h.any_logprobs = h.any_logprobs || h.sample_params.back().logprobs != 0;
  }
  h.num_tokens = static_cast<int32_t>(h.token_ids.size());
  h.padded_tokens = h.num_tokens;
  h.num_sampled = static_cast<int32_t>(h.sample_token.size());
  h.decode_only = h.prefill_rows.empty();
  h.split_windows.clear();
  h.split_slots = false;
  h.split_rule = shape_.split_rule;
  if (shape_.plan_prefill_tiles && shape_.tiles_for_every_row) {
    // Decode rows as one-query prefill rows, in token order (their tokens come first).
    h.tile_rows.clear();
    for (int32_t i = 0; i < h.num_decode_rows; ++i) {
      h.tile_rows.push_back({i, 1, h.positions[i], h.token_page_base[i]});
    }
    h.tile_rows.insert(h.tile_rows.end(), h.prefill_rows.begin(), h.prefill_rows.end());
    if (!shape_.split_tiles) {
      PKV_RETURN_IF_ERROR(prefill::PlanPrefillTiles(h.tile_rows, &h.tiles));
    } else if (h.decode_only) {
      h.split_slots = true;
      PKV_RETURN_IF_ERROR(prefill::PlanSplitDecodeSlots(h.tile_rows, h.split_rule,
                                                        prefill::kPrefillSplitWindowTokens,
                                                        &h.tiles, &h.split_windows));
    } else {
      PKV_RETURN_IF_ERROR(prefill::PlanSplitPrefillWindows(
          h.tile_rows, h.split_rule, prefill::kPrefillSplitWindowTokens, &h.tiles, &h.split_windows,
          &h.split_scratch));
    }
  } else if (shape_.plan_prefill_tiles && !h.prefill_rows.empty()) {
    PKV_RETURN_IF_ERROR(prefill::PlanPrefillTiles(h.prefill_rows, &h.tiles));
  }
  return absl::OkStatus();
}

void StepBuilder::PadForGraph(int32_t bucket, StepHost* h) {
  const bool tiles = !h->tiles.empty() && !h->split_slots;
  if (h->split_slots && h->num_tokens < bucket) {  // each padding row takes its slots
    for (int32_t t = h->num_tokens; t < bucket; ++t) h->tile_rows.push_back({t, 1, 0, 0});
    // Valid by construction (one-query rows in token order, the builder's rule); the real rows'
    // slots stay as planned.
    const absl::Status planned = prefill::ExtendSplitDecodeSlots(h->tile_rows, h->split_rule,
                                                                 prefill::kPrefillSplitWindowTokens,
                                                                 &h->tiles, &h->split_windows);
    PKV_CHECK_MSG(planned.ok(), "split slots of a padded decode step");
  }
  for (int32_t t = h->num_tokens; t < bucket; ++t) {
    if (tiles) {  // the captured prefill launch has one tile per bucket row
      prefill::PrefillTile pad;
      pad.q_begin = t;
      pad.num_tokens = 1;
      h->tiles.push_back(pad);
    }
    h->token_ids.push_back(0);
    h->positions.push_back(0);
    h->kv_slots.push_back(-1);
    h->token_page_base.push_back(-1);
  }
  h->padded_tokens = std::max(bucket, h->num_tokens);
  // The LM head runs over the whole bucket: padding slots gather token 0 and are never sampled.
  while (static_cast<int32_t>(h->sample_token.size()) < bucket) {
    h->sample_token.push_back(0);
    h->sample_params.push_back(gpu::SampleRowParams{});
  }
}

int64_t StepBuilder::FillStaging(const StepHost& h, const StagingLayout& l, uint8_t* image) {
  const int32_t header[kHeaderInts] = {h.num_tokens,
                                       h.num_decode_rows,
                                       h.num_sampled,
                                       static_cast<int32_t>(h.tiles.size()),
                                       h.padded_tokens,
                                       0,
                                       0,
                                       0};
  std::memcpy(image + l.header, header, sizeof(header));
  Put(image, l.token_ids, h.token_ids);
  Put(image, l.positions, h.positions);
  Put(image, l.kv_slots, h.kv_slots);
  Put(image, l.token_page_base, h.token_page_base);
  Put(image, l.sample_token, h.sample_token);
  Put(image, l.sample_params, h.sample_params);
  Put(image, l.prefill_tiles, h.tiles);
  Put(image, l.page_ids, h.page_ids);
  return l.UsedBytes(static_cast<int64_t>(h.page_ids.size()));
}

}  // namespace pkv::cuda_backend
