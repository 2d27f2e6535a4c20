// The reduction kernel of SharedDeviceGroup (shared_device_group.h), in its own header so the
// CUDA file does not see the group's host synchronisation types.
// Thread-safety: a pure launcher; the caller orders the buffers' producers and consumers.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "worker/parallel/device_communicator.h"

namespace pkv {

inline constexpr int kMaxSliceSumRanks = 8;

// For i in [begin, end): sums data[0][i] + data[1][i] + ... in float32 in rank order and writes
// the sum, rounded once to `type`, to every data[q][i]. data: [n] device pointers (host array),
// each [>= end] elements of `type`. INVALID_ARGUMENT unless 1 <= n <= kMaxSliceSumRanks.
absl::Status LaunchSharedSliceSum(void* const* data, int n, int64_t begin, int64_t end,
                                  CollectiveDType type, cudaStream_t stream);

}  // namespace pkv
