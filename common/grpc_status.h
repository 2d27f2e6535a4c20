// The one place where absl::Status and grpc::Status are converted into each other. The codes map
// one to one (gRPC and abseil share the canonical code space); messages pass through unchanged.
#pragma once

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace pkv {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

// Canonical upper-case code name, e.g. "RESOURCE_EXHAUSTED" (metric label values use these).
const char* StatusCodeName(absl::StatusCode code);

}  // namespace pkv
