#include "bench/policy/measurements_tsv.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "kernels/attention/fp8_kv.h"
#include "kernels/policy/route_policy.h"

namespace pkv::policy {

namespace {

// Column indices of the fields the reader needs.
struct Columns {
  int trace = -1, route = -1, variant = -1, gpu_us = -1, sm_count = -1;
  int f_batch = -1, f_total_kv_bytes = -1, f_max_len = -1, f_min_len = -1, f_mean_len = -1;
  int f_len_cv = -1;
};

absl::StatusOr<Columns> FindColumns(absl::string_view header) {
  std::vector<absl::string_view> names = absl::StrSplit(header, '\t');
  Columns c;
  std::pair<const char*, int*> wanted[] = {{"trace", &c.trace},
                                           {"route", &c.route},
                                           {"variant", &c.variant},
                                           {"gpu_us", &c.gpu_us},
                                           {"sm_count", &c.sm_count},
                                           {"f_batch", &c.f_batch},
                                           {"f_total_kv_bytes", &c.f_total_kv_bytes},
                                           {"f_max_len", &c.f_max_len},
                                           {"f_min_len", &c.f_min_len},
                                           {"f_mean_len", &c.f_mean_len},
                                           {"f_len_cv", &c.f_len_cv}};
  for (auto& [name, index] : wanted) {
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] == name) *index = static_cast<int>(i);
    }
    if (*index < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("measurements: header has no column '", name, "'"));
    }
  }
  return c;
}

absl::Status ParseNumber(absl::string_view text, double* out, int line, const char* what) {
  if (!absl::SimpleAtod(text, out) || !std::isfinite(*out)) {
    return absl::InvalidArgumentError(
        absl::StrCat("measurements line ", line, ": ", what, " '", text, "' is not a number"));
  }
  return absl::OkStatus();
}

bool KeepVariant(absl::string_view variant, const ReadOptions& options) {
  if (!options.variant.empty()) return variant == options.variant;
  const std::vector<absl::string_view> parts = absl::StrSplit(variant, '/');
  const bool separate_merge = absl::c_linear_search(parts, "2k");
  const absl::string_view kv = parts.size() > 1 && parts.back() != "2k" ? parts.back() : "";
  return !separate_merge && kv == options.kv_dtype;
}

// Features of one row; the shape and CTAs per SM come from the options (not in the TSV).
absl::Status ParseFeatures(const std::vector<absl::string_view>& f, const Columns& c, int line,
                           const ReadOptions& options, int32_t sm_count, BatchFeatures* out) {
  double v[6];
  PKV_RETURN_IF_ERROR(ParseNumber(f[c.f_batch], &v[0], line, "f_batch"));
  PKV_RETURN_IF_ERROR(ParseNumber(f[c.f_total_kv_bytes], &v[1], line, "f_total_kv_bytes"));
  PKV_RETURN_IF_ERROR(ParseNumber(f[c.f_max_len], &v[2], line, "f_max_len"));
  PKV_RETURN_IF_ERROR(ParseNumber(f[c.f_min_len], &v[3], line, "f_min_len"));
  PKV_RETURN_IF_ERROR(ParseNumber(f[c.f_mean_len], &v[4], line, "f_mean_len"));
  PKV_RETURN_IF_ERROR(ParseNumber(f[c.f_len_cv], &v[5], line, "f_len_cv"));
  if (v[0] < 0 || v[1] < 0 || v[2] < 0 || v[3] < 0 || v[4] < 0 || v[5] < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("measurements line ", line, ": negative feature"));
  }
  decode::PlanFeatures pf;
  pf.batch = static_cast<int32_t>(v[0]);
  pf.total_kv_bytes = static_cast<int64_t>(v[1]);
  pf.max_len = static_cast<int32_t>(v[2]);
  pf.min_len = static_cast<int32_t>(v[3]);
  pf.mean_len = v[4];
  pf.len_cv = v[5];
  decode::DeviceLimits limits{sm_count, options.ctas_per_sm};
  *out = FromPlanFeatures(pf, options.shape, limits);
  return absl::OkStatus();
}

}  // namespace

absl::Status SelectKvDtype(const std::string& name, ReadOptions* ro) {
  PKV_ASSIGN_OR_RETURN(const KvCacheDtype kv, ParseKvCacheDtype(name));
  ro->kv_dtype = IsFp8(kv) ? KvCacheDtypeName(kv) : "";
  ro->shape.kv_elem_bytes = IsFp8(kv) ? 1 : 2;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<CellTimes>> ParseMeasurements(absl::string_view tsv,
                                                         const ReadOptions& options) {
  std::vector<absl::string_view> lines = absl::StrSplit(tsv, '\n');
  if (lines.empty() || lines[0].empty()) {
    return absl::InvalidArgumentError("measurements: empty input (no header line)");
  }
  PKV_ASSIGN_OR_RETURN(const Columns c, FindColumns(lines[0]));
  const int need =
      std::max({c.trace, c.route, c.variant, c.gpu_us, c.sm_count, c.f_batch, c.f_total_kv_bytes,
                c.f_max_len, c.f_min_len, c.f_mean_len, c.f_len_cv}) +
      1;
  std::vector<CellTimes> cells;
  std::map<std::pair<std::string, int32_t>, size_t> index;  // (cell, sm_count) -> cells[i]
  for (size_t n = 1; n < lines.size(); ++n) {
    const int line = static_cast<int>(n + 1);
    if (lines[n].empty() || lines[n][0] == '#') continue;
    std::vector<absl::string_view> f = absl::StrSplit(lines[n], '\t');
    if (static_cast<int>(f.size()) < need) {
      return absl::InvalidArgumentError(absl::StrCat("measurements line ", line, ": ", f.size(),
                                                     " columns, the header names ", need));
    }
    if (!KeepVariant(f[c.variant], options)) continue;
    double sm = 0, us = 0;
    PKV_RETURN_IF_ERROR(ParseNumber(f[c.sm_count], &sm, line, "sm_count"));
    if (options.sm_count > 0 && static_cast<int32_t>(sm) != options.sm_count) continue;
    PKV_RETURN_IF_ERROR(ParseNumber(f[c.gpu_us], &us, line, "gpu_us"));
    if (us <= 0 || sm <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("measurements line ", line, ": gpu_us and sm_count must be positive"));
    }
    absl::StatusOr<decode::Route> route = decode::ParseRoute(f[c.route]);
    if (!route.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("measurements line ", line, ": ", route.status().message()));
    }
    const auto key = std::make_pair(std::string(f[c.trace]), static_cast<int32_t>(sm));
    auto [it, inserted] = index.emplace(key, cells.size());
    if (inserted) {
      CellTimes cell;
      cell.cell = key.first;
      cell.sm_count = key.second;
      PKV_RETURN_IF_ERROR(ParseFeatures(f, c, line, options, key.second, &cell.features));
      cells.push_back(std::move(cell));
    }
    CellTimes& cell = cells[it->second];
    if (cell.has(*route)) {
      return absl::InvalidArgumentError(absl::StrCat("measurements line ", line,
                                                     ": second time for ", key.first, " at ",
                                                     key.second, " SMs, route ", f[c.route]));
    }
    cell.gpu_us[static_cast<int>(*route)] = us;
  }
  return cells;
}

absl::StatusOr<std::vector<CellTimes>> ReadMeasurements(const std::string& path,
                                                        const ReadOptions& options) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read measurements ", path));
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<std::vector<CellTimes>> cells = ParseMeasurements(text.str(), options);
  if (!cells.ok()) {
    return absl::Status(cells.status().code(), absl::StrCat(path, ": ", cells.status().message()));
  }
  return cells;
}

std::vector<CellTimes> CompleteCells(const std::vector<CellTimes>& cells, int32_t sm_count) {
  std::vector<CellTimes> out;
  for (const CellTimes& c : cells) {
    if (c.sm_count == sm_count && c.complete()) out.push_back(c);
  }
  return out;
}

std::vector<int32_t> SmCounts(const std::vector<CellTimes>& cells) {
  std::vector<int32_t> sms;
  for (const CellTimes& c : cells) {
    if (std::find(sms.begin(), sms.end(), c.sm_count) == sms.end()) sms.push_back(c.sm_count);
  }
  std::sort(sms.rbegin(), sms.rend());
  return sms;
}

}  // namespace pkv::policy
