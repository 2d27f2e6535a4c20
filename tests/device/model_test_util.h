// Helpers of the CUDA-backend device tests: model directories written to disk (the CPU and CUDA
// backends then load the very same bytes), shuffled block tables, and logit comparison.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/model/model_backend.h"
#include "worker/model/model_config.h"
#include "worker/model/safetensors.h"
#include "worker/tools/quantize.h"

namespace pkv::testing {

// Test shapes with tensor-core head dims: "llama-d64" (GQA 4:2, llama3 rope scaling, untied),
// "qwen3-d128" (qk norm, q/k/v/o bias, G = 4, tied), "qwen2-d64" (q/k/v bias, G = 3),
// "llama-wide" (hidden 1024, intermediate 2048, head dim 128: the bulk-copy GEMV's row sizes).
ModelConfig DeviceTestConfig(const std::string& name);

// The matrices' scale for WriteScaledModel of DeviceTestConfig(name): 0.15, the scale the bounds
// of the 192-256-wide configs were measured at; a wider config keeps their per-projection output
// variance, 0.15 * sqrt(256 / hidden). At 0.15 llama-wide (hidden 1024) drifted up to 0.13 rel_l2
// (bf16) from the fp32 CPU backend, the same with and without the bulk GEMV
// (results/2026-12-06-h200-call23): its activations, not a kernel, broke the bounds.
float DeviceTestScale(const std::string& name);

// Writes config.json, generation_config.json and model.safetensors (dtype) with RandomWeights
// (matrices ~ N(0, scale^2)): larger than pkv-make-model's 0.02 so attention is peaky and a wrong
// mask or page shows in the logits.
absl::Status WriteScaledModel(const std::string& dir, const ModelConfig& config, DType dtype,
                              uint32_t seed, float scale);

// The quantized-backend tests' shape ("tiny" widened): every matrix's input size a multiple of
// 128 (4-bit groups of 128), head_dim 64 (the tensor-core attention kernels), GQA 4:2, 2 layers,
// untied lm_head; TP = 2 keeps whole groups (o_proj 128 and down_proj 256 input columns a rank).
ModelConfig QuantTestConfig();

// Writes `config` quantized as `pkv-make-model --quant` writes it (`quant`: method, group size,
// GPTQ symmetry, FP8 strategy) from the random float weights of `seed`, activations `dtype`.
absl::Status WriteQuantModel(const std::string& dir, const ModelConfig& config, DType dtype,
                             const QuantFlags& quant, uint64_t seed = 5);

// Bytes one decode step reads less, over the model, when a rank of `tp` holds its q;k;v, o,
// gate;up and down projections packed in `method` ("awq": k / 2 + 4 k / 128 bytes a row; "fp8",
// per channel: k + 4) instead of 2 k bytes a row (16-bit).
int64_t PackedBytesSaved(const ModelConfig& config, const std::string& method, int tp);

// One greedy Step() of the prompt {1, 2, 3} on page 0: the sampled token, or the error (tests of
// random weights that only need them to run).
absl::StatusOr<int32_t> GreedyTokenOf(ModelBackend* backend);
// Writes the test model `name` into `dir`: "tiny" exactly as pkv-make-model writes it (seed 7;
// head_dim 16, the generic attention kernel), or DeviceTestConfig(name) by WriteScaledModel
// (seed 11, scale 0.15).
absl::Status WriteNamedTestModel(const std::string& dir, const std::string& name, DType dtype);

// A pool of page ids [0, pool) in random order, handed out without replacement: sequences of one
// test never share a page (two rows of one step writing the same KV slot would race, and the
// result would depend on which write lands last).
class ShuffledPagePool {
 public:
  ShuffledPagePool(int32_t pool, uint32_t seed);
  // The next `count` unused pages; fails the test when the pool runs dry.
  std::vector<int32_t> Take(int32_t count);

 private:
  std::vector<int32_t> free_;  // popped from the back
};

struct LogitError {
  double max_abs = 0;  // max |got - ref|
  double max_ref = 0;  // max |ref|
  double rel_l2 = 0;   // ||got - ref|| / ||ref||
  int64_t non_finite = 0;
};
LogitError CompareLogits(const float* got, const float* ref, int64_t n);

// Index of the largest value (lowest index on ties) and the gap to the second largest.
int32_t ArgMax(const float* v, int32_t n, float* margin);

// A sequence of a backend test: its tokens and its (shuffled) block table, shared by the backends
// a test compares.
struct Seq {
  std::vector<int32_t> tokens;
  std::vector<int32_t> pages;
};

// The batch row feeding s.tokens[begin, end) at positions begin.. (views into `s`).
BatchRow Row(const Seq& s, int32_t begin, int32_t end, bool sample = true,
             const SamplingParams* params = nullptr, int32_t sample_index = 0);

}  // namespace pkv::testing
