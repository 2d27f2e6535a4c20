// Which transport NCCL will use between the GPUs of one worker, decided from facts the CUDA
// runtime reports (p2p_probe.h gathers them), so start-up can say it in one log line and a
// consumer-card host without peer-to-peer is not a surprise at the first slow step.
//
// Rule (the order NCCL's intra-node transport selection follows):
//   - 1 GPU: no transport.
//   - NCCL_P2P_DISABLE=1 in the environment, or some pair of GPUs cannot access each other
//     (cudaDeviceCanAccessPeer == 0; PCIe consumer cards usually report 0): NCCL falls back to
//     SHM, staging every transfer through pinned host memory over PCIe, about twice the PCIe
//     traffic of P2P and a host-memory round trip per chunk.
//   - every pair can access each other: P2P. Pairs whose P2P link supports native atomics are
//     reported as NVLink (CUDA reports native peer atomics for NVLink/NVSwitch links and not for
//     PCIe peer-to-peer on the systems we know), otherwise as PCIe.
//   Example: 2 x RTX 4090 -> CanAccessPeer 0 -> "SHM/PCIe"; an HGX H200 board -> all pairs
//   peer-accessible with native atomics -> "P2P/NVLink".
// This is the expectation; NCCL_DEBUG=INFO prints NCCL's own choice per channel ("via P2P/...",
// "via SHM/..."), which is the ground truth if they ever disagree.
//
// Also here: ForceNcclNvlsOff(), which every NCCL user in this project calls before NCCL starts.
// Thread-safety: pure functions, except ForceNcclNvlsOff (see there).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace pkv {

struct PeerAccessMatrix {
  std::vector<int> devices;            // CUDA device ordinals, [n]
  std::vector<uint8_t> can_access;     // [n][n]: device i can map device j's memory (i != j)
  std::vector<uint8_t> native_atomic;  // [n][n]: the i -> j P2P link supports native atomics
  bool p2p_disabled_by_env = false;    // NCCL_P2P_DISABLE is set to a true value
};

struct TransportReport {
  std::string transport;  // "none (1 GPU)", "P2P/NVLink", "P2P/PCIe", "SHM/PCIe"
  std::string reason;     // one sentence: why
  std::vector<std::pair<int, int>> pairs_without_p2p;  // device ordinals (i, j), i < j
};

// REQUIRES: can_access and native_atomic have devices.size()^2 entries.
TransportReport DescribeExpectedTransport(const PeerAccessMatrix& matrix);

// The one log line: "tensor parallel over GPUs 0,1: NCCL transport P2P/NVLink (...)".
std::string TransportLogLine(const PeerAccessMatrix& matrix, const TransportReport& report);

// Whether an environment value means "on" for NCCL ("1", or any non-zero integer).
bool NcclEnvTrue(const char* value);

// Sets NCCL_NVLS_ENABLE=0 (overwriting any value). NVLink SHARP multicast (NVLS) makes NCCL create
// multicast objects on the NVSwitch fabric; on the shared machines we run on, a program using
// multicast can put the host's GPUs out of service for a day or more, and NVLS also reserves
// extra device memory per communicator that the KV pool would otherwise get. Ring/tree all-reduce
// over NVLink P2P is what TP at decode batch sizes needs anyway.
// Must run before the first NCCL call of the process and before other threads read the
// environment (setenv is not thread-safe); the NCCL entry points of nccl_communicator.h call it.
void ForceNcclNvlsOff();

}  // namespace pkv
