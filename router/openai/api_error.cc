#include "router/openai/api_error.h"

#include <cstdint>
#include <utility>

namespace pkv::openai {

ApiError BadRequest(std::string message, std::string param) {
  ApiError e;
  e.http_status = 400;
  e.message = std::move(message);
  e.param = std::move(param);
  return e;
}

ApiError FromGrpcStatus(const grpc::Status& status, int retry_pushback_ms) {
  ApiError e;
  e.message = status.error_message();
  switch (status.error_code()) {
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::OUT_OF_RANGE:
      e.http_status = 400;
      break;
    case grpc::StatusCode::UNAUTHENTICATED:
      e.http_status = 401;
      e.type = "authentication_error";
      e.code = "invalid_api_key";
      break;
    case grpc::StatusCode::PERMISSION_DENIED:
      e.http_status = 403;
      e.type = "permission_error";
      break;
    case grpc::StatusCode::NOT_FOUND:
      e.http_status = 404;
      e.type = "not_found_error";
      break;
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      e.http_status = 429;
      e.type = "rate_limit_error";
      // Retry-After counts whole seconds: round the router's pushback up.
      // In 64 bits: the pushback comes from a trailer, and INT_MAX + 999 would overflow.
      e.retry_after_s =
          retry_pushback_ms > 0 ? static_cast<int>((int64_t{retry_pushback_ms} + 999) / 1000) : 1;
      break;
    case grpc::StatusCode::UNAVAILABLE:
      e.http_status = 503;
      e.type = "service_unavailable";
      break;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      e.http_status = 504;
      e.type = "timeout";
      break;
    case grpc::StatusCode::CANCELLED:
      e.http_status = 499;  // the client's own cancel (nginx's "client closed request")
      e.type = "cancelled";
      break;
    default:
      e.http_status = 500;
      e.type = "server_error";
      break;
  }
  return e;
}

}  // namespace pkv::openai
