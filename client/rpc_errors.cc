// Error reporting shared by the client's subcommands: the status code name, the server's message,
// the trailers that matter (retry pushback, tokens emitted) and what to do next.
#include <cstdio>
#include <string>

#include "absl/status/status.h"
#include "client/commands.h"
#include "common/grpc_status.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

namespace pkv::client {
namespace {

std::string Trailer(const grpc::ClientContext* ctx, const char* key) {
  if (ctx == nullptr) return "";
  const auto& trailers = ctx->GetServerTrailingMetadata();
  auto it = trailers.find(key);
  return it == trailers.end() ? "" : std::string(it->second.data(), it->second.size());
}

std::string Hint(const grpc::Status& status, const std::string& address, const char* what,
                 const grpc::ClientContext* ctx) {
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      if (status.error_message().find("connect") != std::string::npos) {
        return std::string("is the ") + what + " running at " + address +
               "? start it with `make serve`, or point --" +
               (std::string(what) == "router" ? "router" : "addr") + " at it";
      }
      return "no worker could serve it right now; check them with `pkv health --addr <worker>` "
             "and retry";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: {
      const std::string pushback = Trailer(ctx, "grpc-retry-pushback-ms");
      return "the service is at capacity; retry" +
             (pushback.empty() ? std::string(" later") : " in " + pushback + " ms");
    }
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "fix the flag named above and retry";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "raise --deadline_ms (or --timeout_ms)";
    case grpc::StatusCode::ABORTED: {
      const std::string emitted = Trailer(ctx, "tokens-emitted");
      return "the worker was lost mid-stream" +
             (emitted.empty() ? std::string() : " after " + emitted + " tokens") +
             "; retry the request";
    }
    case grpc::StatusCode::UNIMPLEMENTED:
      return std::string("the server at ") + address + " does not serve this call; is it a " +
             what + "?";
    case grpc::StatusCode::NOT_FOUND:
      return "the health service name is unknown there; try --service= (empty) for the server";
    default:
      return "";
  }
}

}  // namespace

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address) {
  return grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
}

int ReportRpcError(const grpc::Status& status, const std::string& address, const char* what,
                   const grpc::ClientContext* ctx) {
  const char* code = StatusCodeName(static_cast<absl::StatusCode>(status.error_code()));
  std::fprintf(stderr, "error: %s: %s\n", code, status.error_message().c_str());
  const std::string hint = Hint(status, address, what, ctx);
  if (!hint.empty()) std::fprintf(stderr, "hint: %s\n", hint.c_str());
  return static_cast<int>(status.error_code());
}

int UsageError(const std::string& message) {
  std::fprintf(stderr, "error: %s\n(run `pkv help` for usage)\n", message.c_str());
  return kUsageError;
}

}  // namespace pkv::client
