// The reduced trace grid of the worker's on-start calibration (on_start_calibration.h): a few
// batches of each kind of ../shared/traces/gen.py, small enough to measure in seconds.
// Thread-safety: pure function.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/attention/kv_layout.h"

namespace pkv::policy {

// One synthetic batch.
struct GridCell {
  std::string name;              // e.g. "bucketed-B4-N8192", "bimodal-B32"
  std::vector<int32_t> lengths;  // [batch] KV tokens per row
  int64_t kv_bytes = 0;          // K and V bytes of the batch (2-byte elements)
};

// Deterministic for a seed: bucketed B in {1, 4, 8} x N in {1024, 8192, 32768}, and uniform,
// bimodal and zipf batches (gen.py's distributions, N_max 32768) of B in {2, 8, 32, 128}; a batch
// above max_kv_bytes is scaled down to about that (every length by the same factor, at least 1
// token); ordered
// by KV bytes, smallest first, so a time budget cuts the largest.
std::vector<GridCell> ReducedGrid(const KvShape& shape, int64_t max_kv_bytes, uint32_t seed);

}  // namespace pkv::policy
