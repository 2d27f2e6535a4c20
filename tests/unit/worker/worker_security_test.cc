// The worker's security settings: which flag combinations start, and which peers count as
// loopback for a plaintext Drain. Calls through real mTLS are in
// tests/integration/security_test.cc.
#include "worker/service/worker_security.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pkv {
namespace {

using ::testing::HasSubstr;

TEST(WorkerSecurityTest, PlaintextIsAnExplicitOptIn) {
  WorkerSecurity s;
  EXPECT_THAT(WorkerServerCredentials(s).status().message(),
              HasSubstr("or --insecure to serve plaintext"));
  s.insecure = true;
  EXPECT_TRUE(WorkerServerCredentials(s).ok());
  EXPECT_THAT(WorkerSecuritySummary(s), HasSubstr("PLAINTEXT"));
}

TEST(WorkerSecurityTest, MutualTlsNeedsAllThreeFiles) {
  for (const TlsFiles& files : {TlsFiles{"c", "", ""}, TlsFiles{"c", "k", ""},
                                TlsFiles{"", "", "ca"}, TlsFiles{"", "k", "ca"}}) {
    WorkerSecurity s;
    s.insecure = true;  // does not excuse half-configured TLS
    s.tls = files;
    EXPECT_THAT(WorkerServerCredentials(s).status().message(),
                HasSubstr("mutual TLS needs all of --tls_cert, --tls_key and --tls_ca"));
  }
}

TEST(WorkerSecurityTest, LoopbackPeers) {
  for (const char* peer : {"ipv4:127.0.0.1:5000", "ipv4:127.1.2.3:1", "ipv6:[::1]:80",
                           "ipv6:%5B::1%5D:80", "ipv6:[::ffff:127.0.0.1]:9", "unix:/tmp/s"}) {
    EXPECT_TRUE(IsLoopbackPeer(peer)) << peer;
  }
  for (const char* peer : {"ipv4:10.0.0.1:5000", "ipv4:128.0.0.1:1", "ipv6:[::2]:80",
                           "ipv6:[2001:db8::1]:80", "ipv4:1.127.0.0:1", ""}) {
    EXPECT_FALSE(IsLoopbackPeer(peer)) << peer;
  }
}

}  // namespace
}  // namespace pkv
