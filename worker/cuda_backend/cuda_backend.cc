// CudaModelBackend: loads its Impl (backend_load.cc) and forwards the ModelBackend calls to it.
#include "worker/cuda_backend/cuda_backend.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/cuda_backend/backend_impl.h"
#include "worker/model/checkpoint.h"
#include "worker/model/kv_cache_scales.h"

namespace pkv {

absl::StatusOr<std::unique_ptr<CudaModelBackend>> CudaModelBackend::Load(
    const std::string& model_dir, const CudaBackendOptions& options) {
  PKV_ASSIGN_OR_RETURN(std::unique_ptr<Impl> m, Impl::Start(options));
  PKV_ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(model_dir));
  {
    PKV_ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> checkpoint, Checkpoint::Open(model_dir));
    PKV_ASSIGN_OR_RETURN(decode::DType dtype,
                         cuda_backend::ChooseComputeDType(options.dtype, *checkpoint));
    PKV_ASSIGN_OR_RETURN(cuda_backend::DeviceWeights weights,
                         cuda_backend::UploadWeights(config, *checkpoint, dtype, m->stream()));
    m->SetModel(config, std::move(weights));
    if (options.kv_cache_dtype != KvCacheDtype::kAuto) {
      // The same scales the CPU backend uses for this checkpoint, so the two agree.
      PKV_ASSIGN_OR_RETURN(std::vector<Fp8KvScales> scales,
                           LoadKvCacheScales(*checkpoint, config.num_layers));
      m->SetKvCacheScales(std::move(scales));
    }
  }  // unmaps the checkpoint files
  PKV_RETURN_IF_ERROR(m->Finish(model_dir));
  return std::unique_ptr<CudaModelBackend>(new CudaModelBackend(std::move(m)));
}

absl::StatusOr<std::unique_ptr<CudaModelBackend>> CudaModelBackend::LoadRandom(
    const ModelConfig& config, uint64_t seed, const CudaBackendOptions& options) {
  PKV_ASSIGN_OR_RETURN(std::unique_ptr<Impl> m, Impl::Start(options));
  const decode::DType dtype =
      options.dtype == "float16" ? decode::DType::kFloat16 : decode::DType::kBFloat16;
  PKV_ASSIGN_OR_RETURN(cuda_backend::DeviceWeights weights,
                       cuda_backend::RandomDeviceWeights(config, dtype, seed, m->stream()));
  m->SetModel(config, std::move(weights));
  PKV_RETURN_IF_ERROR(m->Finish(absl::StrCat("random weights (seed ", seed, ")")));
  return std::unique_ptr<CudaModelBackend>(new CudaModelBackend(std::move(m)));
}

CudaModelBackend::CudaModelBackend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CudaModelBackend::~CudaModelBackend() = default;

const ModelConfig& CudaModelBackend::config() const { return impl_->config(); }
int32_t CudaModelBackend::page_size() const { return impl_->options().page_size; }
int64_t CudaModelBackend::num_kv_pages() const { return impl_->kv().num_pages(); }
std::string CudaModelBackend::dtype_name() const {
  return impl_->weights().dtype == decode::DType::kBFloat16 ? "bfloat16" : "float16";
}
KvCacheDtype CudaModelBackend::kv_cache_dtype() const { return impl_->kv().kv_cache_dtype(); }

absl::Status CudaModelBackend::Step(absl::Span<const BatchRow> rows,
                                    std::vector<SampleResult>* samples, StepStats* stats) {
  return impl_->Step(rows, samples, stats);
}

absl::Status CudaModelBackend::Launch(absl::Span<const BatchRow> rows, StepStats* stats) {
  return impl_->Launch(rows, stats);
}

absl::Status CudaModelBackend::Finish(std::vector<SampleResult>* samples) {
  return impl_->Finish(samples);
}

absl::Status CudaModelBackend::Forward(absl::Span<const BatchRow> rows,
                                       std::vector<float>* logits) {
  return impl_->Forward(rows, logits);
}

absl::Status CudaModelBackend::FillKvCacheRandom(uint64_t seed) {
  return impl_->FillKvCacheRandom(seed);
}

void CudaModelBackend::SetCudaGraphs(bool enabled) { impl_->SetCudaGraphs(enabled); }
void CudaModelBackend::SetSkinnyGemm(bool enabled) { impl_->SetSkinnyGemm(enabled); }
void CudaModelBackend::SetFusedSmallBatch(bool enabled) { impl_->SetFusedSmallBatch(enabled); }
void CudaModelBackend::SetPdl(bool enabled) { impl_->SetPdl(enabled); }
void CudaModelBackend::SetWorkqueueBalanced(bool on) { impl_->SetWorkqueueBalanced(on); }
void CudaModelBackend::SetFewRowW8(bool on) { impl_->SetFewRowW8(on); }

void CudaModelBackend::SetSkipAttentionForTiming(bool skip) {
  impl_->SetSkipAttentionForTiming(skip);
}
absl::Status CudaModelBackend::SetDeterministic(bool enabled, DeterministicForm form) {
  return impl_->SetDeterministic(enabled, form);
}
bool CudaModelBackend::deterministic() const { return impl_->options().deterministic; }
void CudaModelBackend::SetFusedPrefetchSteps(int32_t steps) { impl_->SetFusedPrefetchSteps(steps); }
void CudaModelBackend::SetFusedGemvBulk(uint32_t projections) {
  impl_->SetFusedGemvBulk(projections);
}
void CudaModelBackend::SetFusedPrenormMinTokens(int32_t tokens) {
  impl_->SetFusedPrenormMinTokens(tokens);
}
absl::Status CudaModelBackend::SetGemmAutotune(bool enabled) {
  return impl_->SetGemmAutotune(enabled);
}
bool CudaModelBackend::fused_available() const { return impl_->fused().available(); }
bool CudaModelBackend::pdl_available() const { return impl_->fused().pdl_usable(); }
const StepTiming& CudaModelBackend::last_timing() const { return impl_->timing(); }
int64_t CudaModelBackend::weight_read_bytes() const { return impl_->weights().step_read_bytes; }
int64_t CudaModelBackend::kv_bytes_per_token() const {
  return impl_->kv().bytes_per_page() / impl_->kv().page_size();  // FP8 pages: half
}
cudaStream_t CudaModelBackend::stream() const { return impl_->stream(); }

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
