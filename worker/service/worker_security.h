// Who may reach a pkv-worker, and how: the worker's transport security and its per-call peer
// check (README "Security").
//
// Transport: mutual TLS (--tls_cert, --tls_key, --tls_ca): the worker presents its certificate and
// requires a client certificate signed by --tls_ca, so only the router (or whoever holds a
// certificate from that CA) can open a connection at all. Plaintext needs --insecure.
// Calls: with mTLS and --tls_client_names set, every pkv.v1.Worker call must come from a
// certificate naming one of those identities (DNS SAN, or the CN when the certificate has no SAN),
// else PERMISSION_DENIED. Over plaintext, the admin RPC (Drain) is accepted only from loopback;
// everything else is open (local use). grpc.health.v1 is not checked (probes).
//
// PeerPolicy is immutable and thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/tls.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_context.h"

namespace pkv {

struct WorkerSecurity {
  bool insecure = false;                  // --insecure: plaintext allowed (no --tls_cert)
  TlsFiles tls;                           // --tls_cert, --tls_key, --tls_ca: mutual TLS
  std::vector<std::string> client_names;  // --tls_client_names; empty = any CA-signed client
};

// The listening port's credentials. INVALID_ARGUMENT when neither TLS (all three files) nor
// --insecure is given, or when the files are unusable (common/tls.h); NOT_FOUND when unreadable.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> WorkerServerCredentials(
    const WorkerSecurity& security);

// One line for the start-up log; never includes secrets.
std::string WorkerSecuritySummary(const WorkerSecurity& security);

class PeerPolicy {
 public:
  PeerPolicy() = default;  // plaintext, no names: only Drain is restricted (to loopback)
  explicit PeerPolicy(const WorkerSecurity& security);

  // OK, or PERMISSION_DENIED naming what is wrong. `admin`: the call changes the worker's state
  // for everyone (Drain).
  grpc::Status Authorize(const grpc::ServerContextBase& ctx, bool admin) const;

 private:
  bool mtls_ = false;
  std::vector<std::string> client_names_;
};

// True for "ipv4:127.x.x.x:port", "ipv6:[::1]:port" and "unix:..." peers (grpc::ServerContext
// peer() strings).
bool IsLoopbackPeer(absl::string_view peer);

}  // namespace pkv
