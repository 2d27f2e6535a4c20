// CudaModelBackend::Impl's load: the parts set up in the order that sizes the KV pool (attention
// engines, then the activations, then the pool from the free memory left, then the small rest).
#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/cuda_status.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "worker/cuda_backend/backend_impl.h"
#include "worker/cuda_backend/tune_gemms.h"

namespace pkv {
namespace {

constexpr int64_t kGemmWorkspaceBytes = int64_t{32} << 20;

int32_t RoundUp(int32_t n, int32_t multiple) { return (n + multiple - 1) / multiple * multiple; }

absl::StatusOr<int64_t> FreeDeviceBytes() {
  size_t free_bytes = 0, total_bytes = 0;
  PKV_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
  return static_cast<int64_t>(free_bytes);
}

absl::Status ValidateOptions(const CudaBackendOptions& o) {
  if (o.page_size < 1 || o.page_size > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size ", o.page_size, " is not in [1, 1024]"));
  }
  if (!(o.kv_memory_fraction > 0.0 && o.kv_memory_fraction <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("kv_memory_fraction ", o.kv_memory_fraction, " is not in (0, 1]"));
  }
  if (o.max_step_tokens < 1 || o.max_rows < 1 || o.num_kv_pages < 0) {
    return absl::InvalidArgumentError("max_step_tokens and max_rows must be positive");
  }
  if (o.gpu_memory_limit_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("gpu_memory_limit_bytes ", o.gpu_memory_limit_bytes, " is negative"));
  }
  if (o.fused_max_hidden < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("fused_max_hidden ", o.fused_max_hidden, " is negative (0: no limit)"));
  }
  if (o.fused_max_tokens < 1 || o.fused_max_tokens > 8 || o.fused_wide_max_tokens < 0 ||
      o.fused_wide_max_tokens > 8 || o.fused_prefetch_steps < 0 ||
      o.fused_prenorm_min_tokens < kFusedPrenormAuto) {
    return absl::InvalidArgumentError(absl::StrCat(
        "fused_max_tokens ", o.fused_max_tokens, " is not in [1, 8], fused_wide_max_tokens ",
        o.fused_wide_max_tokens, " is not in [0, 8] or fused_prefetch_steps ",
        o.fused_prefetch_steps, " or fused_prenorm_min_tokens ", o.fused_prenorm_min_tokens,
        " is below -1 (auto)"));
  }
  if (o.deterministic_gemm_rows < 1 || o.deterministic_gemm_rows > 4096) {
    return absl::InvalidArgumentError(absl::StrCat(
        "deterministic_gemm_rows ", o.deterministic_gemm_rows, " is not in [1, 4096]"));
  }
  if (o.attention != "auto" && o.attention != "generic") {
    return absl::InvalidArgumentError(
        absl::StrCat("attention '", o.attention, "' is not supported; use auto or generic"));
  }
  return absl::OkStatus();
}

cuda_backend::KvAttentionOptions KvOptions(const CudaBackendOptions& o) {
  cuda_backend::KvAttentionOptions kv;
  kv.page_size = o.page_size;
  kv.tensor_cores = o.attention == "auto";
  kv.policy.policy_file = o.policy_file;
  kv.policy.policy_dir = o.policy_dir;
  kv.policy.kind = o.decode_policy;
  kv.policy.few_row_w8 = o.decode_few_row_w8;
  kv.kv_cache_dtype = o.kv_cache_dtype;
  kv.split_partials = o.deterministic && o.deterministic_form.split_tiles;
  return kv;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CudaModelBackend::Impl>> CudaModelBackend::Impl::Start(
    const CudaBackendOptions& options) {
  PKV_RETURN_IF_ERROR(ValidateOptions(options));
  std::unique_ptr<Impl> m(new Impl(options));
  m->options_.max_rows = std::min(options.max_rows, options.max_step_tokens);
  PKV_ASSIGN_OR_RETURN(m->stream_, cuda_backend::DeviceStream::Create(options.device));
  PKV_ASSIGN_OR_RETURN(m->free_at_start_, FreeDeviceBytes());  // the context is up
  return m;
}

// Nothing may still read the buffers the members free; the stream itself goes last.
CudaModelBackend::Impl::~Impl() { stream_.Synchronize(); }

void CudaModelBackend::Impl::SetModel(const ModelConfig& config,
                                      cuda_backend::DeviceWeights weights) {
  config_ = config;
  weights_ = std::move(weights);
}

absl::Status CudaModelBackend::Impl::Finish(const std::string& source) {
  const CudaBackendOptions& o = options_;
  PKV_ASSIGN_OR_RETURN(gemm_, cuda_backend::Gemm::Create(kGemmWorkspaceBytes));
  gemm_->set_skinny(o.skinny_gemm);
  buckets_ = cuda_backend::GraphBuckets(o.max_rows);
  cuda_backend::KvAttentionOptions kv_options = KvOptions(o);
  kv_options.kv_scales = kv_cache_scales_;
  PKV_ASSIGN_OR_RETURN(kv_, cuda_backend::KvAttention::Create(config_, kv_options, weights_.dtype,
                                                              buckets_, device()));
  // Rounded up to whole deterministic GEMMs (gemm.h: every GEMM then covers R rows), so the mode
  // can be switched on at run time.
  const int32_t r = o.deterministic_gemm_rows;
  PKV_ASSIGN_OR_RETURN(buffers_,
                       cuda_backend::StepBuffers::Allocate(config_, RoundUp(o.max_step_tokens, r),
                                                           RoundUp(o.max_rows, r), stream()));
  std::optional<int64_t> limit_left;  // what gpu_memory_limit_bytes leaves for the pool
  if (o.gpu_memory_limit_bytes > 0) {
    PKV_ASSIGN_OR_RETURN(const int64_t free_now, FreeDeviceBytes());
    limit_left = o.gpu_memory_limit_bytes - (free_at_start_ - free_now);
  }
  PKV_RETURN_IF_ERROR(
      kv_->AllocatePool(o.num_kv_pages, o.kv_memory_fraction, limit_left, stream()));
  PKV_ASSIGN_OR_RETURN(staging_,
                       cuda_backend::StepStaging::Create(NewStepBuilder(config_), stream()));
  PKV_RETURN_IF_ERROR(SetUpFused());
  PKV_ASSIGN_OR_RETURN(packed_, cuda_backend::PackedLinear::SetUp(weights_, device(), stream()));
  if (o.gemm_autotune) {
    PKV_RETURN_IF_ERROR(TuneGemms());
    gemm_->set_tuned(true);
  }
  PKV_RETURN_IF_ERROR(SetDeterministic(o.deterministic, o.deterministic_form));
  PKV_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream()));
  const ModelConfig& c = config_;
  PKV_LOG(INFO) << "cuda backend: " << source << ", " << c.num_layers << " layers, "
                << decode::DTypeName(weights_.dtype) << ", weights "
                << weights_.arena_bytes / 1048576.0 << " MiB"
                << (c.quant.quantized()
                        ? absl::StrCat(" (", std::string(QuantMethodName(c.quant.method)),
                                       " packed; dequantize "
                                       "scratch ",
                                       weights_.dequant_scratch_bytes / 1048576.0, " MiB)")
                        : std::string())
                << ", " << kv_->num_pages() << " KV pages of " << o.page_size << " tokens, "
                << KvCacheDtypeName(o.kv_cache_dtype) << " (" << kv_->pool_bytes() / 1048576.0
                << " MiB), decode attention " << (kv_->decode_engine() ? "engine" : "generic")
                << ", prefill attention " << (kv_->prefill_tensor_cores() ? "mma.sync" : "generic")
                << ", CUDA graphs " << (o.cuda_graphs ? "on" : "off") << ", bulk GEMV "
                << FusedBulkName(BulkProjections()) << (o.deterministic ? ", deterministic" : "");
  return absl::OkStatus();
}

absl::Status CudaModelBackend::Impl::SetDeterministic(bool enabled, DeterministicForm form) {
  if (enabled && tp_ != nullptr) {
    return absl::FailedPreconditionError(
        "deterministic mode is single-GPU only: the tensor-parallel all-reduce sums in an order "
        "that depends on the batch's size");
  }
  options_.deterministic = enabled;
  options_.deterministic_form = form;
  gemm_->set_fixed_rows(enabled ? options_.deterministic_gemm_rows : 0, form.pinned_gemm);
  PKV_RETURN_IF_ERROR(kv_->SetUniform(enabled, form.split_tiles));
  staging_.SetTilesForEveryRow(enabled && kv_->prefill_tensor_cores());
  staging_.SetSplitTiles(enabled && kv_->prefill_tensor_cores() && form.split_tiles);
  return absl::OkStatus();
}

// Never fails the load on an unsupported device or shape: the backend runs its cuBLAS path.
absl::Status CudaModelBackend::Impl::SetUpFused() {
  PKV_ASSIGN_OR_RETURN(fused_,
                       cuda_backend::FusedPath::SetUp(config_, weights_, device(), stream()));
  const CudaBackendOptions& o = options_;
  fused_token_limit_ = o.fused_max_tokens;
  // Packed weights keep the fused path at every size: without it each projection of a decode
  // step is dequantized to a dense matrix first, which reads more bytes than the dense model.
  if (fused_.available() && o.fused_max_hidden > 0 && config_.hidden_size > o.fused_max_hidden &&
      o.fused_small_batch && weights_.dequant_scratch_bytes == 0) {
    fused_token_limit_ = std::min(o.fused_max_tokens, o.fused_wide_max_tokens);
    if (fused_token_limit_ == 0) options_.fused_small_batch = false;
    PKV_LOG(INFO) << "cuda backend: hidden size " << config_.hidden_size << " > fused_max_hidden "
                  << o.fused_max_hidden
                  << ": the fused small-batch path runs steps of <= " << fused_token_limit_
                  << " tokens (fused_wide_max_tokens), cuBLAS the rest "
                  << "(faster there)";
  }
  return absl::OkStatus();
}

absl::Status CudaModelBackend::Impl::TuneGemms() {
  if (gemms_tuned_) return absl::OkStatus();
  PKV_RETURN_IF_ERROR(cuda_backend::TuneGemms(config_, weights_, buckets_, buffers_.logits(),
                                              gemm_.get(), stream()));
  gemms_tuned_ = true;
  return absl::OkStatus();
}

std::unique_ptr<cuda_backend::StepBuilder> CudaModelBackend::Impl::NewStepBuilder(
    const ModelConfig& vocab_of) const {
  const CudaBackendOptions& o = options_;
  cuda_backend::StepLimits limits;
  limits.max_tokens = o.max_step_tokens;
  limits.max_rows = o.max_rows;
  limits.max_page_ids =
      int64_t{o.max_rows} *
      ((int64_t{vocab_of.max_position_embeddings} + o.page_size - 1) / o.page_size);
  cuda_backend::StepShape shape;
  shape.vocab_size = vocab_of.vocab_size;
  shape.max_position = vocab_of.max_position_embeddings;
  shape.page_size = o.page_size;
  shape.num_kv_pages = kv_->num_pages();
  shape.plan_prefill_tiles = kv_->prefill_tensor_cores();
  shape.split_rule = kv_->split_rule();
  return std::make_unique<cuda_backend::StepBuilder>(shape, limits);
}

absl::Status CudaModelBackend::Impl::AttachTensorParallel(cuda_backend::TpHooks* hooks,
                                                          int64_t logits_floats) {
  if (options_.deterministic) {
    return absl::UnimplementedError(
        "deterministic mode is single-GPU only (the tensor-parallel all-reduce sums in an order "
        "that depends on the batch's size); drop --deterministic or use --tp 1");
  }
  PKV_RETURN_IF_ERROR(buffers_.ReplaceLogits(logits_floats, stream()));
  PKV_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream()));
  tp_ = hooks;
  return absl::OkStatus();
}

absl::Status CudaModelBackend::Impl::FillKvCacheRandom(uint64_t seed) {
  PKV_RETURN_IF_ERROR(kv_->FillRandom(seed, stream()));
  PKV_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream()));
  return absl::OkStatus();
}

absl::Status CudaModelBackend::Impl::SetGemmAutotune(bool enabled) {
  if (enabled) PKV_RETURN_IF_ERROR(TuneGemms());
  options_.gemm_autotune = enabled;
  gemm_->set_tuned(enabled);
  return absl::OkStatus();
}

void CudaModelBackend::Impl::SetSkinnyGemm(bool enabled) {
  options_.skinny_gemm = enabled;
  gemm_->set_skinny(enabled);
}

void CudaModelBackend::Impl::SetFusedPrefetchSteps(int32_t steps) {
  options_.fused_prefetch_steps = std::max(0, steps);
}

void CudaModelBackend::Impl::SetFusedPrenormMinTokens(int32_t tokens) {
  options_.fused_prenorm_min_tokens = std::max(kFusedPrenormAuto, tokens);
}

int32_t CudaModelBackend::Impl::PrenormMinTokens() const {
  if (options_.fused_prenorm_min_tokens != kFusedPrenormAuto) {
    return options_.fused_prenorm_min_tokens;
  }
  const QuantMethod m = config_.quant.method;
  return m == QuantMethod::kAwq || m == QuantMethod::kGptq ? 8 : 4;
}

}  // namespace pkv
