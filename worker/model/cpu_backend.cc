#include "worker/model/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "worker/model/batch_check.h"
#include "worker/model/checkpoint.h"
#include "worker/model/cpu_ops.h"
#include "worker/model/cpu_step.h"
#include "worker/model/kv_cache_scales.h"
#include "worker/model/rope.h"

namespace pkv {

namespace {

KvShape AttentionShape(const ModelConfig& c, int32_t page_size) {
  return KvShape{c.num_q_heads, c.num_kv_heads, c.head_dim, page_size};
}

}  // namespace

CpuModelBackend::CpuModelBackend(LlamaWeights weights, int32_t page_size, int64_t num_kv_pages,
                                 const CpuKvCacheOptions& kv)
    : weights_(std::move(weights)),
      page_size_(page_size),
      num_kv_pages_(num_kv_pages),
      kv_(weights_.config.num_layers, AttentionShape(weights_.config, page_size), num_kv_pages,
          kv) {
  PKV_CHECK(CheckLlamaWeightSizes(weights_).ok());
  PKV_CHECK(page_size_ > 0 && num_kv_pages_ > 0);
  inv_freq_ = RopeInvFrequencies(weights_.config);
}

absl::StatusOr<std::unique_ptr<CpuModelBackend>> CpuModelBackend::Create(
    LlamaWeights weights, int32_t page_size, int64_t num_kv_pages, const CpuKvCacheOptions& kv) {
  PKV_RETURN_IF_ERROR(CheckLlamaWeightSizes(weights));
  PKV_RETURN_IF_ERROR(CheckCpuKvCacheOptions(kv, weights.config.num_layers));
  if (page_size <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("page_size must be positive, got ", page_size));
  }
  const ModelConfig& c = weights.config;
  const int64_t page_elems = static_cast<int64_t>(c.num_kv_heads) * page_size * c.head_dim;
  if (num_kv_pages <= 0 || num_kv_pages > std::numeric_limits<int32_t>::max() ||
      num_kv_pages > (int64_t{1} << 40) / page_elems) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_kv_pages ", num_kv_pages, " is not in [1, what fits the address space]"));
  }
  return std::make_unique<CpuModelBackend>(std::move(weights), page_size, num_kv_pages, kv);
}

absl::Status CpuModelBackend::ValidateBatch(absl::Span<const BatchRow> rows,
                                            bool need_params) const {
  return ValidateBatchRows(weights_.config, page_size_, num_kv_pages_, rows, need_params);
}

void CpuModelBackend::PrepareBatch(absl::Span<const BatchRow> rows) {
  const ModelConfig& c = weights_.config;
  const int32_t half = c.head_dim / 2;
  token_ids_.clear();
  positions_.clear();
  token_page_.clear();
  qo_indptr_.assign(1, 0);
  page_indptr_.assign(1, 0);
  page_ids_.clear();
  lengths_.clear();
  sampled_token_index_.clear();
  for (const BatchRow& row : rows) {
    const int32_t end = row.start_pos + row.num_tokens;
    for (int32_t i = 0; i < row.num_tokens; ++i) {
      const int32_t pos = row.start_pos + i;
      token_ids_.push_back(row.tokens[i]);
      positions_.push_back(pos);
      token_page_.push_back(row.pages[pos / page_size_]);
    }
    if (row.sample) sampled_token_index_.push_back(static_cast<int32_t>(token_ids_.size()) - 1);
    const int32_t needed = (end + page_size_ - 1) / page_size_;
    page_ids_.insert(page_ids_.end(), row.pages, row.pages + needed);
    qo_indptr_.push_back(static_cast<int32_t>(token_ids_.size()));
    page_indptr_.push_back(static_cast<int32_t>(page_ids_.size()));
    lengths_.push_back(end);
  }
  num_tokens_ = static_cast<int64_t>(token_ids_.size());
  const int64_t t = num_tokens_;
  x_.resize(t * c.hidden_size);
  xn_.resize(t * c.hidden_size);
  q_.resize(t * c.num_q_heads * c.head_dim);
  attn_.resize(q_.size());
  k_.resize(t * c.num_kv_heads * c.head_dim);
  v_.resize(k_.size());
  gate_.resize(t * c.intermediate_size);
  up_.resize(gate_.size());
  rope_cos_.resize(t * half);
  rope_sin_.resize(t * half);
  for (int64_t i = 0; i < t; ++i) {
    RopeCosSin(inv_freq_, positions_[i], &rope_cos_[i * half], &rope_sin_[i * half]);
  }
}

void CpuModelBackend::AttentionBlock(int layer) {
  const ModelConfig& c = weights_.config;
  const LlamaLayerWeights& w = weights_.layers[layer];
  const int64_t t = num_tokens_, h = c.hidden_size, d = c.head_dim;
  const int64_t qd = c.num_q_heads * d, kvd = c.num_kv_heads * d;
  auto bias = [](const std::vector<float>& b) { return b.empty() ? nullptr : b.data(); };
  RmsNorm(x_.data(), t, h, w.input_norm.data(), c.rms_norm_eps, xn_.data());
  Linear(xn_.data(), t, h, w.q_proj.data(), qd, bias(w.q_bias), q_.data());
  Linear(xn_.data(), t, h, w.k_proj.data(), kvd, bias(w.k_bias), k_.data());
  Linear(xn_.data(), t, h, w.v_proj.data(), kvd, bias(w.v_bias), v_.data());
  if (c.qk_norm) {  // Qwen3: per-head RMSNorm before RoPE
    RmsNorm(q_.data(), t * c.num_q_heads, d, w.q_norm.data(), c.rms_norm_eps, q_.data());
    RmsNorm(k_.data(), t * c.num_kv_heads, d, w.k_norm.data(), c.rms_norm_eps, k_.data());
  }
  for (int64_t i = 0; i < t; ++i) {
    const float* cs = &rope_cos_[i * (d / 2)];
    const float* sn = &rope_sin_[i * (d / 2)];
    ApplyRope(&q_[i * qd], c.num_q_heads, c.head_dim, cs, sn);
    ApplyRope(&k_[i * kvd], c.num_kv_heads, c.head_dim, cs, sn);
  }
  kv_.Write(layer, k_.data(), v_.data(), t, positions_.data(), token_page_.data());
  BlockTableView table;
  table.page_indptr = page_indptr_.data();
  table.page_ids = page_ids_.data();
  table.lengths = lengths_.data();
  table.num_rows = static_cast<int32_t>(lengths_.size());
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  kv_.Attend(layer, q_.data(), qo_indptr_.data(), table, scale, attn_.data());
  LinearAccumulate(attn_.data(), t, qd, w.o_proj.data(), h, bias(w.o_bias), x_.data());
}

void CpuModelBackend::MlpBlock(int layer) {
  const ModelConfig& c = weights_.config;
  const LlamaLayerWeights& w = weights_.layers[layer];
  const int64_t t = num_tokens_, h = c.hidden_size, inter = c.intermediate_size;
  RmsNorm(x_.data(), t, h, w.post_norm.data(), c.rms_norm_eps, xn_.data());
  Linear(xn_.data(), t, h, w.gate_proj.data(), inter, nullptr, gate_.data());
  Linear(xn_.data(), t, h, w.up_proj.data(), inter, nullptr, up_.data());
  SiluMul(gate_.data(), up_.data(), t * inter);
  LinearAccumulate(gate_.data(), t, inter, w.down_proj.data(), h, nullptr, x_.data());
}

void CpuModelBackend::ComputeLogits() {
  const ModelConfig& c = weights_.config;
  const int64_t s = static_cast<int64_t>(sampled_token_index_.size()), h = c.hidden_size;
  last_.resize(s * h);
  for (int64_t i = 0; i < s; ++i) {
    std::copy_n(&x_[sampled_token_index_[i] * h], h, &last_[i * h]);
  }
  RmsNorm(last_.data(), s, h, weights_.final_norm.data(), c.rms_norm_eps, last_.data());
  logits_.resize(s * c.vocab_size);
  Linear(last_.data(), s, h, weights_.lm_head_matrix().data(), c.vocab_size, nullptr,
         logits_.data());
}

void CpuModelBackend::RunBatch(absl::Span<const BatchRow> rows) {
  PrepareBatch(rows);
  const int64_t h = weights_.config.hidden_size;
  for (int64_t t = 0; t < num_tokens_; ++t) {
    std::copy_n(&weights_.embed[static_cast<int64_t>(token_ids_[t]) * h], h, &x_[t * h]);
  }
  for (int layer = 0; layer < weights_.config.num_layers; ++layer) {
    AttentionBlock(layer);
    MlpBlock(layer);
  }
  ComputeLogits();
}

absl::Status CpuModelBackend::Step(absl::Span<const BatchRow> rows,
                                   std::vector<SampleResult>* samples, StepStats* stats) {
  PKV_RETURN_IF_ERROR(ValidateBatch(rows, /*need_params=*/true));
  RunBatch(rows);
  PKV_RETURN_IF_ERROR(
      SampleRows(rows, logits_, weights_.config.vocab_size, &sampler_scratch_, samples));
  if (stats != nullptr) *stats = CpuStepStats(rows);
  return absl::OkStatus();
}

absl::Status CpuModelBackend::Forward(absl::Span<const BatchRow> rows, std::vector<float>* logits) {
  PKV_RETURN_IF_ERROR(ValidateBatch(rows, /*need_params=*/false));
  RunBatch(rows);
  logits->assign(logits_.begin(), logits_.end());
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ModelBackend>> LoadCpuBackend(const std::string& model_dir,
                                                             int32_t page_size,
                                                             int64_t num_kv_pages,
                                                             KvCacheDtype kv_dtype) {
  PKV_ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(model_dir));
  PKV_ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> checkpoint, Checkpoint::Open(model_dir));
  PKV_ASSIGN_OR_RETURN(LlamaWeights weights, LoadLlamaWeightsF32(config, *checkpoint));
  CpuKvCacheOptions kv;
  kv.dtype = kv_dtype;
  if (IsFp8(kv_dtype)) {
    PKV_ASSIGN_OR_RETURN(kv.scales, LoadKvCacheScales(*checkpoint, config.num_layers));
  }
  checkpoint.reset();  // unmap the files: the float32 copy is all the CPU backend needs
  PKV_ASSIGN_OR_RETURN(std::unique_ptr<CpuModelBackend> backend,
                       CpuModelBackend::Create(std::move(weights), page_size, num_kv_pages, kv));
  PKV_LOG(INFO) << "cpu backend: " << model_dir << ", " << config.num_layers << " layers, "
                << num_kv_pages << " KV pages of " << page_size << " tokens, "
                << backend->kv_bytes() / double(1 << 20) << " MiB KV " << CpuKvCacheDescription(kv);
  return std::unique_ptr<ModelBackend>(std::move(backend));
}

}  // namespace pkv
