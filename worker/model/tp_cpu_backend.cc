#include "worker/model/tp_cpu_backend.h"

#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "worker/model/batch_check.h"
#include "worker/model/checkpoint.h"
#include "worker/model/cpu_step.h"
#include "worker/model/kv_cache_scales.h"
#include "worker/model/rope.h"
#include "worker/model/tp_shard.h"

namespace pkv {
namespace {

bool SameShape(const ModelConfig& a, const ModelConfig& b) {
  return a.vocab_size == b.vocab_size && a.hidden_size == b.hidden_size &&
         a.intermediate_size == b.intermediate_size && a.num_layers == b.num_layers &&
         a.num_q_heads == b.num_q_heads && a.num_kv_heads == b.num_kv_heads &&
         a.head_dim == b.head_dim && a.tie_word_embeddings == b.tie_word_embeddings &&
         a.attention_bias == b.attention_bias && a.o_proj_bias == b.o_proj_bias &&
         a.qk_norm == b.qk_norm;
}

absl::Status CheckShards(const ModelConfig& config, const std::vector<LlamaWeights>& shards) {
  const int tp = static_cast<int>(shards.size());
  PKV_RETURN_IF_ERROR(ValidateTensorParallel(config, tp));
  for (int r = 0; r < tp; ++r) {
    if (!SameShape(shards[r].config, ShardConfig(config, tp, r))) {
      return absl::InvalidArgumentError(
          absl::StrCat("shard ", r, " does not have the shapes of rank ", r, " of ", tp));
    }
    absl::Status sizes = CheckLlamaWeightSizes(shards[r]);
    if (!sizes.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("shard ", r, ": ", sizes.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

TpCpuBackend::TpCpuBackend(const ModelConfig& config, int32_t page_size, int64_t num_kv_pages,
                           KvCacheDtype kv_dtype, std::unique_ptr<InProcessGroup> group)
    : config_(config),
      page_size_(page_size),
      num_kv_pages_(num_kv_pages),
      kv_dtype_(kv_dtype),
      inv_freq_(RopeInvFrequencies(config)),
      group_(std::move(group)) {}

TpCpuBackend::~TpCpuBackend() = default;

absl::StatusOr<std::unique_ptr<TpCpuBackend>> TpCpuBackend::Create(const ModelConfig& config,
                                                                   std::vector<LlamaWeights> shards,
                                                                   int32_t page_size,
                                                                   int64_t num_kv_pages,
                                                                   const CpuKvCacheOptions& kv) {
  PKV_RETURN_IF_ERROR(CheckShards(config, shards));
  PKV_RETURN_IF_ERROR(CheckCpuKvCacheOptions(kv, config.num_layers));
  if (page_size <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("page_size must be positive, got ", page_size));
  }
  const int tp = static_cast<int>(shards.size());
  const int64_t page_elems =
      static_cast<int64_t>(config.num_kv_heads / tp) * page_size * config.head_dim;
  if (num_kv_pages <= 0 || num_kv_pages > std::numeric_limits<int32_t>::max() ||
      num_kv_pages > (int64_t{1} << 40) / page_elems) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_kv_pages ", num_kv_pages, " is not in [1, what fits the address space]"));
  }
  PKV_ASSIGN_OR_RETURN(std::unique_ptr<InProcessGroup> group, InProcessGroup::Create(tp));
  std::unique_ptr<TpCpuBackend> b(
      new TpCpuBackend(config, page_size, num_kv_pages, kv.dtype, std::move(group)));
  for (int r = 0; r < tp; ++r) {
    b->ranks_.push_back(std::make_unique<TpRank>(config, std::move(shards[r]), page_size,
                                                 num_kv_pages, b->group_->rank(r), kv));
  }
  b->threads_ = std::make_unique<RankThreads>(tp);
  return b;
}

void TpCpuBackend::PrepareBatch(absl::Span<const BatchRow> rows) {
  TpStepBatch& b = batch_;
  const int32_t half = config_.head_dim / 2;
  b.token_ids.clear();
  b.positions.clear();
  b.token_page.clear();
  b.qo_indptr.assign(1, 0);
  b.page_indptr.assign(1, 0);
  b.page_ids.clear();
  b.lengths.clear();
  b.sampled_token.clear();
  for (const BatchRow& row : rows) {
    const int32_t end = row.start_pos + row.num_tokens;
    for (int32_t i = 0; i < row.num_tokens; ++i) {
      const int32_t pos = row.start_pos + i;
      b.token_ids.push_back(row.tokens[i]);
      b.positions.push_back(pos);
      b.token_page.push_back(row.pages[pos / page_size_]);
    }
    if (row.sample) b.sampled_token.push_back(static_cast<int32_t>(b.token_ids.size()) - 1);
    const int32_t needed = (end + page_size_ - 1) / page_size_;
    b.page_ids.insert(b.page_ids.end(), row.pages, row.pages + needed);
    b.qo_indptr.push_back(static_cast<int32_t>(b.token_ids.size()));
    b.page_indptr.push_back(static_cast<int32_t>(b.page_ids.size()));
    b.lengths.push_back(end);
  }
  b.num_tokens = static_cast<int64_t>(b.token_ids.size());
  b.rope_cos.resize(b.num_tokens * half);
  b.rope_sin.resize(b.num_tokens * half);
  for (int64_t i = 0; i < b.num_tokens; ++i) {
    RopeCosSin(inv_freq_, b.positions[i], &b.rope_cos[i * half], &b.rope_sin[i * half]);
  }
}

absl::Status TpCpuBackend::Run(absl::Span<const BatchRow> rows, bool need_params) {
  PKV_RETURN_IF_ERROR(ValidateBatchRows(config_, page_size_, num_kv_pages_, rows, need_params));
  PrepareBatch(rows);
  return threads_->Run([this](int r) {
    absl::Status s = ranks_[r]->Forward(batch_, r == 0 ? &logits_ : nullptr);
    // A failed rank would leave the others waiting in the next collective: abort the group (the
    // backend is unusable afterwards; the engine treats the error as fatal).
    if (!s.ok()) group_->Abort(absl::StrCat("rank ", r, ": ", s.message()));
    return s;
  });
}

absl::Status TpCpuBackend::Step(absl::Span<const BatchRow> rows, std::vector<SampleResult>* samples,
                                StepStats* stats) {
  PKV_RETURN_IF_ERROR(Run(rows, /*need_params=*/true));
  PKV_RETURN_IF_ERROR(SampleRows(rows, logits_, config_.vocab_size, &sampler_scratch_, samples));
  if (stats != nullptr) *stats = CpuStepStats(rows);
  return absl::OkStatus();
}

absl::Status TpCpuBackend::Forward(absl::Span<const BatchRow> rows, std::vector<float>* logits) {
  PKV_RETURN_IF_ERROR(Run(rows, /*need_params=*/false));
  logits->assign(logits_.begin(), logits_.end());
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<TpCpuBackend>> TpCpuBackend::Load(const std::string& model_dir,
                                                                 int tp, int32_t page_size,
                                                                 int64_t num_kv_pages,
                                                                 KvCacheDtype kv_dtype) {
  PKV_ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(model_dir));
  PKV_RETURN_IF_ERROR(ValidateTensorParallel(config, tp));
  PKV_ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> checkpoint, Checkpoint::Open(model_dir));
  std::vector<LlamaWeights> shards;
  for (int r = 0; r < tp; ++r) {
    PKV_ASSIGN_OR_RETURN(LlamaWeights shard, LoadLlamaShardF32(config, *checkpoint, tp, r));
    shards.push_back(std::move(shard));
  }
  CpuKvCacheOptions kv;
  kv.dtype = kv_dtype;
  if (IsFp8(kv_dtype)) {
    PKV_ASSIGN_OR_RETURN(kv.scales, LoadKvCacheScales(*checkpoint, config.num_layers));
  }
  checkpoint.reset();  // the float32 shards are all the ranks need
  PKV_ASSIGN_OR_RETURN(
      std::unique_ptr<TpCpuBackend> backend,
      TpCpuBackend::Create(config, std::move(shards), page_size, num_kv_pages, kv));
  PKV_LOG(INFO) << "cpu backend, tensor parallel " << tp << " (in-process ranks): " << model_dir
                << ", " << config.num_layers << " layers, per rank " << config.num_kv_heads / tp
                << " KV heads, " << backend->rank_weight_bytes() / double(1 << 20)
                << " MiB weights, " << backend->rank_kv_bytes() / double(1 << 20) << " MiB KV "
                << CpuKvCacheDescription(kv) << " (" << num_kv_pages << " pages of " << page_size
                << " tokens)";
  return backend;
}

absl::StatusOr<std::unique_ptr<ModelBackend>> LoadTpCpuBackend(const std::string& model_dir, int tp,
                                                               int32_t page_size,
                                                               int64_t num_kv_pages,
                                                               KvCacheDtype kv_dtype) {
  PKV_ASSIGN_OR_RETURN(std::unique_ptr<TpCpuBackend> backend,
                       TpCpuBackend::Load(model_dir, tp, page_size, num_kv_pages, kv_dtype));
  return std::unique_ptr<ModelBackend>(std::move(backend));
}

}  // namespace pkv
