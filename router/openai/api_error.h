// An error answered in OpenAI's shape, {"error": {"message", "type", "param", "code"}}, with the
// HTTP status OpenAI's clients expect, and the mapping from the gRPC statuses of the Generation
// service to it (the HTTP API is a client of that service; see openai_frontend.h).
#pragma once

#include <string>

#include "grpcpp/support/status.h"

namespace pkv::openai {

struct ApiError {
  int http_status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;      // the request field at fault; "" is written as null
  std::string code;       // a machine-readable code; "" is written as null
  int retry_after_s = 0;  // > 0: a Retry-After header (429)
};

ApiError BadRequest(std::string message, std::string param = "");

// INVALID_ARGUMENT / FAILED_PRECONDITION 400, UNAUTHENTICATED 401, NOT_FOUND 404,
// RESOURCE_EXHAUSTED 429 (Retry-After from `retry_pushback_ms`, at least 1 s), UNAVAILABLE 503,
// DEADLINE_EXCEEDED 504, CANCELLED 499, anything else 500.
ApiError FromGrpcStatus(const grpc::Status& status, int retry_pushback_ms);

}  // namespace pkv::openai
