#include "worker/cuda_backend/cuda_backend.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/cuda_status.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "kernels/model/model_kernels.h"
#include "worker/cuda_backend/backend_impl.h"
#include "worker/model/checkpoint.h"

namespace pkv {
namespace {

using cuda_backend::DeviceBuffer;
using cuda_backend::PinnedBuffer;
constexpr int64_t kGemmWorkspaceBytes = int64_t{32} << 20;

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
  if (o.fused_max_hidden < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("fused_max_hidden ", o.fused_max_hidden, " is negative (0: no limit)"));
  }
  if (o.fused_max_tokens < 1 || o.fused_max_tokens > 8 || o.fused_prefetch_steps < 0) {
    return absl::InvalidArgumentError(absl::StrCat("fused_max_tokens ", o.fused_max_tokens,
                                                   " is not in [1, 8] or fused_prefetch_steps ",
                                                   o.fused_prefetch_steps, " is negative"));
  }
  if (o.attention != "auto" && o.attention != "generic") {
    return absl::InvalidArgumentError(
        absl::StrCat("attention '", o.attention, "' is not supported; use auto or generic"));
  }
  return absl::OkStatus();
}

}  // namespace

// Nothing may still read the buffers the members free; the stream itself goes last.
CudaModelBackend::Impl::~Impl() { device_stream.Synchronize(); }

namespace {

absl::Status SetUpStepMachinery(CudaModelBackend::Impl* m) {
  const ModelConfig& c = m->config;
  const CudaBackendOptions& o = m->options;
  cuda_backend::StepLimits limits;
  limits.max_tokens = o.max_step_tokens;
  limits.max_rows = o.max_rows;
  limits.max_page_ids =
      int64_t{o.max_rows} * ((int64_t{c.max_position_embeddings} + o.page_size - 1) / o.page_size);
  cuda_backend::StepShape shape;
  shape.vocab_size = c.vocab_size;
  shape.max_position = c.max_position_embeddings;
  shape.page_size = o.page_size;
  shape.num_kv_pages = m->kv->num_pages();
  shape.plan_prefill_tiles = m->kv->prefill_tensor_cores();
  m->builder = std::make_unique<cuda_backend::StepBuilder>(shape, limits);
  cuda_backend::StagingCaps caps;
  caps.tokens = o.max_step_tokens;
  caps.sampled = o.max_rows;
  caps.tiles = o.max_step_tokens / prefill::kPrefillBlockM + o.max_rows;
  caps.page_ids = limits.max_page_ids;
  const int64_t bytes = cuda_backend::LayoutStaging(caps).total_bytes;
  PKV_ASSIGN_OR_RETURN(m->staging, DeviceBuffer::AllocateZeroed(bytes, m->stream()));
  PKV_ASSIGN_OR_RETURN(m->staging_host, PinnedBuffer::Allocate(bytes));
  return absl::OkStatus();
}

absl::Status SetUpAttention(CudaModelBackend::Impl* m) {
  cuda_backend::KvAttentionOptions o;
  o.page_size = m->options.page_size;
  o.tensor_cores = m->options.attention == "auto";
  o.policy.policy_file = m->options.policy_file;
  o.policy.policy_dir = m->options.policy_dir;
  o.policy.kind = m->options.decode_policy;
  PKV_ASSIGN_OR_RETURN(m->kv, cuda_backend::KvAttention::Create(m->config, o, m->weights.dtype,
                                                                m->buckets, m->device()));
  return absl::OkStatus();
}

}  // namespace

namespace cuda_backend {

// Everything after the weights: cuBLAS, attention, activations, the KV pool, the step machinery.
absl::Status FinishLoad(CudaModelBackend::Impl* m, const std::string& source) {
  PKV_ASSIGN_OR_RETURN(m->gemm, cuda_backend::Gemm::Create(kGemmWorkspaceBytes));
  m->gemm->set_skinny(m->options.skinny_gemm);
  m->buckets = cuda_backend::GraphBuckets(m->options.max_rows);
  PKV_RETURN_IF_ERROR(SetUpAttention(m));
  PKV_ASSIGN_OR_RETURN(m->buffers,
                       cuda_backend::StepBuffers::Allocate(m->config, m->options.max_step_tokens,
                                                           m->options.max_rows, m->stream()));
  PKV_RETURN_IF_ERROR(
      m->kv->AllocatePool(m->options.num_kv_pages, m->options.kv_memory_fraction, m->stream()));
  PKV_RETURN_IF_ERROR(SetUpStepMachinery(m));
  // Never fails the load on an unsupported device or shape: the backend runs its cuBLAS path.
  PKV_ASSIGN_OR_RETURN(m->fused, cuda_backend::FusedPath::SetUp(m->config, m->weights.dtype,
                                                                m->device(), m->stream()));
  const CudaBackendOptions& o = m->options;
  if (m->fused.available() && o.fused_max_hidden > 0 &&
      m->config.hidden_size > o.fused_max_hidden && o.fused_small_batch) {
    m->options.fused_small_batch = false;
    PKV_LOG(INFO) << "cuda backend: fused small-batch path off by default: hidden size "
                  << m->config.hidden_size << " > fused_max_hidden " << o.fused_max_hidden
                  << " (cuBLAS is faster there)";
  }
  if (m->options.gemm_autotune) {
    PKV_RETURN_IF_ERROR(m->TuneGemms());
    m->gemm->set_tuned(true);
  }
  PKV_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(m->stream()));
  const ModelConfig& c = m->config;
  PKV_LOG(INFO) << "cuda backend: " << source << ", " << c.num_layers << " layers, "
                << decode::DTypeName(m->weights.dtype) << ", weights "
                << m->weights.arena_bytes / 1048576.0 << " MiB, " << m->kv->num_pages()
                << " KV pages of " << m->options.page_size << " tokens ("
                << m->kv->pool_bytes() / 1048576.0 << " MiB), decode attention "
                << (m->kv->decode_engine() ? "engine" : "generic") << ", prefill attention "
                << (m->kv->prefill_tensor_cores() ? "mma.sync" : "generic") << ", CUDA graphs "
                << (m->options.cuda_graphs ? "on" : "off");
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CudaModelBackend::Impl>> StartLoad(
    const CudaBackendOptions& options) {
  PKV_RETURN_IF_ERROR(ValidateOptions(options));
  auto m = std::make_unique<CudaModelBackend::Impl>();
  m->options = options;
  m->options.max_rows = std::min(options.max_rows, options.max_step_tokens);
  PKV_ASSIGN_OR_RETURN(m->device_stream, cuda_backend::DeviceStream::Create(options.device));
  return m;
}

}  // namespace cuda_backend

absl::StatusOr<std::unique_ptr<CudaModelBackend>> CudaModelBackend::Load(
    const std::string& model_dir, const CudaBackendOptions& options) {
  PKV_ASSIGN_OR_RETURN(std::unique_ptr<Impl> m, cuda_backend::StartLoad(options));
  PKV_ASSIGN_OR_RETURN(m->config, LoadModelConfig(model_dir));
  {
    PKV_ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> checkpoint, Checkpoint::Open(model_dir));
    PKV_ASSIGN_OR_RETURN(decode::DType dtype,
                         cuda_backend::ChooseComputeDType(options.dtype, *checkpoint));
    PKV_ASSIGN_OR_RETURN(m->weights,
                         cuda_backend::UploadWeights(m->config, *checkpoint, dtype, m->stream()));
  }  // unmaps the checkpoint files
  PKV_RETURN_IF_ERROR(cuda_backend::FinishLoad(m.get(), model_dir));
  return std::unique_ptr<CudaModelBackend>(new CudaModelBackend(std::move(m)));
}

absl::StatusOr<std::unique_ptr<CudaModelBackend>> CudaModelBackend::LoadRandom(
    const ModelConfig& config, uint64_t seed, const CudaBackendOptions& options) {
  PKV_ASSIGN_OR_RETURN(std::unique_ptr<Impl> m, cuda_backend::StartLoad(options));
  m->config = config;
  const decode::DType dtype =
      options.dtype == "float16" ? decode::DType::kFloat16 : decode::DType::kBFloat16;
  PKV_ASSIGN_OR_RETURN(m->weights,
                       cuda_backend::RandomDeviceWeights(config, dtype, seed, m->stream()));
  PKV_RETURN_IF_ERROR(
      cuda_backend::FinishLoad(m.get(), absl::StrCat("random weights (seed ", seed, ")")));
  return std::unique_ptr<CudaModelBackend>(new CudaModelBackend(std::move(m)));
}

absl::Status CudaModelBackend::FillKvCacheRandom(uint64_t seed) {
  Impl& m = *impl_;
  PKV_RETURN_IF_ERROR(m.kv->FillRandom(seed, m.stream()));
  PKV_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(m.stream()));
  return absl::OkStatus();
}

CudaModelBackend::CudaModelBackend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaModelBackend::~CudaModelBackend() = default;

const ModelConfig& CudaModelBackend::config() const { return impl_->config; }
int32_t CudaModelBackend::page_size() const { return impl_->options.page_size; }
int64_t CudaModelBackend::num_kv_pages() const { return impl_->kv->num_pages(); }
std::string CudaModelBackend::dtype_name() const {
  return impl_->weights.dtype == decode::DType::kBFloat16 ? "bfloat16" : "float16";
}
void CudaModelBackend::SetCudaGraphs(bool enabled) { impl_->options.cuda_graphs = enabled; }
void CudaModelBackend::SetSkinnyGemm(bool enabled) {
  impl_->options.skinny_gemm = enabled;
  impl_->gemm->set_skinny(enabled);
}
void CudaModelBackend::SetFusedSmallBatch(bool enabled) {
  impl_->options.fused_small_batch = enabled;
}
void CudaModelBackend::SetPdl(bool enabled) { impl_->options.pdl = enabled; }
void CudaModelBackend::SetFusedPrefetchSteps(int32_t steps) {
  impl_->options.fused_prefetch_steps = std::max(0, steps);
}
absl::Status CudaModelBackend::SetGemmAutotune(bool enabled) {
  if (enabled) PKV_RETURN_IF_ERROR(impl_->TuneGemms());
  impl_->options.gemm_autotune = enabled;
  impl_->gemm->set_tuned(enabled);
  return absl::OkStatus();
}
bool CudaModelBackend::fused_available() const { return impl_->fused.available(); }
bool CudaModelBackend::pdl_available() const { return impl_->fused.pdl_usable(); }
const StepTiming& CudaModelBackend::last_timing() const { return impl_->timing; }
int64_t CudaModelBackend::weight_read_bytes() const { return impl_->weights.step_read_bytes; }
int64_t CudaModelBackend::kv_bytes_per_token() const {
  const ModelConfig& c = impl_->config;
  return 2 * int64_t{c.num_layers} * c.num_kv_heads * c.head_dim * 2;
}
cudaStream_t CudaModelBackend::stream() const { return impl_->stream(); }

absl::Status CudaModelBackend::Step(absl::Span<const BatchRow> rows,
                                    std::vector<SampleResult>* samples, StepStats* stats) {
  impl_->timing = StepTiming{};
  if (rows.empty()) {
    if (stats != nullptr) *stats = StepStats{};
    return absl::OkStatus();
  }
  PKV_CUDA_RETURN_IF_ERROR(cudaSetDevice(impl_->device()));
  DeviceStep s;
  PKV_RETURN_IF_ERROR(impl_->Prepare(rows, /*need_params=*/true, /*allow_graph=*/true, &s));
  PKV_RETURN_IF_ERROR(impl_->Run(s, /*sample=*/true));
  PKV_RETURN_IF_ERROR(impl_->CollectSamples(samples));
  if (stats != nullptr) impl_->FillStats(rows, stats);
  return absl::OkStatus();
}

absl::Status CudaModelBackend::Forward(absl::Span<const BatchRow> rows,
                                       std::vector<float>* logits) {
  impl_->timing = StepTiming{};
  logits->clear();
  if (rows.empty()) return absl::OkStatus();
  PKV_CUDA_RETURN_IF_ERROR(cudaSetDevice(impl_->device()));
  DeviceStep s;
  PKV_RETURN_IF_ERROR(impl_->Prepare(rows, /*need_params=*/false, /*allow_graph=*/false, &s));
  PKV_RETURN_IF_ERROR(impl_->Run(s, /*sample=*/false));
  const int64_t n = int64_t{s.logit_rows} * impl_->config.vocab_size;
  logits->resize(n);
  if (n > 0) {
    PKV_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(logits->data(), impl_->buffers.logits(), n * 4,
                                             cudaMemcpyDeviceToHost, impl_->stream()));
  }
  PKV_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(impl_->stream()));
  return absl::OkStatus();
}

bool CudaDeviceUsable() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    cudaGetLastError();
    return false;
  }
  return true;
}

absl::StatusOr<std::unique_ptr<ModelBackend>> LoadCudaBackend(const std::string& model_dir,
                                                              const CudaBackendOptions& options) {
  PKV_ASSIGN_OR_RETURN(std::unique_ptr<CudaModelBackend> b,
                       CudaModelBackend::Load(model_dir, options));
  return std::unique_ptr<ModelBackend>(std::move(b));
}

}  // namespace pkv
