#include "worker/cuda_backend/gemm.h"

#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/model/model_kernels.h"

namespace pkv::cuda_backend {

absl::Status CublasStatus(cublasStatus_t st, const char* what) {
  if (st == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(what, ": ", cublasGetStatusName(st), " (", cublasGetStatusString(st), ")"));
}

absl::StatusOr<std::unique_ptr<Gemm>> Gemm::Create(int64_t workspace_bytes) {
  std::unique_ptr<Gemm> g(new Gemm());
  PKV_RETURN_IF_ERROR(CublasStatus(cublasCreate(&g->handle_), "cublasCreate"));
  PKV_ASSIGN_OR_RETURN(g->workspace_, DeviceBuffer::Allocate(workspace_bytes));
  PKV_RETURN_IF_ERROR(CublasStatus(
      cublasSetWorkspace(g->handle_, g->workspace_.get(), static_cast<size_t>(workspace_bytes)),
      "cublasSetWorkspace"));
  return g;
}

Gemm::~Gemm() {
  lt_plans_.clear();  // descriptors before the handles
  pinned_plans_.clear();
  if (lt_ != nullptr) cublasLtDestroy(lt_);
  if (handle_ != nullptr) cublasDestroy(handle_);
}

absl::Status Gemm::Linear(decode::DType dtype, const void* x, int64_t num_tokens, int64_t in,
                          const void* w, int64_t out, void* y, bool y_f32, cudaStream_t stream) {
  if (num_tokens == 0) return absl::OkStatus();
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  if (num_tokens < 0 || in <= 0 || out <= 0 || num_tokens > kMax || in > kMax || out > kMax) {
    return absl::InvalidArgumentError(
        absl::StrCat("gemm: bad shape [", num_tokens, "][", in, "] x [", out, "][", in, "]"));
  }
  if (pinned_) return RunPinned(dtype, x, num_tokens, in, w, out, y, y_f32, stream);
  if (fixed_rows_ > 0) {
    // One shape for every call (gemm.h): the tail chunk runs R rows too, over padding rows.
    const int64_t x_row = in * 2, y_row = out * (y_f32 ? 4 : 2);  // bytes
    for (int64_t t = 0; t < num_tokens; t += fixed_rows_) {
      PKV_RETURN_IF_ERROR(GemmEx(dtype, static_cast<const uint8_t*>(x) + t * x_row, fixed_rows_, in,
                                 w, out, static_cast<uint8_t*>(y) + t * y_row, y_f32, stream));
    }
    return absl::OkStatus();
  }
  if (skinny_ && gpu::SkinnyGemmSupported(num_tokens, in, x, w)) {
    gpu::SkinnyGemmArgs a;
    a.dtype = dtype;
    a.x = x;
    a.num_tokens = static_cast<int32_t>(num_tokens);
    a.in = static_cast<int32_t>(in);
    a.w = w;
    a.out = static_cast<int32_t>(out);
    a.y = y;
    a.y_f32 = y_f32;
    return gpu::LaunchSkinnyGemm(a, stream);
  }
  if (tuned_) {
    auto it = lt_plans_.find(Key(static_cast<int>(dtype), num_tokens, in, out, y_f32));
    if (it != lt_plans_.end() && it->second->use_lt) return RunLt(*it->second, x, w, y, stream);
  }
  return GemmEx(dtype, x, num_tokens, in, w, out, y, y_f32, stream);
}

absl::Status Gemm::GemmEx(decode::DType dtype, const void* x, int64_t num_tokens, int64_t in,
                          const void* w, int64_t out, void* y, bool y_f32, cudaStream_t stream) {
  const cudaDataType_t ab = dtype == decode::DType::kBFloat16 ? CUDA_R_16BF : CUDA_R_16F;
  const cudaDataType_t c = y_f32 ? CUDA_R_32F : ab;
  const float alpha = 1.f, beta = 0.f;
  PKV_RETURN_IF_ERROR(CublasStatus(cublasSetStream(handle_, stream), "cublasSetStream"));
  // Column-major view: C[out][T] = op(A)[out][in] * B[in][T], A = w stored [in]-major (lda = in,
  // transposed), B = x (ldb = in), C = y (ldc = out).
  return CublasStatus(
      cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(out),
                   static_cast<int>(num_tokens), static_cast<int>(in), &alpha, w, ab,
                   static_cast<int>(in), x, ab, static_cast<int>(in), &beta, y, c,
                   static_cast<int>(out), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
      "cublasGemmEx");
}

}  // namespace pkv::cuda_backend
