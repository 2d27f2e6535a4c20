#include "worker/model/model_backend.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace pkv {

absl::Status ValidateFeedbackRows(absl::Span<const BatchRow> rows, int32_t previous_samples) {
  for (size_t r = 0; r < rows.size(); ++r) {
    const BatchRow& row = rows[r];
    if (row.feedback < 0) continue;
    if (row.num_tokens != 1) {
      return absl::InvalidArgumentError(absl::StrCat("batch row ", r, ": a feedback row feeds ",
                                                     row.num_tokens, " tokens; it feeds one"));
    }
    if (row.feedback >= previous_samples) {
      return absl::InvalidArgumentError(
          absl::StrCat("batch row ", r, ": feeds sample ", row.feedback,
                       " of the previous batch, which sampled ", previous_samples));
    }
  }
  return absl::OkStatus();
}

absl::Status ModelBackend::Launch(absl::Span<const BatchRow> rows, StepStats* stats) {
  if (launched_.size() >= kMaxLaunched) {
    return absl::FailedPreconditionError(
        absl::StrCat("Launch with ", launched_.size(), " batches unfinished"));
  }
  PKV_RETURN_IF_ERROR(ValidateFeedbackRows(rows, static_cast<int32_t>(latest_tokens_.size())));
  // Feedback rows get the sampled ids, which the synchronous Step() of the previous batch already
  // returned; a batch without them goes to Step() as it is.
  const bool feedback =
      std::any_of(rows.begin(), rows.end(), [](const BatchRow& row) { return row.feedback >= 0; });
  if (feedback) {
    resolved_rows_.assign(rows.begin(), rows.end());
    resolved_tokens_.resize(rows.size());
    for (size_t r = 0; r < rows.size(); ++r) {
      BatchRow& row = resolved_rows_[r];
      if (row.feedback < 0) continue;
      resolved_tokens_[r] = latest_tokens_[row.feedback];
      row.tokens = &resolved_tokens_[r];
      row.feedback = -1;
    }
  }
  std::vector<SampleResult> samples;
  PKV_RETURN_IF_ERROR(
      Step(feedback ? absl::Span<const BatchRow>(resolved_rows_) : rows, &samples, stats));
  latest_tokens_.clear();
  for (const SampleResult& s : samples) latest_tokens_.push_back(s.token_id);
  launched_.push_back(std::move(samples));
  return absl::OkStatus();
}

absl::Status ModelBackend::Finish(std::vector<SampleResult>* samples) {
  if (launched_.empty()) return absl::FailedPreconditionError("Finish with no batch launched");
  for (SampleResult& s : launched_.front()) samples->push_back(std::move(s));
  launched_.pop_front();
  return absl::OkStatus();
}

}  // namespace pkv
