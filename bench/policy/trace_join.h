// Recomputing a sweep's batch features from the traces it replayed (policy v3).
//
// pkv-bench kernels records the planner's summary (f_* columns) per cell but not the length shape
// (features.h, BatchFeatures::long_rows / long_tokens). The sweep's trace names are the lines of
// a trace grid (../shared/traces/README.md: name<TAB>kind<TAB>batch<TAB>comma-separated lengths),
// and the recorded features are those of the line's lengths as given (one batch, not averaged
// over steps), so SummarizeBatch over the line reproduces them; AttachLengthShape checks that
// before it trusts the join. Thread-safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "bench/policy/measurements_tsv.h"
#include "kernels/policy/measurements.h"

namespace pkv::policy {

// Trace name -> its row lengths.
using TraceLengths = std::map<std::string, std::vector<int32_t>>;

// Parses a trace grid. INVALID_ARGUMENT naming the line for fewer than 4 fields, a malformed or
// negative length, a batch column that disagrees with the number of lengths, or a repeated name.
absl::StatusOr<TraceLengths> ParseTraceLengths(absl::string_view text);
// NOT_FOUND when the file cannot be read; otherwise as ParseTraceLengths.
absl::StatusOr<TraceLengths> ReadTraceLengths(const std::string& path);

// For every cell: recomputes the features of its trace line (SummarizeBatch with the options'
// shape and CTAs per SM, the cell's SM count), checks them against the recorded ones (batch,
// bytes, max and min exactly; the mean within 0.05 and the CV within 5e-5, the precision the TSV
// prints them with) and fills in the length shape. The recorded values are kept otherwise, so a
// model that uses no length-shape input fits exactly as without the traces.
// NOT_FOUND naming the cell when the traces have no line of its name; INVALID_ARGUMENT naming the
// cell and the feature when a recomputed feature disagrees (the wrong trace file).
absl::Status AttachLengthShape(const TraceLengths& traces, const ReadOptions& options,
                               std::vector<CellTimes>* cells);

// Reads each comma-separated trace file and joins them (a name in two files is an error).
absl::StatusOr<TraceLengths> ReadTraceFiles(absl::string_view comma_separated_paths);

}  // namespace pkv::policy
