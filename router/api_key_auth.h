// API-key (bearer token) authentication of the router's front door.
//
// A client sends the metadata `authorization: Bearer <key>`. The scheme is case-insensitive
// (RFC 9110 11.1); the key is compared exactly, byte for byte (a key differing only in case is a
// different key, unlike TGI's lower-casing compare).
//
// Keys live only as SHA-256 digests. A presented key is hashed and compared with every stored
// digest by CRYPTO_memcmp, all of them every time, so the time taken does not depend on which
// bytes match or on which key (if any) matched: only on the key's length and the number of keys
// (the vLLM approach: sha256 + compare_digest). Keys never appear in messages or logs.
//
// Every pkv.v1.Generation method calls Authenticate first; grpc.health.v1 stays open (probes and
// load balancers have no key). Immutable after construction; thread-safe.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/status.h"

namespace pkv::router {

class ApiKeyAuthenticator {
 public:
  using Digest = std::array<unsigned char, 32>;  // SHA-256

  // Reads `path`: one key per line; surrounding whitespace is trimmed, blank lines and lines
  // starting with '#' are skipped. A key must be printable ASCII without spaces (it travels in an
  // HTTP/2 header). Errors name the file and line, never a key: NOT_FOUND (unreadable),
  // INVALID_ARGUMENT (a bad line, or no key at all).
  static absl::StatusOr<std::unique_ptr<ApiKeyAuthenticator>> FromFile(const std::string& path);
  // The same checks on keys given directly (tests, embedding).
  static absl::StatusOr<std::unique_ptr<ApiKeyAuthenticator>> FromKeys(
      const std::vector<std::string>& keys);

  // OK when the call carries a valid key; UNAUTHENTICATED otherwise, with a message saying what
  // is missing or wrong (without echoing what was sent).
  grpc::Status Authenticate(const grpc::ServerContextBase& ctx) const;

  // True when `key` is one of the keys. Constant time in the sense above.
  bool IsValidKey(absl::string_view key) const;

  size_t num_keys() const { return digests_.size(); }

  // SHA-256 of `bytes` (exposed for tests).
  static Digest Sha256(absl::string_view bytes);

 private:
  explicit ApiKeyAuthenticator(std::vector<Digest> digests) : digests_(std::move(digests)) {}

  std::vector<Digest> digests_;
};

// Splits an authorization header value "Bearer <token>" (scheme case-insensitive, one or more
// spaces) into the token; empty when the value is not a bearer credential.
absl::string_view BearerToken(absl::string_view authorization);

}  // namespace pkv::router
