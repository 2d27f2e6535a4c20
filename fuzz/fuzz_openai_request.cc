// libFuzzer target: untrusted bytes as the body of POST /v1/chat/completions and /v1/completions
// -> ParseCompletionRequest (router/openai/openai_request.h), and a refusal's ErrorJson. Parsing
// must never crash, hang or trip a sanitizer, whatever the body holds (invalid UTF-8, deep nesting,
// huge or non-finite numbers, wrong types), and what it accepts must satisfy the documented
// ranges: the checks below abort on a request the parser should have refused.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <variant>

#include "common/utf8.h"
#include "google/protobuf/stubs/logging.h"
#include "router/openai/openai_request.h"
#include "router/openai/openai_response.h"

namespace {

using pkv::openai::ApiError;
using pkv::openai::CompletionRequest;
using pkv::openai::Endpoint;

void Check(bool ok) {
  if (!ok) std::abort();
}

void CheckAccepted(Endpoint endpoint, const CompletionRequest& r) {
  const pkv::v1::SamplingParams& s = r.request.sampling();
  Check(s.max_tokens() >= 1);
  Check(!s.has_temperature() || (s.temperature() >= 0 && s.temperature() <= 2));
  Check(!s.has_top_p() || (s.top_p() > 0 && s.top_p() <= 1));
  Check(s.min_p() >= 0 && s.min_p() <= 1);
  Check(r.top_logprobs >= 0 && r.top_logprobs <= 20);
  Check(r.logprobs || r.top_logprobs == 0);
  Check(s.logprobs() == r.logprobs && s.top_logprobs() == static_cast<uint32_t>(r.top_logprobs));
  Check(r.stream || !r.include_usage);
  Check(r.request.session_id().size() <= 256);
  for (const std::string& stop : s.stop()) Check(!stop.empty());
  if (endpoint == Endpoint::kChatCompletions) {
    Check(r.request.has_chat() && r.request.chat().messages_size() > 0);
  } else {
    Check(r.request.prompt_case() == pkv::v1::GenerateRequest::kText ||
          r.request.prompt_case() == pkv::v1::GenerateRequest::kTokenIds);
  }
  (void)r.request.SerializeAsString();
}

}  // namespace

// Protobuf logs an ERROR line for every string field that is not UTF-8.
extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  for (Endpoint endpoint : {Endpoint::kChatCompletions, Endpoint::kCompletions}) {
    // A context of 0 or 1 exercises the default max_tokens' lower bound.
    const uint32_t max_context = size % 3 == 0 ? 0 : (size % 3 == 1 ? 1 : 131072);
    std::variant<CompletionRequest, ApiError> r =
        pkv::openai::ParseCompletionRequest(endpoint, body, max_context);
    if (const CompletionRequest* ok = std::get_if<CompletionRequest>(&r)) {
      CheckAccepted(endpoint, *ok);
    } else {
      const ApiError& e = std::get<ApiError>(r);
      Check(e.http_status == 400 && !e.message.empty());
      Check(pkv::utf8::IsValid(pkv::openai::ErrorJson(e)));
    }
  }
  return 0;
}
