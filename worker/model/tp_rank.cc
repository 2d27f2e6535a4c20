#include "worker/model/tp_rank.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "common/status_macros.h"
#include "worker/model/cpu_ops.h"
#include "worker/model/rope.h"

namespace pkv {
namespace {

const float* BiasOrNull(const std::vector<float>& b) { return b.empty() ? nullptr : b.data(); }

}  // namespace

TpRank::TpRank(const ModelConfig& full, LlamaWeights shard, int32_t page_size, int64_t num_kv_pages,
               Communicator* comm, const CpuKvCacheOptions& kv)
    : full_(full),
      w_(std::move(shard)),
      vocab_(VocabShardOf(full.vocab_size, comm->world_size(), comm->rank())),
      page_size_(page_size),
      num_kv_pages_(num_kv_pages),
      comm_(comm),
      kv_(w_.config.num_layers,
          KvShape{w_.config.num_q_heads, w_.config.num_kv_heads, w_.config.head_dim, page_size},
          num_kv_pages, kv) {
  PKV_CHECK(CheckLlamaWeightSizes(w_).ok());
  PKV_CHECK(w_.config.vocab_size == vocab_.end - vocab_.begin);
}

int64_t TpRank::weight_bytes() const {
  int64_t n = 0;
  for (const TensorSpec& s : LlamaTensorSpecs(w_.config)) n += s.numel();
  return n * static_cast<int64_t>(sizeof(float));
}

int64_t TpRank::kv_bytes() const { return kv_.bytes(); }

absl::Status TpRank::AllReduce(float* data, int64_t count) {
  const auto t0 = std::chrono::steady_clock::now();
  absl::Status s = comm_->AllReduceSum(data, count);
  comm_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ++num_collectives_;
  return s;
}

absl::Status TpRank::Embed(const TpStepBatch& b) {
  const int64_t t = b.num_tokens, h = w_.config.hidden_size;
  x_.resize(t * h);
  for (int64_t i = 0; i < t; ++i) {
    const int32_t id = b.token_ids[i];
    if (id >= vocab_.begin && id < vocab_.end) {
      std::copy_n(&w_.embed[static_cast<int64_t>(id - vocab_.begin) * h], h, &x_[i * h]);
    } else {
      std::fill_n(&x_[i * h], h, 0.0f);
    }
  }
  return AllReduce(x_.data(), t * h);
}

absl::Status TpRank::AttentionBlock(int layer, const TpStepBatch& b) {
  const ModelConfig& c = w_.config;  // local head counts
  const LlamaLayerWeights& w = w_.layers[layer];
  const int64_t t = b.num_tokens, h = c.hidden_size, d = c.head_dim;
  const int64_t qd = c.num_q_heads * d, kvd = c.num_kv_heads * d;
  RmsNorm(x_.data(), t, h, w.input_norm.data(), c.rms_norm_eps, xn_.data());
  Linear(xn_.data(), t, h, w.q_proj.data(), qd, BiasOrNull(w.q_bias), q_.data());
  Linear(xn_.data(), t, h, w.k_proj.data(), kvd, BiasOrNull(w.k_bias), k_.data());
  Linear(xn_.data(), t, h, w.v_proj.data(), kvd, BiasOrNull(w.v_bias), v_.data());
  if (c.qk_norm) {
    RmsNorm(q_.data(), t * c.num_q_heads, d, w.q_norm.data(), c.rms_norm_eps, q_.data());
    RmsNorm(k_.data(), t * c.num_kv_heads, d, w.k_norm.data(), c.rms_norm_eps, k_.data());
  }
  for (int64_t i = 0; i < t; ++i) {
    const float* cs = &b.rope_cos[i * (d / 2)];
    const float* sn = &b.rope_sin[i * (d / 2)];
    ApplyRope(&q_[i * qd], c.num_q_heads, c.head_dim, cs, sn);
    ApplyRope(&k_[i * kvd], c.num_kv_heads, c.head_dim, cs, sn);
  }
  kv_.Write(layer, k_.data(), v_.data(), t, b.positions.data(), b.token_page.data());
  BlockTableView table;
  table.page_indptr = b.page_indptr.data();
  table.page_ids = b.page_ids.data();
  table.lengths = b.lengths.data();
  table.num_rows = static_cast<int32_t>(b.lengths.size());
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  kv_.Attend(layer, q_.data(), b.qo_indptr.data(), table, scale, attn_.data());
  // Row-parallel o_proj: this rank's heads' contribution to every output feature.
  Linear(attn_.data(), t, qd, w.o_proj.data(), h, nullptr, delta_.data());
  PKV_RETURN_IF_ERROR(AllReduce(delta_.data(), t * h));
  for (int64_t i = 0; i < t; ++i) {
    for (int64_t o = 0; o < h; ++o) {
      x_[i * h + o] += delta_[i * h + o] + (w.o_bias.empty() ? 0.0f : w.o_bias[o]);
    }
  }
  return absl::OkStatus();
}

absl::Status TpRank::MlpBlock(int layer, const TpStepBatch& b) {
  const ModelConfig& c = w_.config;
  const LlamaLayerWeights& w = w_.layers[layer];
  const int64_t t = b.num_tokens, h = c.hidden_size, inter = c.intermediate_size;
  RmsNorm(x_.data(), t, h, w.post_norm.data(), c.rms_norm_eps, xn_.data());
  Linear(xn_.data(), t, h, w.gate_proj.data(), inter, nullptr, gate_.data());
  Linear(xn_.data(), t, h, w.up_proj.data(), inter, nullptr, up_.data());
  SiluMul(gate_.data(), up_.data(), t * inter);
  Linear(gate_.data(), t, inter, w.down_proj.data(), h, nullptr, delta_.data());
  PKV_RETURN_IF_ERROR(AllReduce(delta_.data(), t * h));
  for (int64_t i = 0; i < t * h; ++i) x_[i] += delta_[i];
  return absl::OkStatus();
}

absl::Status TpRank::Logits(const TpStepBatch& b, std::vector<float>* logits) {
  const ModelConfig& c = w_.config;
  const int64_t s = static_cast<int64_t>(b.sampled_token.size()), h = c.hidden_size;
  const int64_t local = vocab_.end - vocab_.begin, chunk = vocab_.chunk;
  const int tp = comm_->world_size();
  last_.resize(s * h);
  for (int64_t i = 0; i < s; ++i) std::copy_n(&x_[b.sampled_token[i] * h], h, &last_[i * h]);
  RmsNorm(last_.data(), s, h, w_.final_norm.data(), c.rms_norm_eps, last_.data());
  local_.resize(s * local);
  Linear(last_.data(), s, h, w_.lm_head_matrix().data(), local, nullptr, local_.data());
  // Pad each row to the common chunk so every rank sends the same count.
  send_.assign(s * chunk, 0.0f);
  for (int64_t i = 0; i < s; ++i) std::copy_n(&local_[i * local], local, &send_[i * chunk]);
  gather_.resize(tp * s * chunk);
  const auto t0 = std::chrono::steady_clock::now();
  absl::Status st = comm_->AllGather(send_.data(), s * chunk, gather_.data());
  comm_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ++num_collectives_;
  PKV_RETURN_IF_ERROR(st);
  if (logits == nullptr) return absl::OkStatus();
  const int64_t vocab = full_.vocab_size;
  logits->resize(s * vocab);
  for (int r = 0; r < tp; ++r) {
    const VocabShard v = VocabShardOf(full_.vocab_size, tp, r);
    for (int64_t i = 0; i < s; ++i) {
      std::copy_n(&gather_[(r * s + i) * chunk], v.end - v.begin, &(*logits)[i * vocab + v.begin]);
    }
  }
  return absl::OkStatus();
}

absl::Status TpRank::Forward(const TpStepBatch& b, std::vector<float>* logits) {
  comm_seconds_ = 0;
  num_collectives_ = 0;
  const ModelConfig& c = w_.config;
  const int64_t t = b.num_tokens;
  xn_.resize(t * c.hidden_size);
  delta_.resize(t * c.hidden_size);
  q_.resize(t * c.num_q_heads * c.head_dim);
  attn_.resize(q_.size());
  k_.resize(t * c.num_kv_heads * c.head_dim);
  v_.resize(k_.size());
  gate_.resize(t * c.intermediate_size);
  up_.resize(gate_.size());
  PKV_RETURN_IF_ERROR(Embed(b));
  for (int layer = 0; layer < c.num_layers; ++layer) {
    PKV_RETURN_IF_ERROR(AttentionBlock(layer, b));
    PKV_RETURN_IF_ERROR(MlpBlock(layer, b));
  }
  return Logits(b, logits);
}

}  // namespace pkv
