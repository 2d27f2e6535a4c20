#include "worker/model/cpu_step.h"

#include <utility>

#include "common/status_macros.h"

namespace pkv {

absl::Status SampleRows(absl::Span<const BatchRow> rows, const std::vector<float>& logits,
                        int64_t vocab_size, SamplerScratch* scratch,
                        std::vector<SampleResult>* samples) {
  int64_t s = 0;
  for (const BatchRow& row : rows) {
    if (!row.sample) continue;
    SampleResult result;
    PKV_RETURN_IF_ERROR(SampleToken(absl::MakeConstSpan(&logits[s * vocab_size], vocab_size),
                                    *row.params, row.sample_index, &result, scratch));
    samples->push_back(std::move(result));
    ++s;
  }
  return absl::OkStatus();
}

StepStats CpuStepStats(absl::Span<const BatchRow> rows) {
  StepStats stats;
  stats.decode_route = "cpu-reference";
  stats.decode_launches = 0;
  for (const BatchRow& row : rows) {
    if (row.num_tokens == 1 && row.start_pos > 0) {
      ++stats.num_decode_rows;
    } else {
      stats.num_prefill_tokens += row.num_tokens;
    }
  }
  return stats;
}

}  // namespace pkv
