#include "tests/integration/raw_call.h"

#include "grpcpp/generic/generic_stub.h"

namespace pkv::testing {
namespace {

// Waits for the one operation in flight; false when it failed (the call is over).
bool Await(grpc::CompletionQueue& cq) {
  void* tag = nullptr;
  bool ok = false;
  return cq.Next(&tag, &ok) && ok;
}

}  // namespace

RawResult RawCall(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                  const std::string& request, const Metadata& metadata, absl::Duration deadline,
                  bool gzip) {
  RawResult result;
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  for (const auto& [key, value] : metadata) ctx.AddMetadata(key, value);
  if (gzip) ctx.set_compression_algorithm(GRPC_COMPRESS_GZIP);
  grpc::CompletionQueue cq;
  int tag = 0;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call = stub.PrepareCall(&ctx, method, &cq);
  call->StartCall(&tag);
  if (Await(cq)) {
    grpc::Slice slice(request);
    grpc::ByteBuffer buffer(&slice, 1);
    call->Write(buffer, &tag);
    if (Await(cq)) {
      call->WritesDone(&tag);
      Await(cq);
    }
    grpc::ByteBuffer response;
    while (true) {
      call->Read(&response, &tag);
      if (!Await(cq)) break;
      std::vector<grpc::Slice> slices;
      (void)response.Dump(&slices);
      std::string bytes;
      for (const grpc::Slice& s : slices) {
        bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
      }
      result.responses.push_back(std::move(bytes));
    }
  }
  call->Finish(&result.status, &tag);
  Await(cq);
  cq.Shutdown();
  void* ignored_tag = nullptr;
  bool ignored_ok = false;
  while (cq.Next(&ignored_tag, &ignored_ok)) {
  }
  return result;
}

}  // namespace pkv::testing
