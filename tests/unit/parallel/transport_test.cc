// The expected NCCL transport from a peer-access matrix (transport.h's rule), and the NCCL
// environment helpers.
#include "worker/parallel/transport.h"

#include <cstdlib>

#include "gtest/gtest.h"

namespace pkv {
namespace {

PeerAccessMatrix Matrix(std::vector<int> devices, bool access, bool atomic) {
  const size_t n = devices.size();
  PeerAccessMatrix m;
  m.devices = std::move(devices);
  m.can_access.assign(n * n, 0);
  m.native_atomic.assign(n * n, 0);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      if (i == j) continue;
      m.can_access[i * n + j] = access;
      m.native_atomic[i * n + j] = access && atomic;
    }
  }
  return m;
}

TEST(TransportTest, SingleGpuNeedsNoTransport) {
  EXPECT_EQ(DescribeExpectedTransport(Matrix({3}, false, false)).transport, "none (1 GPU)");
}

TEST(TransportTest, NvlinkWhenAllPairsArePeersWithAtomics) {
  const PeerAccessMatrix m = Matrix({0, 1, 2, 3}, true, true);
  const TransportReport r = DescribeExpectedTransport(m);
  EXPECT_EQ(r.transport, "P2P/NVLink");
  EXPECT_TRUE(r.pairs_without_p2p.empty());
  EXPECT_NE(TransportLogLine(m, r).find("GPUs 0,1,2,3: NCCL transport P2P/NVLink"),
            std::string::npos);
}

TEST(TransportTest, PciePeerToPeerWithoutAtomics) {
  EXPECT_EQ(DescribeExpectedTransport(Matrix({0, 1}, true, false)).transport, "P2P/PCIe");
  // One pair without atomics is enough to call the group PCIe.
  PeerAccessMatrix m = Matrix({0, 1, 2}, true, true);
  m.native_atomic[1 * 3 + 2] = 0;
  EXPECT_EQ(DescribeExpectedTransport(m).transport, "P2P/PCIe");
}

TEST(TransportTest, ShmWhenAnyPairLacksPeerAccessAndNamesThePairs) {
  PeerAccessMatrix m = Matrix({4, 5, 6}, true, true);
  m.can_access[0 * 3 + 2] = 0;  // 4 -> 6 only: one direction is enough to lose P2P
  const TransportReport r = DescribeExpectedTransport(m);
  EXPECT_EQ(r.transport, "SHM/PCIe");
  ASSERT_EQ(r.pairs_without_p2p.size(), 1u);
  EXPECT_EQ(r.pairs_without_p2p[0], std::make_pair(4, 6));
  EXPECT_NE(TransportLogLine(m, r).find("no P2P between 4<->6"), std::string::npos);
  // Consumer cards: nothing is peer-accessible.
  EXPECT_EQ(DescribeExpectedTransport(Matrix({0, 1}, false, false)).pairs_without_p2p.size(), 1u);
}

TEST(TransportTest, P2pDisabledByEnvironmentMeansShm) {
  PeerAccessMatrix m = Matrix({0, 1}, true, true);
  m.p2p_disabled_by_env = true;
  const TransportReport r = DescribeExpectedTransport(m);
  EXPECT_EQ(r.transport, "SHM/PCIe");
  EXPECT_NE(r.reason.find("NCCL_P2P_DISABLE"), std::string::npos);
}

TEST(TransportTest, NcclEnvTrueParsesIntegers) {
  EXPECT_FALSE(NcclEnvTrue(nullptr));
  EXPECT_FALSE(NcclEnvTrue(""));
  EXPECT_FALSE(NcclEnvTrue("0"));
  EXPECT_FALSE(NcclEnvTrue("no"));
  EXPECT_TRUE(NcclEnvTrue("1"));
  EXPECT_TRUE(NcclEnvTrue("2"));
}

TEST(TransportTest, ForceNcclNvlsOffOverwrites) {
  setenv("NCCL_NVLS_ENABLE", "1", 1);
  ForceNcclNvlsOff();
  ASSERT_NE(std::getenv("NCCL_NVLS_ENABLE"), nullptr);
  EXPECT_STREQ(std::getenv("NCCL_NVLS_ENABLE"), "0");
}

}  // namespace
}  // namespace pkv
