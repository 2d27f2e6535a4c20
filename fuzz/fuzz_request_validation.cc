// libFuzzer target: untrusted bytes -> pkv.v1.GenerateRequest parse -> the router's validation
// (api::ValidateGenerateRequest) against a few model shapes and limits. Validation must never
// crash, hang or trip a sanitizer, whatever the fields hold (NaN, huge counts, invalid UTF-8).
#include <cstddef>
#include <cstdint>

#include "api/request_validation.h"
#include "google/protobuf/stubs/logging.h"
#include "pkv/v1/generation.pb.h"

namespace {

pkv::v1::ModelInfo Model(uint32_t vocab, uint32_t max_context) {
  pkv::v1::ModelInfo m;
  m.set_vocab_size(vocab);
  m.set_max_context(max_context);
  return m;
}

}  // namespace

// Protobuf logs an ERROR line for every string field that is not UTF-8; mutations make many.
extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The first byte picks the model and limits; the rest is the request.
  static const pkv::v1::ModelInfo kModels[] = {Model(512, 1024), Model(128256, 131072), Model(1, 2),
                                               Model(0, 0)};
  const uint8_t selector = data[0];
  pkv::v1::GenerateRequest request;
  if (!request.ParseFromArray(data + 1, static_cast<int>(size - 1))) return 0;
  pkv::api::RequestLimits limits;
  limits.max_prompt_tokens = (selector & 0x4) ? 16 : 0;
  limits.require_request_id = (selector & 0x8) != 0;
  limits.max_stop_strings = (selector & 0x10) ? 2 : 16;
  const pkv::v1::ModelInfo& model = kModels[selector & 0x3];
  (void)pkv::api::ValidateGenerateRequest(request, model, limits);
  (void)pkv::api::ValidateRequestId(request.request_id(), limits);
  (void)pkv::api::IsValidUtf8(request.text());
  return 0;
}
