// Error reporting shared by the client's subcommands: the status code name, the server's message,
// the trailers that matter (retry pushback, tokens emitted) and what to do next.
#include <cstdio>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "client/commands.h"
#include "common/grpc_status.h"

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
    case grpc::StatusCode::UNAUTHENTICATED:
      return "pass a valid key with --api_key (or the PKV_API_KEY environment variable)";
    case grpc::StatusCode::UNAVAILABLE: {
      const std::string lower = absl::AsciiStrToLower(status.error_message());
      if (absl::StrContains(lower, "ssl") || absl::StrContains(lower, "handshake") ||
          absl::StrContains(lower, "tls")) {
        return std::string("TLS handshake failed with ") + address +
               ": does the server use TLS (--tls_ca to verify it, --tls_cert/--tls_key if it "
               "requires a client certificate), or plaintext (drop the TLS flags)?";
      }
      if (absl::StrContains(lower, "socket closed")) {
        return std::string("the connection to ") + address +
               " closed during setup: if it uses TLS pass --tls_ca (and --tls_cert/--tls_key "
               "when it requires a client certificate)";
      }
      if (status.error_message().find("connect") != std::string::npos) {
        return std::string("is the ") + what + " running at " + address +
               "? start it with `make serve`, or point --" +
               (std::string(what) == "router" ? "router" : "addr") + " at it";
      }
      return "no worker could serve it right now; check them with `pkv health --addr <worker>` "
             "and retry";
    }
    case grpc::StatusCode::RESOURCE_EXHAUSTED: {
      const std::string pushback = Trailer(ctx, "grpc-retry-pushback-ms");
      return "the service is at capacity; retry" +
             (pushback.empty() ? std::string(" later") : " in " + pushback + " ms");
    }
    case grpc::StatusCode::INVALID_ARGUMENT:
      return "fix the flag named above and retry";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "raise --deadline (or --timeout)";
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
