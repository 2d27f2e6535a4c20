// Asks the CUDA runtime which of a worker's GPUs can reach each other peer-to-peer (the facts
// transport.h turns into "NCCL will use P2P/NVLink | P2P/PCIe | SHM/PCIe"). Built only with CUDA.
// Thread-safety: thread-safe (queries only; changes no device state, the current device
// included).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/parallel/transport.h"

namespace pkv {

// cudaDeviceCanAccessPeer and cudaDevP2PAttrNativeAtomicSupported for every ordered pair, and
// NCCL_P2P_DISABLE from the environment. INVALID_ARGUMENT for an ordinal outside
// [0, cudaGetDeviceCount()) or listed twice; INTERNAL when the runtime fails.
absl::StatusOr<PeerAccessMatrix> ProbePeerAccess(const std::vector<int>& devices);

// Probes and logs TransportLogLine() at INFO; returns the report.
absl::StatusOr<TransportReport> LogExpectedTransport(const std::vector<int>& devices);

}  // namespace pkv
