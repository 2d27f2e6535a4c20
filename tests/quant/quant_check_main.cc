// pkv-quant-check: loads two model directories (e.g. a quantized checkpoint and the dense float32
// twin the independent packer wrote from its own dequantization) and checks that the runtime sees
// the same model in both: every float32 weight bit-identical after loading (dequantizing), and
// the same greedy tokens from the CPU backend and, with --tp > 1, the tensor-parallel CPU backend.
//   pkv-quant-check --a DIR --b DIR [--tp 2] [--new_tokens 24]
// Exit 0 when everything matches; prints the first difference and exits 1 otherwise.
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "worker/model/checkpoint.h"
#include "worker/model/cpu_backend.h"
#include "worker/model/llama_weights.h"
#include "worker/model/model_config.h"
#include "worker/model/tp_cpu_backend.h"

ABSL_FLAG(std::string, a, "", "first model directory");
ABSL_FLAG(std::string, b, "", "second model directory");
ABSL_FLAG(int, tp, 1, "also compare the tensor-parallel CPU backend split this many ways");
ABSL_FLAG(int, new_tokens, 24, "greedy tokens to generate");

namespace pkv {
namespace {

constexpr int32_t kPageSize = 16;
constexpr int64_t kNumPages = 8;

absl::StatusOr<LlamaWeights> LoadWeights(const std::string& dir) {
  PKV_ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(dir));
  PKV_ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> ckpt, Checkpoint::Open(dir));
  return LoadLlamaWeightsF32(config, *ckpt);
}

absl::Status CompareWeights(const std::string& a_dir, const std::string& b_dir) {
  PKV_ASSIGN_OR_RETURN(LlamaWeights a, LoadWeights(a_dir));
  PKV_ASSIGN_OR_RETURN(LlamaWeights b, LoadWeights(b_dir));
  std::vector<LlamaTensorSlot> sa = LlamaTensorSlots(&a), sb = LlamaTensorSlots(&b);
  if (sa.size() != sb.size()) return absl::InternalError("different tensor lists");
  for (size_t t = 0; t < sa.size(); ++t) {
    const std::vector<float>& x = *sa[t].dst;
    const std::vector<float>& y = *sb[t].dst;
    if (sa[t].spec.name != sb[t].spec.name || x.size() != y.size()) {
      return absl::InternalError(absl::StrCat("tensor ", sa[t].spec.name, " differs in shape"));
    }
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::memcmp(&x[i], &y[i], sizeof(float)) != 0) {
        return absl::InternalError(
            absl::StrCat("tensor ", sa[t].spec.name, "[", i, "]: ", x[i], " vs ", y[i]));
      }
    }
  }
  std::printf("weights: %zu tensors bit-identical\n", sa.size());
  return absl::OkStatus();
}

// Greedy continuation of a fixed prompt, one token per step after the prefill.
absl::StatusOr<std::vector<int32_t>> Greedy(ModelBackend* backend, int new_tokens) {
  std::vector<int32_t> tokens = {3, 141, 59, 26, 5, 35, 89, 79};
  std::vector<int32_t> pages(kNumPages);
  for (int i = 0; i < kNumPages; ++i) pages[i] = i;
  SamplingParams params;
  params.temperature = 0.0f;
  int32_t fed = 0;
  for (int step = 0; step < new_tokens; ++step) {
    BatchRow row;
    row.tokens = tokens.data() + fed;
    row.num_tokens = static_cast<int32_t>(tokens.size()) - fed;
    row.start_pos = fed;
    row.pages = pages.data();
    row.num_pages = kNumPages;
    row.sample = true;
    row.params = &params;
    row.sample_index = step;
    std::vector<SampleResult> samples;
    StepStats stats;
    PKV_RETURN_IF_ERROR(backend->Step({row}, &samples, &stats));
    fed = static_cast<int32_t>(tokens.size());
    tokens.push_back(samples.at(0).token_id);
  }
  return tokens;
}

// The logits of every prompt position, bit for bit (a random tiny model's greedy continuation
// soon repeats one token, so the logits are the sharper check).
absl::Status CompareLogits(const std::string& label, ModelBackend* a, ModelBackend* b) {
  const std::vector<int32_t> prompt = {7, 300, 42, 500, 1, 99, 256, 13, 64, 128};
  const std::vector<int32_t> pages = {0};
  BatchRow row;
  row.tokens = prompt.data();
  row.num_tokens = static_cast<int32_t>(prompt.size());
  row.pages = pages.data();
  row.num_pages = 1;
  row.sample = true;
  std::vector<float> la, lb;
  PKV_RETURN_IF_ERROR(a->Forward({row}, &la));
  PKV_RETURN_IF_ERROR(b->Forward({row}, &lb));
  if (la.size() != lb.size() || la.empty() ||
      std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)) != 0) {
    return absl::InternalError(absl::StrCat(label, " logits differ"));
  }
  std::printf("%s logits: %zu values bit-identical\n", label.c_str(), la.size());
  return absl::OkStatus();
}

absl::Status CompareTokens(const std::string& label, ModelBackend* a, ModelBackend* b, int n) {
  PKV_RETURN_IF_ERROR(CompareLogits(label, a, b));
  PKV_ASSIGN_OR_RETURN(std::vector<int32_t> ta, Greedy(a, n));
  PKV_ASSIGN_OR_RETURN(std::vector<int32_t> tb, Greedy(b, n));
  std::printf("%s greedy: %s\n", label.c_str(), absl::StrJoin(ta, " ").c_str());
  if (ta != tb) {
    return absl::InternalError(
        absl::StrCat(label, " greedy tokens differ: ", absl::StrJoin(tb, " ")));
  }
  return absl::OkStatus();
}

absl::Status Run() {
  const std::string a = absl::GetFlag(FLAGS_a), b = absl::GetFlag(FLAGS_b);
  if (a.empty() || b.empty()) return absl::InvalidArgumentError("--a and --b are required");
  const int n = absl::GetFlag(FLAGS_new_tokens);
  PKV_RETURN_IF_ERROR(CompareWeights(a, b));
  PKV_ASSIGN_OR_RETURN(std::unique_ptr<ModelBackend> ca, LoadCpuBackend(a, kPageSize, kNumPages));
  PKV_ASSIGN_OR_RETURN(std::unique_ptr<ModelBackend> cb, LoadCpuBackend(b, kPageSize, kNumPages));
  PKV_RETURN_IF_ERROR(CompareTokens("cpu", ca.get(), cb.get(), n));
  const int tp = absl::GetFlag(FLAGS_tp);
  if (tp > 1) {
    PKV_ASSIGN_OR_RETURN(std::unique_ptr<ModelBackend> ta,
                         LoadTpCpuBackend(a, tp, kPageSize, kNumPages));
    PKV_ASSIGN_OR_RETURN(std::unique_ptr<ModelBackend> tb,
                         LoadTpCpuBackend(b, tp, kPageSize, kNumPages));
    PKV_RETURN_IF_ERROR(CompareTokens(absl::StrCat("tp", tp), ta.get(), tb.get(), n));
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace pkv

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const absl::Status st = pkv::Run();
  if (!st.ok()) {
    std::fprintf(stderr, "pkv-quant-check: %s\n", st.ToString().c_str());
    return 1;
  }
  return 0;
}
