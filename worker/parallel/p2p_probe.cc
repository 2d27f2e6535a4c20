#include "worker/parallel/p2p_probe.h"

#include <cuda_runtime_api.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "common/cuda_status.h"
#include "common/log.h"

namespace pkv {

absl::StatusOr<PeerAccessMatrix> ProbePeerAccess(const std::vector<int>& devices) {
  int count = 0;
  PKV_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count));
  const size_t n = devices.size();
  for (size_t i = 0; i < n; ++i) {
    if (devices[i] < 0 || devices[i] >= count) {
      return absl::InvalidArgumentError(
          absl::StrCat("GPU ", devices[i], " does not exist (", count, " visible)"));
    }
    for (size_t j = 0; j < i; ++j) {
      if (devices[j] == devices[i]) {
        return absl::InvalidArgumentError(absl::StrCat("GPU ", devices[i], " is listed twice"));
      }
    }
  }
  PeerAccessMatrix m;
  m.devices = devices;
  m.can_access.assign(n * n, 0);
  m.native_atomic.assign(n * n, 0);
  m.p2p_disabled_by_env = NcclEnvTrue(std::getenv("NCCL_P2P_DISABLE"));
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      if (i == j) continue;
      int access = 0, atomic = 0;
      PKV_CUDA_RETURN_IF_ERROR(cudaDeviceCanAccessPeer(&access, devices[i], devices[j]));
      if (access) {
        PKV_CUDA_RETURN_IF_ERROR(cudaDeviceGetP2PAttribute(
            &atomic, cudaDevP2PAttrNativeAtomicSupported, devices[i], devices[j]));
      }
      m.can_access[i * n + j] = access != 0;
      m.native_atomic[i * n + j] = atomic != 0;
    }
  }
  return m;
}

absl::StatusOr<TransportReport> LogExpectedTransport(const std::vector<int>& devices) {
  absl::StatusOr<PeerAccessMatrix> m = ProbePeerAccess(devices);
  if (!m.ok()) return m.status();
  TransportReport report = DescribeExpectedTransport(*m);
  PKV_LOG(INFO) << TransportLogLine(*m, report);
  return report;
}

}  // namespace pkv
