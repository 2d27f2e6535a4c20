// Calls any gRPC method with raw request bytes (grpc::GenericStub), so a test can send what no
// generated stub would: malformed protobuf, invalid UTF-8 in a string field, unknown methods, odd
// metadata. Blocking; one call per invocation; thread-safe (each call has its own queue).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"

namespace pkv::testing {

struct RawResult {
  grpc::Status status;
  std::vector<std::string> responses;  // serialized response messages, in order
};

using Metadata = std::vector<std::pair<std::string, std::string>>;

// Sends `request` (serialized bytes) to `method` ("/package.Service/Method"), half-closes, reads
// every response and returns them with the final status.
// With `gzip` the message is sent compressed (grpc-encoding: gzip).
RawResult RawCall(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                  const std::string& request, const Metadata& metadata = {},
                  absl::Duration deadline = absl::Seconds(30), bool gzip = false);

}  // namespace pkv::testing
