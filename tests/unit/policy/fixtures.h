// Test helpers: the recorded H200 measurements (testdata/README.md) and random batches.
#pragma once

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "bench/policy/measurements_tsv.h"
#include "kernels/policy/features.h"
#include "kernels/policy/measurements.h"

namespace pkv::policy::testing {

// testdata/<name>, found through PKV_SOURCE_ROOT (a compile definition: ctest passes the tests
// only their first ENVIRONMENT entry, and ccache's base_dir makes __FILE__ relative to the build
// directory, not to the directory ctest runs a test in), else PKV_SOURCE_DIR, else __FILE__.
inline std::string FixturePath(const std::string& name) {
#ifdef PKV_SOURCE_ROOT
  const char* root = PKV_SOURCE_ROOT;
#else
  const char* root = std::getenv("PKV_SOURCE_DIR");
#endif
  if (root != nullptr) return std::string(root) + "/tests/unit/policy/testdata/" + name;
  const std::string here = __FILE__;
  return here.substr(0, here.rfind('/')) + "/testdata/" + name;
}

inline std::vector<CellTimes> LoadFixture(const std::string& name) {
  absl::StatusOr<std::vector<CellTimes>> cells = ReadMeasurements(FixturePath(name), {});
  if (!cells.ok()) return {};
  return *cells;
}

// A random batch's features: bucketed, uniform or bimodal lengths, 1..128 rows.
inline BatchFeatures RandomBatch(std::mt19937& rng, int32_t num_sms = 132) {
  const int rows = 1 << std::uniform_int_distribution<int>(0, 7)(rng);
  const int kind = std::uniform_int_distribution<int>(0, 2)(rng);
  const int common = std::uniform_int_distribution<int>(100, 131072)(rng);
  std::vector<int32_t> len(rows);
  for (int32_t& l : len) {
    l = kind == 0   ? common
        : kind == 1 ? std::uniform_int_distribution<int>(128, 32768)(rng)
                    : (rng() % 4 == 0 ? std::uniform_int_distribution<int>(16384, 32768)(rng)
                                      : std::uniform_int_distribution<int>(128, 1024)(rng));
  }
  return SummarizeBatch(len.data(), rows, KvShape{32, 8, 128, 16}, {num_sms, 2});
}

}  // namespace pkv::policy::testing
