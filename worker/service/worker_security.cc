#include "worker/service/worker_security.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "grpcpp/security/auth_context.h"

namespace pkv {

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> WorkerServerCredentials(
    const WorkerSecurity& s) {
  if (!s.tls.any()) {
    if (s.insecure) return grpc::InsecureServerCredentials();
    return absl::InvalidArgumentError(
        "the worker port needs mutual TLS (--tls_cert, --tls_key, --tls_ca), or --insecure to "
        "serve plaintext (local use only)");
  }
  if (s.tls.cert_file.empty() || s.tls.key_file.empty() || s.tls.ca_file.empty()) {
    return absl::InvalidArgumentError(
        "mutual TLS needs all of --tls_cert, --tls_key and --tls_ca (the CA verifies the "
        "router's client certificate)");
  }
  return MakeServerCredentials(s.tls, ClientCertPolicy::kRequireAndVerify, "tls");
}

std::string WorkerSecuritySummary(const WorkerSecurity& s) {
  if (!s.tls.any()) return "PLAINTEXT (Drain from loopback only)";
  if (s.client_names.empty()) return "mTLS (any client certificate from --tls_ca)";
  return absl::StrCat("mTLS (clients: ", absl::StrJoin(s.client_names, ", "), ")");
}

PeerPolicy::PeerPolicy(const WorkerSecurity& security)
    : mtls_(security.tls.any()), client_names_(security.client_names) {}

grpc::Status PeerPolicy::Authorize(const grpc::ServerContextBase& ctx, bool admin) const {
  if (!mtls_) {
    if (!admin || IsLoopbackPeer(ctx.peer())) return grpc::Status::OK;
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        "a plaintext worker accepts Drain only from loopback; use mutual TLS "
                        "(--tls_cert/--tls_key/--tls_ca) to drain it remotely, or send SIGTERM");
  }
  const std::shared_ptr<const grpc::AuthContext> auth = ctx.auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) {
    // The handshake requires a verified certificate, so this is not expected; refuse anyway.
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "no verified client certificate");
  }
  if (client_names_.empty()) return grpc::Status::OK;
  const std::vector<grpc::string_ref> identity = auth->GetPeerIdentity();
  for (const grpc::string_ref& name : identity) {
    const absl::string_view id(name.data(), name.size());
    if (std::find(client_names_.begin(), client_names_.end(), id) != client_names_.end()) {
      return grpc::Status::OK;
    }
  }
  std::vector<std::string> names;
  for (const grpc::string_ref& name : identity) names.emplace_back(name.data(), name.size());
  return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                      absl::StrCat("client certificate identity [", absl::StrJoin(names, ", "),
                                   "] is not in --tls_client_names"));
}

bool IsLoopbackPeer(absl::string_view peer) {
  return absl::StartsWith(peer, "ipv4:127.") || absl::StartsWith(peer, "ipv6:[::1]:") ||
         absl::StartsWith(peer, "ipv6:%5B::1%5D:") || absl::StartsWith(peer, "ipv6:[::ffff:127.") ||
         absl::StartsWith(peer, "unix:");
}

}  // namespace pkv
