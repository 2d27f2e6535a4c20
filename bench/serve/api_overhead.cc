#include "bench/serve/api_overhead.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "bench/serve/rng.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "pkv/v1/generation.grpc.pb.h"

namespace pkv::serve_bench {
namespace {

constexpr absl::Duration kRequestTimeout = absl::Seconds(60);

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

// One keep-alive HTTP/1.1 connection that sends a streamed completion and times its events.
class HttpPath {
 public:
  static absl::StatusOr<std::unique_ptr<HttpPath>> Connect(const std::string& host_port) {
    const size_t colon = host_port.rfind(':');
    if (colon == std::string::npos) return absl::InvalidArgumentError("--http must be host:port");
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (getaddrinfo(host_port.substr(0, colon).c_str(), host_port.substr(colon + 1).c_str(), &hints,
                    &res) != 0) {
      return absl::UnavailableError(absl::StrCat("cannot resolve ", host_port));
    }
    const int fd = socket(res->ai_family, SOCK_STREAM, 0);
    const bool ok = fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0;
    freeaddrinfo(res);
    if (!ok) {
      if (fd >= 0) close(fd);
      return absl::UnavailableError(absl::StrCat("cannot connect to ", host_port));
    }
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return std::unique_ptr<HttpPath>(new HttpPath(fd));
  }
  ~HttpPath() { close(fd_); }

  // Sends `body` to /v1/completions; TTFT at the first event, E2E at the end of the stream.
  absl::Status Run(const std::string& body, const std::string& api_key, double* ttft_ms,
                   double* e2e_ms) {
    const std::string request = absl::StrCat(
        "POST /v1/completions HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n",
        api_key.empty() ? "" : absl::StrCat("Authorization: Bearer ", api_key, "\r\n"),
        "Content-Length: ", body.size(), "\r\n\r\n", body);
    const absl::Time start = absl::Now();
    if (send(fd_, request.data(), request.size(), MSG_NOSIGNAL) !=
        static_cast<ssize_t>(request.size())) {
      return absl::UnavailableError("HTTP send failed");
    }
    std::string in;
    bool first = false;
    while (true) {
      if (!first && in.find("data: {") != std::string::npos) {
        first = true;
        *ttft_ms = Ms(absl::Now() - start);
      }
      const size_t done = in.find("data: [DONE]");
      if (done != std::string::npos && in.find("\r\n0\r\n\r\n", done) != std::string::npos) break;
      if (in.rfind("HTTP/1.1 ", 0) == 0 && in.compare(9, 3, "200") != 0 &&
          in.find("\r\n\r\n") != std::string::npos) {
        return absl::InternalError(absl::StrCat("HTTP answered: ", in.substr(0, 300)));
      }
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(kRequestTimeout))) <= 0) {
        return absl::DeadlineExceededError("HTTP answer timed out");
      }
      char buf[16384];
      const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) return absl::UnavailableError("HTTP connection closed");
      in.append(buf, static_cast<size_t>(n));
    }
    *e2e_ms = Ms(absl::Now() - start);
    return first ? absl::OkStatus() : absl::InternalError("HTTP stream had no token");
  }

 private:
  explicit HttpPath(int fd) : fd_(fd) {}
  const int fd_;
};

absl::Status RunGrpc(pkv::v1::Generation::Stub& stub, const pkv::v1::GenerateRequest& request,
                     const std::string& api_key, double* ttft_ms, double* e2e_ms) {
  grpc::ClientContext ctx;
  if (!api_key.empty()) ctx.AddMetadata("authorization", absl::StrCat("Bearer ", api_key));
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + kRequestTimeout));
  const absl::Time start = absl::Now();
  std::unique_ptr<grpc::ClientReader<pkv::v1::GenerateResponse>> reader =
      stub.Generate(&ctx, request);
  pkv::v1::GenerateResponse response;
  bool first = false;
  while (reader->Read(&response)) {
    if (!first && response.has_chunk()) {
      first = true;
      *ttft_ms = Ms(absl::Now() - start);
    }
  }
  const grpc::Status status = reader->Finish();
  *e2e_ms = Ms(absl::Now() - start);
  if (!status.ok()) return absl::InternalError(absl::StrCat("gRPC: ", status.error_message()));
  return first ? absl::OkStatus() : absl::InternalError("gRPC stream had no token");
}

}  // namespace

absl::StatusOr<ApiOverheadResult> MeasureApiOverhead(const ApiOverheadOptions& o) {
  auto channel = grpc::CreateChannel(o.router, grpc::InsecureChannelCredentials());
  auto stub = pkv::v1::Generation::NewStub(channel);
  absl::StatusOr<std::unique_ptr<HttpPath>> http = HttpPath::Connect(o.http);
  if (!http.ok()) return http.status();
  Rng rng(7);
  ApiOverheadResult result;
  for (int i = 0; i < o.warmup + o.requests; ++i) {
    std::vector<uint32_t> ids;
    for (int t = 0; t < o.prompt_tokens; ++t) {
      ids.push_back(static_cast<uint32_t>(rng.Below(static_cast<uint64_t>(o.vocab_size))));
    }
    pkv::v1::GenerateRequest request;
    for (uint32_t id : ids) request.mutable_token_ids()->add_ids(id);
    request.mutable_sampling()->set_max_tokens(static_cast<uint32_t>(o.max_tokens));
    request.mutable_sampling()->set_temperature(0);
    request.mutable_sampling()->set_ignore_eos(true);
    const std::string body =
        absl::StrCat(R"({"prompt": [)", absl::StrJoin(ids, ","), R"(], "max_tokens": )",
                     o.max_tokens, R"(, "temperature": 0, "ignore_eos": true, "stream": true)",
                     o.model.empty() ? "" : absl::StrCat(R"(, "model": ")", o.model, R"(")"), "}");
    double g_ttft = 0, g_e2e = 0, h_ttft = 0, h_e2e = 0;
    // Alternate which path goes first, so neither always meets a warmer worker.
    const bool grpc_first = i % 2 == 0;
    for (int k = 0; k < 2; ++k) {
      absl::Status st = (k == 0) == grpc_first ? RunGrpc(*stub, request, o.api_key, &g_ttft, &g_e2e)
                                               : (*http)->Run(body, o.api_key, &h_ttft, &h_e2e);
      if (!st.ok()) return st;
    }
    if (i < o.warmup) continue;
    result.grpc.ttft_ms.push_back(g_ttft);
    result.grpc.e2e_ms.push_back(g_e2e);
    result.http.ttft_ms.push_back(h_ttft);
    result.http.e2e_ms.push_back(h_e2e);
  }
  return result;
}

}  // namespace pkv::serve_bench
