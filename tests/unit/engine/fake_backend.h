// A scripted ModelBackend for engine tests: no model, every sampled token is
// first_token + sample_index (so a request's output is known in advance), and every Step's rows
// are recorded. Not thread-safe, like a real backend; read `steps` only once the engine is idle.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "worker/model/model_backend.h"

namespace pkv::testing {

class FakeBackend : public ModelBackend {
 public:
  // What the backend saw of one row.
  struct SeenRow {
    uint64_t sequence_id;
    int32_t start_pos;
    int32_t num_tokens;
    bool sample;
    int32_t first_token;  // tokens[0] (a feedback row's token as Launch() resolved it)
  };

  FakeBackend(int32_t first_token, std::vector<int32_t> eos_token_ids) : first_token_(first_token) {
    config_.vocab_size = 256;
    config_.num_layers = 1;
    config_.num_q_heads = 1;
    config_.num_kv_heads = 1;
    config_.head_dim = 4;
    config_.hidden_size = 4;
    config_.max_position_embeddings = 256;
    config_.eos_token_ids = std::move(eos_token_ids);
  }

  const ModelConfig& config() const override { return config_; }
  int32_t page_size() const override { return 4; }
  int64_t num_kv_pages() const override { return 64; }
  std::string backend_name() const override { return "fake"; }
  std::string dtype_name() const override { return "float32"; }

  absl::Status Step(absl::Span<const BatchRow> rows, std::vector<SampleResult>* samples,
                    StepStats* stats) override {
    std::vector<SeenRow>& step = steps.emplace_back();
    for (const BatchRow& r : rows) {
      step.push_back({r.sequence_id, r.start_pos, r.num_tokens, r.sample, r.tokens[0]});
      if (r.sample) samples->push_back({first_token_ + r.sample_index, -0.5f, {}});
    }
    stats->decode_route = "cpu-reference";
    return absl::OkStatus();
  }
  absl::Status Forward(absl::Span<const BatchRow> rows, std::vector<float>* logits) override {
    return absl::UnimplementedError("FakeBackend::Forward");
  }

  std::vector<std::vector<SeenRow>> steps;  // [steps][rows]

 private:
  const int32_t first_token_;
  ModelConfig config_;
};

}  // namespace pkv::testing
