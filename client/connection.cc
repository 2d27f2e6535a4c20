// How the client reaches a server: TLS or plaintext channels and the API key on every call.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "client/commands.h"
#include "client/flags.h"
#include "common/tls.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace pkv::client {
namespace {

bool UseTls() {
  return absl::GetFlag(FLAGS_tls) || !absl::GetFlag(FLAGS_tls_ca).empty() ||
         !absl::GetFlag(FLAGS_tls_cert).empty();
}

bool IsLoopbackAddress(const std::string& address) {
  return absl::StartsWith(address, "127.") || absl::StartsWith(address, "localhost:") ||
         absl::StartsWith(address, "[::1]:") || absl::StartsWith(address, "unix:");
}

}  // namespace

std::string ApiKey() {
  const std::string flag = absl::GetFlag(FLAGS_api_key);
  if (!flag.empty()) return flag;
  const char* env = std::getenv("PKV_API_KEY");
  return env == nullptr ? "" : env;
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address) {
  grpc::ChannelArguments args;
  if (!UseTls()) {
    if (!ApiKey().empty() && !IsLoopbackAddress(address)) {
      std::fprintf(stderr,
                   "warning: sending the API key to %s without TLS; pass --tls_ca (or --tls)\n",
                   address.c_str());
    }
    return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
  }
  const TlsFiles files{absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key),
                       absl::GetFlag(FLAGS_tls_ca)};
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      MakeChannelCredentials(files, "tls");
  if (!credentials.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(credentials.status().message()).c_str());
    return nullptr;
  }
  const std::string server_name = absl::GetFlag(FLAGS_tls_server_name);
  if (!server_name.empty()) args.SetSslTargetNameOverride(server_name);
  return grpc::CreateCustomChannel(address, *credentials, args);
}

void AddCallCredentials(grpc::ClientContext& ctx) {
  const std::string key = ApiKey();
  if (!key.empty()) ctx.AddMetadata("authorization", "Bearer " + key);
}

}  // namespace pkv::client
