#include "bench/kernels/trace.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace pkv::bench {

absl::StatusOr<std::vector<TraceLine>> ReadTrace(const std::string& path) {
  std::ifstream f(path);
  if (!f) return absl::NotFoundError("cannot open trace " + path);
  std::vector<TraceLine> lines;
  std::string line;
  for (int n = 1; std::getline(f, line); ++n) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> cols = absl::StrSplit(line, '\t');
    if (cols.size() < 4)
      return absl::InvalidArgumentError(absl::StrCat(path, ":", n, ": 4 columns"));
    TraceLine t{cols[0], cols[1], {}};
    for (absl::string_view tok : absl::StrSplit(cols[3], ',')) {
      int32_t v = 0;
      if (!absl::SimpleAtoi(tok, &v) || v < 0) {
        return absl::InvalidArgumentError(absl::StrCat(path, ":", n, ": bad length"));
      }
      t.lengths.push_back(v);
    }
    lines.push_back(std::move(t));
  }
  return lines;
}

absl::StatusOr<std::map<std::string, double>> ReadFlashInferBest(const std::string& path) {
  std::ifstream f(path);
  if (!f) return absl::NotFoundError("cannot open " + path);
  std::string line;
  std::getline(f, line);
  std::vector<std::string> header = absl::StrSplit(line, '\t');
  int col = -1;
  for (size_t i = 0; i < header.size(); ++i) col = header[i] == "best_fi_us" ? int(i) : col;
  if (col < 0) return absl::InvalidArgumentError(path + ": no best_fi_us column");
  std::map<std::string, double> best;
  while (std::getline(f, line)) {
    std::vector<std::string> cols = absl::StrSplit(line, '\t');
    double v = 0;
    if (static_cast<int>(cols.size()) > col && absl::SimpleAtod(cols[col], &v)) best[cols[0]] = v;
  }
  return best;
}

}  // namespace pkv::bench
