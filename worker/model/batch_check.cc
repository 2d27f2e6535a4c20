#include "worker/model/batch_check.h"

#include <limits>

#include "absl/strings/str_cat.h"

namespace pkv {

absl::Status ValidateBatchRows(const ModelConfig& c, int32_t page_size, int64_t num_kv_pages,
                               absl::Span<const BatchRow> rows, bool need_params) {
  int64_t total_tokens = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    const BatchRow& row = rows[r];
    auto bad = [r](absl::string_view what) {
      return absl::InvalidArgumentError(absl::StrCat("batch row ", r, ": ", what));
    };
    if (row.num_tokens < 1 || row.tokens == nullptr) return bad("feeds no tokens");
    if (row.start_pos < 0) return bad("negative start_pos");
    const int64_t end = static_cast<int64_t>(row.start_pos) + row.num_tokens;
    if (end > c.max_position_embeddings) {
      return bad(absl::StrCat("position ", end - 1, " is past max_position_embeddings ",
                              c.max_position_embeddings));
    }
    const int64_t needed = (end + page_size - 1) / page_size;
    if (row.num_pages < needed || row.pages == nullptr) {
      return bad(absl::StrCat("has ", row.num_pages, " pages, needs ", needed));
    }
    for (int64_t p = 0; p < needed; ++p) {
      if (row.pages[p] < 0 || row.pages[p] >= num_kv_pages) {
        return bad(
            absl::StrCat("page id ", row.pages[p], " is out of range [0, ", num_kv_pages, ")"));
      }
    }
    for (int32_t i = 0; i < row.num_tokens; ++i) {
      if (row.tokens[i] < 0 || row.tokens[i] >= c.vocab_size) {
        return bad(absl::StrCat("token id ", row.tokens[i], " is outside the vocabulary"));
      }
    }
    if (row.sample && need_params && row.params == nullptr) return bad("samples without params");
    if (row.sample && row.sample_index < 0) return bad("negative sample_index");
    total_tokens += row.num_tokens;
  }
  if (total_tokens > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError("batch feeds too many tokens");
  }
  return absl::OkStatus();
}

}  // namespace pkv
