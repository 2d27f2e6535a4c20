// TLS material for gRPC servers and channels, read from PEM files named by command-line flags.
//
// Used by pkv-router (client-facing TLS, mTLS to workers), pkv-worker (mTLS server) and the pkv
// client. Everything is checked when it is loaded, so a process fails at start-up with a message
// naming the flag and the file rather than later with a handshake error:
//   - each file is readable and non-empty, and holds what it should (PEM certificate(s), a PEM
//     private key);
//   - the key belongs to the leaf certificate;
//   - the leaf certificate is inside its validity period (an expired certificate would be refused
//     by every peer anyway).
// Error messages name files and flags, never file contents.
//
// Pure functions of their inputs plus the file system; thread-safe.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"

namespace pkv {

// Paths of PEM files. Empty = not given.
struct TlsFiles {
  std::string cert_file;  // certificate chain, leaf first
  std::string key_file;   // private key of the leaf certificate
  std::string ca_file;    // CA certificate(s) that verify the peer

  bool any() const { return !cert_file.empty() || !key_file.empty() || !ca_file.empty(); }
};

// What a TLS server asks of its clients.
enum class ClientCertPolicy {
  kNone,               // server-side TLS only
  kVerifyIfPresented,  // a client may show no certificate; one not signed by ca_file fails
  kRequireAndVerify,   // mutual TLS: a certificate signed by ca_file, or the handshake fails
};

// The contents of a TlsFiles, checked.
struct TlsMaterial {
  std::string cert_pem;  // empty when no cert_file
  std::string key_pem;
  std::string ca_pem;  // empty when no ca_file
};

// Reads and checks `files`. `flag_prefix` names the flags in messages: "tls" gives --tls_cert,
// --tls_key, --tls_ca; "worker_tls" gives --worker_tls_cert, ...
// REQUIRES nothing: cert and key must come together; the CA may be given alone (a client that
// only verifies its server). Errors: INVALID_ARGUMENT (bad combination, unparsable or mismatched
// PEM, expired or not-yet-valid certificate), NOT_FOUND (unreadable file).
absl::StatusOr<TlsMaterial> LoadTlsMaterial(const TlsFiles& files, absl::string_view flag_prefix);

// Server credentials: cert + key required; with a policy other than kNone the CA is required too.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsFiles& files, ClientCertPolicy policy, absl::string_view flag_prefix);

// Channel credentials: the CA verifies the server (empty: the system's roots); cert + key, when
// given, are presented as the client certificate.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const TlsFiles& files, absl::string_view flag_prefix);

}  // namespace pkv
