// `pkv generate`: one Generate stream through the router. Text goes to stdout as chunks arrive
// (flushed each time); a summary line goes to stderr at the end. A CLI, so the blocking sync API
// is the right tool here (the servers use the callback API).
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>

#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "client/commands.h"
#include "client/flags.h"
#include "pkv/v1/generation.grpc.pb.h"

namespace pkv::client {
namespace {

using Clock = std::chrono::steady_clock;

absl::Status ParseIds(const std::string& flag, absl::string_view text,
                      google::protobuf::RepeatedField<uint32_t>* out) {
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    uint32_t id = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &id)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, ": '", part, "' is not a token id (a non-negative integer)"));
    }
    out->Add(id);
  }
  return absl::OkStatus();
}

absl::Status SetPrompt(pkv::v1::GenerateRequest& request) {
  const std::string prompt = absl::GetFlag(FLAGS_prompt);
  const std::string ids = absl::GetFlag(FLAGS_token_ids);
  if (prompt.empty() == ids.empty()) {
    return absl::InvalidArgumentError("give exactly one of --prompt \"text\" or --token_ids 1,2,3");
  }
  if (!prompt.empty()) {
    request.set_text(prompt);
    return absl::OkStatus();
  }
  return ParseIds("token_ids", ids, request.mutable_token_ids()->mutable_ids());
}

absl::Status SetSampling(pkv::v1::SamplingParams& s) {
  if (absl::GetFlag(FLAGS_max_tokens) < 1) {
    return absl::InvalidArgumentError("--max_tokens must be >= 1");
  }
  s.set_max_tokens(static_cast<uint32_t>(absl::GetFlag(FLAGS_max_tokens)));
  // Unset optional flags leave the fields unset: the server's defaults apply.
  if (const std::optional<double> t = absl::GetFlag(FLAGS_temperature)) {
    s.set_temperature(static_cast<float>(*t));
  }
  if (const std::optional<double> p = absl::GetFlag(FLAGS_top_p)) {
    s.set_top_p(static_cast<float>(*p));
  }
  if (absl::GetFlag(FLAGS_top_k) < 0) return absl::InvalidArgumentError("--top_k must be >= 0");
  s.set_top_k(static_cast<uint32_t>(absl::GetFlag(FLAGS_top_k)));
  s.set_min_p(static_cast<float>(absl::GetFlag(FLAGS_min_p)));
  if (const std::optional<uint64_t> seed = absl::GetFlag(FLAGS_seed)) s.set_seed(*seed);
  for (const std::string& stop : absl::GetFlag(FLAGS_stop)) {
    std::string unescaped;
    std::string error;
    if (!absl::CUnescape(stop, &unescaped, &error)) {
      return absl::InvalidArgumentError(absl::StrCat("--stop '", stop, "': ", error));
    }
    s.add_stop(unescaped);
  }
  for (const std::string& id : absl::GetFlag(FLAGS_stop_token_ids)) {
    absl::Status st = ParseIds("stop_token_ids", id, s.mutable_stop_token_ids());
    if (!st.ok()) return st;
  }
  s.set_ignore_eos(absl::GetFlag(FLAGS_ignore_eos));
  s.set_logprobs(absl::GetFlag(FLAGS_logprobs));
  if (absl::GetFlag(FLAGS_top_logprobs) < 0) {
    return absl::InvalidArgumentError("--top_logprobs must be >= 0");
  }
  s.set_top_logprobs(static_cast<uint32_t>(absl::GetFlag(FLAGS_top_logprobs)));
  return absl::OkStatus();
}

absl::StatusOr<pkv::v1::GenerateRequest> BuildRequest() {
  pkv::v1::GenerateRequest request;
  absl::Status st = SetPrompt(request);
  if (!st.ok()) return st;
  st = SetSampling(*request.mutable_sampling());
  if (!st.ok()) return st;
  request.set_request_id(absl::GetFlag(FLAGS_request_id));
  request.set_session_id(absl::GetFlag(FLAGS_session_id));
  request.set_priority(absl::GetFlag(FLAGS_priority));
  return request;
}

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

void PrintSummary(const pkv::v1::Complete& complete, Clock::time_point start,
                  Clock::time_point first_token, Clock::time_point end, double logprob_sum,
                  int logprob_count) {
  const bool got_tokens = first_token != Clock::time_point{};
  const uint32_t n = complete.completion_tokens();
  // Whole-stream rate: a decode-only rate is unreliable here because the router coalesces chunks
  // for a slow reader, so several tokens can arrive in one message.
  const double total_s = Ms(end - start) / 1000.0;
  const double rate = total_s > 0 ? n / total_s : 0.0;
  std::string finish = pkv::v1::FinishReason_Name(complete.finish_reason());
  if (absl::StartsWith(finish, "FINISH_REASON_")) finish = finish.substr(14);
  std::string line = absl::StrCat(
      "\n[pkv] ttft ", got_tokens ? absl::StrFormat("%.1f ms", Ms(first_token - start)) : "-",
      " | ", absl::StrFormat("%.1f", rate), " tokens/s | ", n, " completion tokens (",
      complete.prompt_tokens(), " prompt) | finish ", finish, " | worker ", complete.worker_id(),
      " | request ", complete.request_id());
  if (complete.migrations() > 0) absl::StrAppend(&line, " | migrations ", complete.migrations());
  if (!complete.matched_stop().empty()) {
    absl::StrAppend(&line, " | stop \"", absl::CEscape(complete.matched_stop()), "\"");
  }
  if (logprob_count > 0) {
    absl::StrAppend(&line, absl::StrFormat(" | mean logprob %.3f", logprob_sum / logprob_count));
  }
  std::fprintf(stderr, "%s\n", line.c_str());
}

}  // namespace

int RunGenerate() {
  absl::StatusOr<pkv::v1::GenerateRequest> request = BuildRequest();
  if (!request.ok()) return UsageError(std::string(request.status().message()));
  const std::string address = absl::GetFlag(FLAGS_router);
  std::shared_ptr<grpc::Channel> channel = MakeChannel(address);
  if (channel == nullptr) return kUsageError;
  auto stub = pkv::v1::Generation::NewStub(channel);
  grpc::ClientContext ctx;
  AddCallCredentials(ctx);
  const absl::Duration deadline = absl::GetFlag(FLAGS_deadline);
  if (deadline < absl::ZeroDuration()) return UsageError("--deadline must be >= 0 (0 = none)");
  if (deadline > absl::ZeroDuration()) {
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  }
  const Clock::time_point start = Clock::now();
  Clock::time_point first_token{};
  auto reader = stub->Generate(&ctx, *request);
  pkv::v1::GenerateResponse response;
  pkv::v1::Complete complete;
  double logprob_sum = 0;
  int logprob_count = 0;
  while (reader->Read(&response)) {
    if (response.has_chunk()) {
      if (first_token == Clock::time_point{}) first_token = Clock::now();
      std::fwrite(response.chunk().text().data(), 1, response.chunk().text().size(), stdout);
      std::fflush(stdout);
      for (const auto& lp : response.chunk().logprobs()) {
        logprob_sum += lp.logprob();
        ++logprob_count;
      }
    } else if (response.has_complete()) {
      complete = response.complete();
    }
  }
  const Clock::time_point end = Clock::now();
  const grpc::Status status = reader->Finish();
  if (!status.ok()) {
    std::fflush(stdout);
    std::fputc('\n', stderr);
    return ReportRpcError(status, address, "router", &ctx);
  }
  PrintSummary(complete, start, first_token, end, logprob_sum, logprob_count);
  return 0;
}

}  // namespace pkv::client
