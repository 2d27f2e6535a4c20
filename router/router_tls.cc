#include "router/router_tls.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace pkv::router {

absl::StatusOr<RouterCredentials> LoadRouterCredentials(const RouterOptions& o) {
  RouterCredentials c;
  if (o.client_tls.cert_file.empty()) {
    c.client_port = grpc::InsecureServerCredentials();
  } else {
    ClientCertPolicy policy = ClientCertPolicy::kNone;
    if (!o.client_tls.ca_file.empty()) {
      policy = o.require_client_cert ? ClientCertPolicy::kRequireAndVerify
                                     : ClientCertPolicy::kVerifyIfPresented;
    }
    absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> server =
        MakeServerCredentials(o.client_tls, policy, "tls");
    if (!server.ok()) return server.status();
    c.client_port = *std::move(server);
  }
  if (!o.worker_tls.any()) {
    c.worker_channel = grpc::InsecureChannelCredentials();
  } else {
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> channel =
        MakeChannelCredentials(o.worker_tls, "worker_tls");
    if (!channel.ok()) return channel.status();
    c.worker_channel = *std::move(channel);
  }
  if (!o.api_keys_file.empty()) {
    absl::StatusOr<std::unique_ptr<ApiKeyAuthenticator>> keys =
        ApiKeyAuthenticator::FromFile(o.api_keys_file);
    if (!keys.ok()) return keys.status();
    c.api_keys = *std::move(keys);
  }
  return c;
}

std::string SecuritySummary(const RouterOptions& o) {
  std::string client =
      o.client_tls.cert_file.empty()
          ? "client port PLAINTEXT"
          : absl::StrCat("client port TLS", o.client_tls.ca_file.empty() ? ""
                                            : o.require_client_cert
                                                ? " (client certificates required)"
                                                : " (client certificates verified if shown)");
  const char* workers = o.worker_tls.any() ? "workers mTLS" : "workers PLAINTEXT";
  const char* keys = o.api_keys_file.empty() ? "no API keys (every client accepted)"
                     : o.client_tls.cert_file.empty()
                         ? "API keys (sent in the clear: local use only)"
                         : "API keys";
  return absl::StrCat(client, ", ", workers, ", ", keys);
}

}  // namespace pkv::router
