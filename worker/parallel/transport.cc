#include "worker/parallel/transport.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace pkv {

TransportReport DescribeExpectedTransport(const PeerAccessMatrix& m) {
  const size_t n = m.devices.size();
  PKV_CHECK(m.can_access.size() == n * n && m.native_atomic.size() == n * n);
  TransportReport report;
  if (n <= 1) {
    report.transport = "none (1 GPU)";
    report.reason = "a single GPU needs no inter-GPU transport";
    return report;
  }
  bool all_atomic = true;
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = i + 1; j < n; ++j) {
      const bool p2p = m.can_access[i * n + j] && m.can_access[j * n + i];
      if (!p2p) report.pairs_without_p2p.emplace_back(m.devices[i], m.devices[j]);
      all_atomic = all_atomic && m.native_atomic[i * n + j] && m.native_atomic[j * n + i];
    }
  }
  if (m.p2p_disabled_by_env) {
    report.transport = "SHM/PCIe";
    report.reason = "NCCL_P2P_DISABLE is set, so NCCL stages transfers through host memory";
  } else if (!report.pairs_without_p2p.empty()) {
    report.transport = "SHM/PCIe";
    report.reason =
        "some GPU pairs cannot access each other's memory (cudaDeviceCanAccessPeer = 0, usual "
        "for PCIe consumer cards), so NCCL stages transfers through host memory";
  } else if (all_atomic) {
    report.transport = "P2P/NVLink";
    report.reason = "every GPU pair is peer-accessible with native atomics (NVLink/NVSwitch)";
  } else {
    report.transport = "P2P/PCIe";
    report.reason =
        "every GPU pair is peer-accessible, without native peer atomics (PCIe peer-to-peer)";
  }
  return report;
}

std::string TransportLogLine(const PeerAccessMatrix& m, const TransportReport& report) {
  std::string line = absl::StrCat("tensor parallel over GPUs ", absl::StrJoin(m.devices, ","),
                                  ": NCCL transport ", report.transport, " (", report.reason);
  if (!report.pairs_without_p2p.empty()) {
    absl::StrAppend(&line, "; no P2P between ",
                    absl::StrJoin(report.pairs_without_p2p, " ",
                                  [](std::string* out, const std::pair<int, int>& p) {
                                    absl::StrAppend(out, p.first, "<->", p.second);
                                  }));
  }
  absl::StrAppend(&line, "); NCCL_DEBUG=INFO shows NCCL's own choice");
  return line;
}

bool NcclEnvTrue(const char* value) {
  if (value == nullptr || *value == '\0') return false;
  char* end = nullptr;
  const long v = std::strtol(value, &end, 10);
  return end != value && *end == '\0' && v != 0;
}

void ForceNcclNvlsOff() { setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/1); }

}  // namespace pkv
