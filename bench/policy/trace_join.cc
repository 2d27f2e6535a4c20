#include "bench/policy/trace_join.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "kernels/policy/features.h"

namespace pkv::policy {

absl::StatusOr<TraceLengths> ParseTraceLengths(absl::string_view text) {
  TraceLengths traces;
  int line = 0;
  for (absl::string_view l : absl::StrSplit(text, '\n')) {
    ++line;
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    if (l.empty() || l[0] == '#') continue;
    std::vector<absl::string_view> f = absl::StrSplit(l, '\t');
    if (f.size() < 4) {
      return absl::InvalidArgumentError(absl::StrCat("trace line ", line, ": ", f.size(),
                                                     " fields, need name, kind, batch, "
                                                     "lengths"));
    }
    std::vector<int32_t> lengths;
    for (absl::string_view v : absl::StrSplit(f[3], ',', absl::SkipEmpty())) {
      int32_t len = 0;
      if (!absl::SimpleAtoi(v, &len) || len < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("trace line ", line, ": bad length '", v, "'"));
      }
      lengths.push_back(len);
    }
    int32_t batch = 0;
    if (!absl::SimpleAtoi(f[2], &batch) || batch != static_cast<int32_t>(lengths.size())) {
      return absl::InvalidArgumentError(absl::StrCat("trace line ", line, ": batch '", f[2],
                                                     "' but ", lengths.size(), " lengths"));
    }
    if (!traces.emplace(std::string(f[0]), std::move(lengths)).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("trace line ", line, ": name '", f[0], "' repeats"));
    }
  }
  return traces;
}

absl::StatusOr<TraceLengths> ReadTraceLengths(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read trace ", path));
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<TraceLengths> t = ParseTraceLengths(text.str());
  if (!t.ok()) {
    return absl::Status(t.status().code(), absl::StrCat(path, ": ", t.status().message()));
  }
  return t;
}

absl::StatusOr<TraceLengths> ReadTraceFiles(absl::string_view comma_separated_paths) {
  TraceLengths all;
  for (absl::string_view path : absl::StrSplit(comma_separated_paths, ',', absl::SkipEmpty())) {
    PKV_ASSIGN_OR_RETURN(TraceLengths t, ReadTraceLengths(std::string(path)));
    for (auto& [name, lengths] : t) {
      if (!all.emplace(name, std::move(lengths)).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("trace name '", name, "' is in two trace files (", path, ")"));
      }
    }
  }
  return all;
}

namespace {

// Recorded against recomputed; the tolerances are the TSV's printed precision.
absl::Status CheckSame(const CellTimes& cell, const BatchFeatures& rec, const BatchFeatures& re) {
  const char* bad = nullptr;
  if (rec.batch != re.batch)
    bad = "f_batch";
  else if (rec.total_kv_bytes != re.total_kv_bytes)
    bad = "f_total_kv_bytes";
  else if (rec.max_len != re.max_len)
    bad = "f_max_len";
  else if (rec.min_len != re.min_len)
    bad = "f_min_len";
  else if (!(std::abs(rec.mean_len - re.mean_len) <= 0.05 + 1e-9))
    bad = "f_mean_len";
  else if (!(std::abs(rec.len_cv - re.len_cv) <= 5e-5 + 1e-9))
    bad = "f_len_cv";
  if (bad == nullptr) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("cell ", cell.cell, " at ", cell.sm_count, " SMs: ", bad,
                   " recomputed from the trace lengths differs from the recorded one (is it "
                   "the trace the sweep replayed?)"));
}

}  // namespace

absl::Status AttachLengthShape(const TraceLengths& traces, const ReadOptions& options,
                               std::vector<CellTimes>* cells) {
  for (CellTimes& cell : *cells) {
    auto it = traces.find(cell.cell);
    if (it == traces.end()) {
      return absl::NotFoundError(
          absl::StrCat("cell ", cell.cell, ": no trace line of that name in --traces"));
    }
    const std::vector<int32_t>& len = it->second;
    const BatchFeatures re =
        SummarizeBatch(len.data(), static_cast<int32_t>(len.size()), options.shape,
                       decode::DeviceLimits{cell.sm_count, options.ctas_per_sm});
    PKV_RETURN_IF_ERROR(CheckSame(cell, cell.features, re));
    cell.features.long_rows = re.long_rows;
    cell.features.long_tokens = re.long_tokens;
  }
  return absl::OkStatus();
}

}  // namespace pkv::policy
