// Throw-away certificates for TLS tests, made at test time with the `openssl` command (no key is
// ever committed): a CA, router/worker/client certificates it signed for 127.0.0.1 and localhost,
// a second ("wrong") CA with a certificate of its own, and an expired certificate from the right
// CA. Each leaf's SAN holds DNS:<its CN>, DNS:localhost and IP:127.0.0.1, so it verifies for
// loopback addresses and its gRPC peer identity names it. EC P-256 keys, so generation takes well
// under a second. Not thread-safe; one per test suite.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace pkv::testing {

struct CertKey {
  std::string cert;  // PEM file path
  std::string key;   // PEM file path
};

struct TestPki {
  std::string dir;
  std::string ca;        // the CA every process trusts
  std::string wrong_ca;  // a CA nobody trusts
  CertKey router;        // CN pkv-router: the router's server and worker-client certificate
  CertKey worker;        // CN pkv-worker
  CertKey client;        // CN pkv-client: an end user's client certificate
  CertKey intruder;      // CN pkv-intruder: signed by the right CA, but not an allowed name
  CertKey wrong;         // CN pkv-router, signed by wrong_ca
  CertKey expired;       // CN pkv-router, signed by ca, already expired
};

// Creates the files under a fresh temporary folder. Errors when `openssl` is missing or fails.
absl::StatusOr<TestPki> MakeTestPki();

// The contents of a file ("" when unreadable).
std::string ReadFileOrEmpty(const std::string& path);

}  // namespace pkv::testing
