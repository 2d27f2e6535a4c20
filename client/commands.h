// Subcommands of the `pkv` client and the helpers they share. Each Run* reads the flags (already
// parsed by main.cc) and returns the process exit code: 0 on success, otherwise the gRPC status
// code number (1..16), or 64 (EX_USAGE) for a usage error.
#pragma once

#include <memory>
#include <string>

#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"

namespace pkv::client {

int RunGenerate();
int RunHealth();
int RunLoad();
int RunInfo();
// `pkv bench serve` (bench_serve_command.cc): exit 1 when a request failed or the router's
// counter disagreed with the benchmark's count.
int RunBenchServe();
// `pkv bench api` (bench_api_command.cc): HTTP API vs gRPC on one router, same run.
int RunBenchApi();

inline constexpr int kUsageError = 64;

// A channel to `address`: TLS when --tls, --tls_ca or --tls_cert is given (client certificate
// from --tls_cert/--tls_key), else plaintext. Null after printing the error when the TLS files are
// unusable (the caller exits with kUsageError).
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address);
// Adds `authorization: Bearer <key>` when --api_key (or $PKV_API_KEY) is set.
void AddCallCredentials(grpc::ClientContext& ctx);
// --api_key, else $PKV_API_KEY, else empty.
std::string ApiKey();
// Prints "error: CODE: message" and a hint on what to do to stderr; returns the exit code.
// `what` names the peer ("router", "worker") for the hint; `ctx` supplies trailers when set.
int ReportRpcError(const grpc::Status& status, const std::string& address, const char* what,
                   const grpc::ClientContext* ctx = nullptr);
// Prints "error: <message>" for a usage problem; returns kUsageError.
int UsageError(const std::string& message);

}  // namespace pkv::client
