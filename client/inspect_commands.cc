// `pkv health`, `pkv load`, `pkv info`: one unary call each, printed as `key: value` lines.
#include <chrono>
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "client/commands.h"
#include "client/flags.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "pkv/v1/generation.grpc.pb.h"
#include "pkv/v1/worker.grpc.pb.h"

namespace pkv::client {
namespace {

// A fresh context with the --timeout deadline and the API key (a ClientContext serves one
// call).
void SetDeadline(grpc::ClientContext& ctx) {
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::GetFlag(FLAGS_timeout)));
  AddCallCredentials(ctx);
}

bool RequireAddr(std::string* address) {
  *address = absl::GetFlag(FLAGS_addr);
  return !address->empty();
}

void PrintModelInfo(const pkv::v1::ModelInfo& m) {
  std::printf("model_name: %s\nvocab_size: %u\nmax_context: %u\npage_size: %u\n",
              m.model_name().c_str(), m.vocab_size(), m.max_context(), m.page_size());
  std::printf("eos_token_ids:");
  for (uint32_t id : m.eos_token_ids()) std::printf(" %u", id);
  std::printf("\nbackend: %s\ndtype: %s\nnum_layers: %u\nnum_q_heads: %u\nnum_kv_heads: %u\n",
              m.backend().c_str(), m.dtype().c_str(), m.num_layers(), m.num_q_heads(),
              m.num_kv_heads());
  std::printf("head_dim: %u\nhidden_size: %u\nkv_pages_total: %llu\nkv_cache_dtype: %s\n",
              m.head_dim(), m.hidden_size(), static_cast<unsigned long long>(m.kv_pages_total()),
              m.kv_cache_dtype().c_str());
  std::printf("batch_invariant: %s\n", m.batch_invariant() ? "true" : "false");
}

}  // namespace

int RunHealth() {
  std::string address;
  if (!RequireAddr(&address)) return UsageError("health needs --addr host:port");
  std::shared_ptr<grpc::Channel> channel = MakeChannel(address);
  if (channel == nullptr) return kUsageError;
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(absl::GetFlag(FLAGS_service));
  grpc::health::v1::HealthCheckResponse response;
  grpc::ClientContext ctx;
  SetDeadline(ctx);
  const grpc::Status status = stub->Check(&ctx, request, &response);
  if (!status.ok()) return ReportRpcError(status, address, "router or worker", &ctx);
  const std::string name =
      grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status());
  std::printf("%s\n", name.c_str());
  return response.status() == grpc::health::v1::HealthCheckResponse::SERVING ? 0 : 1;
}

int RunLoad() {
  std::string address;
  if (!RequireAddr(&address)) return UsageError("load needs --addr host:port (a worker)");
  std::shared_ptr<grpc::Channel> channel = MakeChannel(address);
  if (channel == nullptr) return kUsageError;
  auto stub = pkv::v1::Worker::NewStub(channel);
  pkv::v1::Load load;
  grpc::ClientContext ctx;
  SetDeadline(ctx);
  const grpc::Status status = stub->GetLoad(&ctx, pkv::v1::GetLoadRequest(), &load);
  if (!status.ok()) return ReportRpcError(status, address, "worker", &ctx);
  std::printf("worker_id: %s\nrunning: %u\nwaiting: %u\nqueued_tokens: %llu\n",
              load.worker_id().c_str(), load.running(), load.waiting(),
              static_cast<unsigned long long>(load.queued_tokens()));
  std::printf("kv_pages_used: %llu\nkv_pages_free: %llu\nkv_pages_total: %llu\ndraining: %s\n",
              static_cast<unsigned long long>(load.kv_pages_used()),
              static_cast<unsigned long long>(load.kv_pages_free()),
              static_cast<unsigned long long>(load.kv_pages_total()),
              load.draining() ? "true" : "false");
  return 0;
}

int RunInfo() {
  std::string address;
  if (!RequireAddr(&address)) return UsageError("info needs --addr host:port");
  auto channel = MakeChannel(address);
  if (channel == nullptr) return kUsageError;
  pkv::v1::ModelInfo info;
  grpc::Status status;
  {
    // A router serves pkv.v1.Generation; a worker pkv.v1.Worker. Try the router's first.
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    status = pkv::v1::Generation::NewStub(channel)->GetModelInfo(
        &ctx, pkv::v1::GetModelInfoRequest(), &info);
  }
  if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
    grpc::ClientContext ctx;
    SetDeadline(ctx);
    status = pkv::v1::Worker::NewStub(channel)->GetModelInfo(&ctx, pkv::v1::GetModelInfoRequest(),
                                                             &info);
  }
  if (!status.ok()) return ReportRpcError(status, address, "router or worker");
  PrintModelInfo(info);
  return 0;
}

}  // namespace pkv::client
