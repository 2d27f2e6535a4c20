// pkv-make-model: writes a Llama-family model directory with random weights (config.json,
// generation_config.json, safetensors, tokenizer.json) for tests, demos and benchmarks.
//   pkv-make-model --out DIR --shape tiny|llama3-1b|llama3-8b [--seed 1]
//                  [--dtype bfloat16|float16|float32] [--max_shard_mb 2048]
//                  [--quant none|awq|gptq|fp8 [--group_size 128] [--gptq_sym=true]
//                   [--gptq_format gptq|gptq_v2] [--fp8_strategy channel|tensor]]
// --quant writes the seven linear projections of every layer quantized (round to nearest from the
// same random float weights a --dtype float32 model of that seed holds) in the on-disk format of
// AutoAWQ (GEMM), AutoGPTQ or llm-compressor (compressed-tensors FP8), with the quantization_config
// those tools write; embeddings, norms and lm_head stay dense.
#include <cstdio>
#include <fstream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "worker/model/file_util.h"
#include "worker/tokenizer/tiny_tokenizer.h"
#include "worker/tools/model_shapes.h"
#include "worker/tools/quantize.h"
#include "worker/tools/random_model.h"

ABSL_FLAG(std::string, out, "", "output directory (created when missing)");
ABSL_FLAG(std::string, shape, "tiny", "model shape: tiny, llama3-1b or llama3-8b");
ABSL_FLAG(uint64_t, seed, 1, "weights are a pure function of the seed");
ABSL_FLAG(std::string, dtype, "",
          "dense weight dtype: bfloat16, float16 or float32 (default: float16 with --quant awq or "
          "gptq, as AutoAWQ/AutoGPTQ write, else bfloat16)");
ABSL_FLAG(std::string, quant, "none", "quantized checkpoint format: none, awq, gptq or fp8");
ABSL_FLAG(int32_t, group_size, 128,
          "awq/gptq: input columns per scale (must divide every projection's input size; the "
          "tiny shape needs 32 or 64)");
ABSL_FLAG(bool, gptq_sym, true, "gptq: symmetric (zero point 8) or asymmetric quantization");
ABSL_FLAG(std::string, gptq_format, "gptq", "gptq: checkpoint_format gptq (v1) or gptq_v2");
ABSL_FLAG(std::string, fp8_strategy, "channel", "fp8: weight scales per channel or per tensor");
ABSL_FLAG(int64_t, max_shard_mb, 2048, "largest safetensors shard in MiB");
ABSL_FLAG(std::string, chat_template, "none",
          "chat_template.jinja to write: chatml (a ChatML template, so the OpenAI API can chat "
          "with the model) or none");

namespace pkv {
namespace {

// The tiny-style byte-level BPE tokenizer sized to the model's vocabulary. Its specials sit at
// vocab - 2 (bos) and vocab - 1 (eos), as the shapes' configs say.
absl::Status WriteTokenizer(const std::string& dir, int vocab_size) {
  PKV_ASSIGN_OR_RETURN(std::string json, BuildTinyTokenizerJson(vocab_size));
  const std::string path = JoinPath(dir, "tokenizer.json");
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << json;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat(path, ": write failed"));
  return absl::OkStatus();
}

// ChatML (<|im_start|>role ... <|im_end|>), the format Qwen and many fine-tunes use. The tiny
// tokenizer has no such special tokens, so they are plain text to it: enough for demos and tests.
constexpr char kChatMlTemplate[] =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\\n' }}{% endif %}";

absl::Status WriteChatTemplate(const std::string& dir, const std::string& kind,
                               std::vector<std::string>* files) {
  if (kind == "none") return absl::OkStatus();
  if (kind != "chatml") {
    return absl::InvalidArgumentError(
        absl::StrCat("--chat_template must be chatml or none, got '", kind, "'"));
  }
  const std::string path = JoinPath(dir, "chat_template.jinja");
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << kChatMlTemplate;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat(path, ": write failed"));
  files->push_back("chat_template.jinja");
  return absl::OkStatus();
}

absl::Status Run() {
  RandomModelOptions opt;
  opt.out_dir = absl::GetFlag(FLAGS_out);
  if (opt.out_dir.empty()) return absl::InvalidArgumentError("--out is required");
  PKV_ASSIGN_OR_RETURN(opt.config, ModelShapeConfig(absl::GetFlag(FLAGS_shape)));
  QuantFlags quant;
  quant.method = absl::GetFlag(FLAGS_quant);
  quant.group_size = absl::GetFlag(FLAGS_group_size);
  quant.gptq_sym = absl::GetFlag(FLAGS_gptq_sym);
  quant.gptq_format = absl::GetFlag(FLAGS_gptq_format);
  quant.fp8_strategy = absl::GetFlag(FLAGS_fp8_strategy);
  PKV_ASSIGN_OR_RETURN(opt.config.quant, QuantConfigFromFlags(quant));
  std::string dtype = absl::GetFlag(FLAGS_dtype);
  if (dtype.empty()) dtype = opt.config.quant.int4() ? "float16" : "bfloat16";
  PKV_ASSIGN_OR_RETURN(opt.dtype, ParseTorchDtype(dtype));
  opt.seed = absl::GetFlag(FLAGS_seed);
  const int64_t shard_mb = absl::GetFlag(FLAGS_max_shard_mb);
  if (shard_mb <= 0) return absl::InvalidArgumentError("--max_shard_mb must be positive");
  opt.max_shard_bytes = shard_mb << 20;
  opt.progress = absl::GetFlag(FLAGS_shape) != "tiny";
  PKV_ASSIGN_OR_RETURN(RandomModelResult result, WriteRandomModel(opt));
  PKV_RETURN_IF_ERROR(WriteTokenizer(opt.out_dir, opt.config.vocab_size));
  result.files.push_back("tokenizer.json");
  PKV_RETURN_IF_ERROR(
      WriteChatTemplate(opt.out_dir, absl::GetFlag(FLAGS_chat_template), &result.files));
  std::printf("wrote %s: %s (%d shard%s, %.1f MiB of weights)\n", opt.out_dir.c_str(),
              absl::StrJoin(result.files, ", ").c_str(), result.num_shards,
              result.num_shards == 1 ? "" : "s", result.total_tensor_bytes / 1048576.0);
  return absl::OkStatus();
}

}  // namespace
}  // namespace pkv

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "pkv-make-model --out DIR --shape tiny|llama3-1b|llama3-8b [--seed 1] "
      "[--dtype bfloat16|float16|float32] [--chat_template chatml|none] "
      "[--quant none|awq|gptq|fp8 [--group_size 128] [--gptq_sym=true|false] "
      "[--gptq_format gptq|gptq_v2] [--fp8_strategy channel|tensor]]");
  absl::ParseCommandLine(argc, argv);
  const absl::Status st = pkv::Run();
  if (!st.ok()) {
    std::fprintf(stderr, "pkv-make-model: %s\n", st.ToString().c_str());
    return 1;
  }
  return 0;
}
