// Helpers shared by the tensor-parallel tests: a model wide enough for TP=4, a scratch directory.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "worker/model/model_config.h"

namespace pkv::testing {

// H_q 8 / H_kv 4 (TP 1, 2, 4), head_dim 16 with hidden 96 (so o_proj is [96][128], not square),
// q/k/v and o_proj biases (o_bias is replicated and must be added once), an untied LM head and a
// vocabulary of 1001, which tp = 2 and 4 split unevenly (chunks 501 / 251, the last rank short).
inline ModelConfig WideConfig() {
  ModelConfig c;
  c.architecture = "LlamaForCausalLM";
  c.model_type = "llama";
  c.vocab_size = 1001;
  c.hidden_size = 96;
  c.intermediate_size = 160;
  c.num_layers = 3;
  c.num_q_heads = 8;
  c.num_kv_heads = 4;
  c.head_dim = 16;
  c.max_position_embeddings = 1024;
  c.rms_norm_eps = 1e-5f;
  c.rope_theta = 10000.0f;
  c.attention_bias = true;
  c.o_proj_bias = true;
  c.torch_dtype = "float32";
  c.eos_token_ids = {1000};
  c.bos_token_id = 999;
  return c;
}

class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag) {
    static int counter = 0;
    path_ = (std::filesystem::path(::testing::TempDir()) /
             absl::StrCat(tag, "_", ::getpid(), "_", counter++))
                .string();
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace pkv::testing
