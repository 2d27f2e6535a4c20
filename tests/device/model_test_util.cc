#include "tests/device/model_test_util.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "gtest/gtest.h"
#include "kernels/common/float16.h"
#include "tests/unit/model/test_model.h"
#include "worker/model/llama_weights.h"
#include "worker/tools/model_shapes.h"
#include "worker/tools/random_model.h"
#include "worker/tools/safetensors_writer.h"

namespace pkv::testing {

ModelConfig DeviceTestConfig(const std::string& name) {
  ModelConfig c;
  c.architecture = "LlamaForCausalLM";
  c.model_type = "llama";
  c.vocab_size = 512;
  c.hidden_size = 256;
  c.intermediate_size = 384;
  c.num_layers = 2;
  c.num_q_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 64;
  c.max_position_embeddings = 4096;
  c.rms_norm_eps = 1e-5f;
  c.rope_theta = 500000.0f;
  c.bos_token_id = c.vocab_size - 2;
  c.eos_token_ids = {c.vocab_size - 1};
  if (name == "llama-d64") {
    // A small original context so the 64-dim head's frequencies fall in all three llama3 bands.
    c.rope_scaling = RopeScaling{"llama3", 8.0f, 1.0f, 4.0f, 256};
  } else if (name == "qwen3-d128") {
    c.architecture = "Qwen3ForCausalLM";
    c.model_type = "qwen3";
    c.vocab_size = 384;
    c.num_q_heads = 4;
    c.num_kv_heads = 1;
    c.head_dim = 128;  // 4 * 128 != 256: o_proj is [hidden][512]
    c.qk_norm = true;
    c.attention_bias = true;
    c.o_proj_bias = true;
    c.tie_word_embeddings = true;
    c.rope_theta = 1e6f;
    c.bos_token_id = c.vocab_size - 2;
    c.eos_token_ids = {c.vocab_size - 1};
  } else if (name == "qwen2-d64") {
    c.architecture = "Qwen2ForCausalLM";
    c.model_type = "qwen2";
    c.hidden_size = 192;
    c.num_q_heads = 3;
    c.num_kv_heads = 1;
    c.attention_bias = true;
    c.rope_theta = 1e6f;
  } else if (name == "llama-wide") {
    // Rows of whole 2 KB chunks (k = 1024 and 2048): the bulk-copy GEMV's shapes (gemv_bulk.cuh).
    c.hidden_size = 1024;
    c.intermediate_size = 2048;
    c.num_q_heads = 8;
    c.num_kv_heads = 2;
    c.head_dim = 128;
  }
  return c;
}

float DeviceTestScale(const std::string& name) {
  constexpr float kScale = 0.15f;
  constexpr int32_t kBoundsHidden = 256;
  const int32_t hidden = DeviceTestConfig(name).hidden_size;
  return hidden <= kBoundsHidden ? kScale : kScale * std::sqrt(float{kBoundsHidden} / hidden);
}

absl::Status WriteScaledModel(const std::string& dir, const ModelConfig& config, DType dtype,
                              uint32_t seed, float scale) {
  LlamaWeights w = RandomWeights(config, seed, scale);
  std::vector<LlamaTensorSlot> slots = LlamaTensorSlots(&w);
  std::vector<PlannedTensor> planned;
  for (const LlamaTensorSlot& s : slots) planned.push_back({s.spec.name, dtype, s.spec.shape});
  PKV_ASSIGN_OR_RETURN(auto writer, SafetensorsWriter::Create(dir + "/model.safetensors", planned));
  std::vector<uint8_t> bytes;
  for (const LlamaTensorSlot& s : slots) {
    const std::vector<float>& v = *s.dst;
    bytes.resize(v.size() * DTypeSize(dtype));
    for (size_t i = 0; i < v.size(); ++i) {
      if (dtype == DType::kF32) {
        std::memcpy(&bytes[4 * i], &v[i], 4);
      } else {
        const uint16_t b = dtype == DType::kBF16 ? ToBFloat16(v[i]).bits : ToHalf(v[i]).bits;
        std::memcpy(&bytes[2 * i], &b, 2);
      }
    }
    PKV_RETURN_IF_ERROR(writer->Append(bytes));
  }
  PKV_RETURN_IF_ERROR(writer->Finish());
  ModelConfig c = config;
  c.torch_dtype =
      dtype == DType::kF16 ? "float16" : (dtype == DType::kBF16 ? "bfloat16" : "float32");
  std::ofstream(dir + "/config.json") << ModelConfigToJson(c);
  std::ofstream(dir + "/generation_config.json") << GenerationConfigToJson(c);
  return absl::OkStatus();
}

ShuffledPagePool::ShuffledPagePool(int32_t pool, uint32_t seed) : free_(pool) {
  std::iota(free_.begin(), free_.end(), 0);
  std::mt19937 rng(seed);
  std::shuffle(free_.begin(), free_.end(), rng);
}

ModelConfig QuantTestConfig() {
  ModelConfig c = *ModelShapeConfig("tiny");
  c.hidden_size = 256;
  c.intermediate_size = 512;
  c.num_q_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 64;
  c.num_layers = 2;
  c.tie_word_embeddings = false;
  return c;
}

absl::Status WriteQuantModel(const std::string& dir, const ModelConfig& config, DType dtype,
                             const QuantFlags& quant, uint64_t seed) {
  RandomModelOptions o;
  o.out_dir = dir;
  o.config = config;
  o.dtype = dtype;
  o.seed = seed;
  PKV_ASSIGN_OR_RETURN(o.config.quant, QuantConfigFromFlags(quant));
  return WriteRandomModel(o).status();
}

int64_t PackedBytesSaved(const ModelConfig& c, const std::string& method, int tp) {
  const int64_t h = c.hidden_size, inter = c.intermediate_size / tp;
  const int64_t q_dim = int64_t{c.num_q_heads} * c.head_dim / tp;
  const int64_t qkv = q_dim + int64_t{2 * c.num_kv_heads} * c.head_dim / tp;
  const int64_t shapes[4][2] = {{qkv, h}, {h, q_dim}, {2 * inter, h}, {h, inter}};  // {n, k}
  int64_t saved = 0;
  for (const auto& [n, k] : shapes) {
    const int64_t packed = method == "awq" ? n * (k / 2 + 4 * (k / 128)) : n * k + 4 * n;
    saved += 2 * n * k - packed;
  }
  return c.num_layers * saved;
}

absl::StatusOr<int32_t> GreedyTokenOf(ModelBackend* backend) {
  std::vector<int32_t> tokens = {1, 2, 3};
  std::vector<int32_t> pages = {0};
  SamplingParams greedy;
  greedy.temperature = 0.f;
  BatchRow row;
  row.tokens = tokens.data();
  row.num_tokens = 3;
  row.pages = pages.data();
  row.num_pages = 1;
  row.sample = true;
  row.params = &greedy;
  std::vector<SampleResult> out;
  PKV_RETURN_IF_ERROR(backend->Step({&row, 1}, &out, nullptr));
  if (out.size() != 1) return absl::InternalError("Step sampled no token");
  return out[0].token_id;
}

std::vector<int32_t> ShuffledPagePool::Take(int32_t count) {
  EXPECT_LE(count, static_cast<int32_t>(free_.size())) << "the test's page pool ran dry";
  count = std::min(count, static_cast<int32_t>(free_.size()));
  std::vector<int32_t> out(free_.end() - count, free_.end());
  free_.resize(free_.size() - count);
  return out;
}

LogitError CompareLogits(const float* got, const float* ref, int64_t n) {
  LogitError e;
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(got[i])) {
      ++e.non_finite;
      continue;
    }
    const double d = std::abs(static_cast<double>(got[i]) - ref[i]);
    e.max_abs = std::max(e.max_abs, d);
    e.max_ref = std::max(e.max_ref, std::abs(static_cast<double>(ref[i])));
    num += d * d;
    den += static_cast<double>(ref[i]) * ref[i];
  }
  e.rel_l2 = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  return e;
}

int32_t ArgMax(const float* v, int32_t n, float* margin) {
  int32_t best = 0;
  for (int32_t i = 1; i < n; ++i) best = v[i] > v[best] ? i : best;
  float second = -INFINITY;
  for (int32_t i = 0; i < n; ++i) {
    if (i != best) second = std::max(second, v[i]);
  }
  *margin = v[best] - second;
  return best;
}

BatchRow Row(const Seq& s, int32_t begin, int32_t end, bool sample, const SamplingParams* params,
             int32_t sample_index) {
  BatchRow r;
  r.tokens = s.tokens.data() + begin;
  r.num_tokens = end - begin;
  r.start_pos = begin;
  r.pages = s.pages.data();
  r.num_pages = static_cast<int32_t>(s.pages.size());
  r.sample = sample;
  r.params = params;
  r.sample_index = sample_index;
  return r;
}

absl::Status WriteNamedTestModel(const std::string& dir, const std::string& name, DType dtype) {
  if (name != "tiny") return WriteScaledModel(dir, DeviceTestConfig(name), dtype, 11, 0.15f);
  RandomModelOptions o;
  o.out_dir = dir;
  o.config = *ModelShapeConfig("tiny");
  o.dtype = dtype;
  o.seed = 7;
  return WriteRandomModel(o).status();
}

}  // namespace pkv::testing
