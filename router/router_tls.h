// The router's credentials, built once at start-up from RouterOptions: the client port's server
// credentials (TLS, optionally requiring client certificates, or plaintext), the channel
// credentials for the workers (mutual TLS, or plaintext), and the API-key authenticator.
// Whether plaintext is allowed at all is the binary's decision (--insecure, router_flags.cc);
// this library builds whatever the options say.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "router/api_key_auth.h"
#include "router/router_options.h"

namespace pkv::router {

struct RouterCredentials {
  std::shared_ptr<grpc::ServerCredentials> client_port;
  std::shared_ptr<grpc::ChannelCredentials> worker_channel;
  std::unique_ptr<ApiKeyAuthenticator> api_keys;  // null when options.api_keys_file is empty
};

// Errors (INVALID_ARGUMENT / NOT_FOUND) name the flag and file at fault.
absl::StatusOr<RouterCredentials> LoadRouterCredentials(const RouterOptions& options);

// One line for the start-up log, e.g. "client port TLS (client certificates required), workers
// mTLS, API keys: 3". Never includes secrets.
std::string SecuritySummary(const RouterOptions& options);

}  // namespace pkv::router
