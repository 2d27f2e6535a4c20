// Gemm's cuBLASLt autotuning (gemm.h): descriptors for one problem, candidate timing, the
// tuned-algorithm launch.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/cuda_status.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "worker/cuda_backend/gemm.h"

namespace pkv::cuda_backend {
namespace {

constexpr int kTuneReps = 6;  // timed runs per candidate, after one warm-up

template <typename T>
absl::Status SetAttr(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const T& v) {
  return CublasStatus(cublasLtMatmulDescSetAttribute(d, attr, &v, sizeof(v)),
                      "cublasLtMatmulDescSetAttribute");
}

// Events timing `reps` runs of `run(rep)` after one warm-up; the mean in milliseconds.
template <typename Run>
absl::StatusOr<float> TimeRuns(cudaStream_t stream, Run&& run) {
  PKV_RETURN_IF_ERROR(run(0));
  cudaEvent_t e0, e1;
  PKV_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e0));
  PKV_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e1));
  absl::Status st = CudaStatus(cudaEventRecord(e0, stream), "cudaEventRecord");
  for (int r = 1; st.ok() && r <= kTuneReps; ++r) st = run(r);
  if (st.ok()) st = CudaStatus(cudaEventRecord(e1, stream), "cudaEventRecord");
  if (st.ok()) st = CudaStatus(cudaEventSynchronize(e1), "cudaEventSynchronize");
  float ms = 0.f;
  if (st.ok()) st = CudaStatus(cudaEventElapsedTime(&ms, e0, e1), "cudaEventElapsedTime");
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  if (!st.ok()) return st;
  return ms / kTuneReps;
}

// Sets a plan's B [in][T] and C [out][T] layouts to T = tokens columns.
absl::Status SetTokens(cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, int64_t tokens) {
  const uint64_t cols = static_cast<uint64_t>(tokens);
  for (cublasLtMatrixLayout_t layout : {b, c}) {
    PKV_RETURN_IF_ERROR(CublasStatus(
        cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_COLS, &cols, sizeof(cols)),
        "cublasLtMatrixLayoutSetAttribute"));
  }
  return absl::OkStatus();
}

}  // namespace

Gemm::LtPlan::~LtPlan() {
  if (c != nullptr) cublasLtMatrixLayoutDestroy(c);
  if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
  if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
  if (op != nullptr) cublasLtMatmulDescDestroy(op);
}

int Gemm::num_lt() const {
  int n = 0;
  for (const auto& [key, plan] : lt_plans_) n += plan->use_lt ? 1 : 0;
  return n;
}

// The column-major view of Linear: C[out][T] = op(A)[out][in] * B[in][T] with A = w read
// transposed (rows of `in`), B = x, C = y.
absl::StatusOr<std::unique_ptr<Gemm::LtPlan>> Gemm::MakeLtPlan(const TuneProblem& p) const {
  auto plan = std::make_unique<LtPlan>();
  const cudaDataType_t ab = p.dtype == decode::DType::kBFloat16 ? CUDA_R_16BF : CUDA_R_16F;
  const cudaDataType_t c = p.y_f32 ? CUDA_R_32F : ab;
  PKV_RETURN_IF_ERROR(
      CublasStatus(cublasLtMatmulDescCreate(&plan->op, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                   "cublasLtMatmulDescCreate"));
  PKV_RETURN_IF_ERROR(SetAttr(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T));
  PKV_RETURN_IF_ERROR(SetAttr(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N));
  PKV_RETURN_IF_ERROR(CublasStatus(cublasLtMatrixLayoutCreate(&plan->a, ab, p.in, p.out, p.in),
                                   "cublasLtMatrixLayoutCreate"));
  PKV_RETURN_IF_ERROR(CublasStatus(cublasLtMatrixLayoutCreate(&plan->b, ab, p.in, p.tokens, p.in),
                                   "cublasLtMatrixLayoutCreate"));
  PKV_RETURN_IF_ERROR(CublasStatus(cublasLtMatrixLayoutCreate(&plan->c, c, p.out, p.tokens, p.out),
                                   "cublasLtMatrixLayoutCreate"));
  return plan;
}

absl::Status Gemm::RunLt(const LtPlan& p, const void* x, const void* w, void* y,
                         cudaStream_t stream) const {
  const float alpha = 1.f, beta = 0.f;
  return CublasStatus(cublasLtMatmul(lt_, p.op, &alpha, w, p.a, x, p.b, &beta, y, p.c, y, p.c,
                                     &p.algo, workspace_.get(), workspace_.bytes(), stream),
                      "cublasLtMatmul");
}

// cuBLASLt's heuristic candidates for `plan` within the workspace, best first; 0 when it offers
// none. reductions: the split-K reduction schemes allowed (a CUBLASLT_REDUCTION_SCHEME mask).
absl::StatusOr<int> Gemm::Heuristics(const LtPlan& plan,
                                     cublasLtMatmulHeuristicResult_t (&found)[kTuneCandidates],
                                     uint32_t reductions) const {
  cublasLtMatmulPreference_t pref = nullptr;
  PKV_RETURN_IF_ERROR(
      CublasStatus(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate"));
  const size_t ws = static_cast<size_t>(workspace_.bytes());
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                       sizeof(ws));
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                       &reductions, sizeof(reductions));
  int n = 0;
  const cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(
      lt_, plan.op, plan.a, plan.b, plan.c, plan.c, pref, kTuneCandidates, found, &n);
  cublasLtMatmulPreferenceDestroy(pref);
  return hs == CUBLAS_STATUS_SUCCESS ? n : 0;
}

bool Gemm::PinnedAlgoFits(const LtPlan& plan, cublasLtMatmulAlgo_t* algo, int64_t tokens) const {
  if (!SetTokens(plan.b, plan.c, tokens).ok()) return false;
  cublasLtMatmulHeuristicResult_t checked;
  return cublasLtMatmulAlgoCheck(lt_, plan.op, plan.a, plan.b, plan.c, plan.c, algo, &checked) ==
             CUBLAS_STATUS_SUCCESS &&
         checked.workspaceSize <= static_cast<size_t>(workspace_.bytes());
}

absl::StatusOr<std::unique_ptr<Gemm::LtPlan>> Gemm::MakePinnedPlan(decode::DType dtype, int64_t in,
                                                                   int64_t out, bool y_f32) {
  if (lt_ == nullptr) PKV_RETURN_IF_ERROR(CublasStatus(cublasLtCreate(&lt_), "cublasLtCreate"));
  TuneProblem p;
  p.dtype = dtype;
  p.tokens = fixed_rows_;
  p.in = in;
  p.out = out;
  p.y_f32 = y_f32;
  PKV_ASSIGN_OR_RETURN(std::unique_ptr<LtPlan> plan, MakeLtPlan(p));
  cublasLtMatmulHeuristicResult_t found[kTuneCandidates];
  // cuBLASLt's own first choice for R tokens without split-K reduction (tile and configuration
  // kept as they are), so a prompt is one call. No reduction scheme at all: the first form allowed
  // in-place split-K reductions and failed a 2048-token prompt on the H200 with
  // CUBLAS_STATUS_INVALID_VALUE (2026-12-05: their workspace counters grow with the output tiles,
  // so T; bench/NOTES.md "Sixteenth session"). Each candidate must also pass cuBLASLt's check at
  // kPinnedCheckTokens.
  PKV_ASSIGN_OR_RETURN(const int n, Heuristics(*plan, found, CUBLASLT_REDUCTION_SCHEME_NONE));
  for (int i = 0; i < n; ++i) {
    if (found[i].state != CUBLAS_STATUS_SUCCESS) continue;
    cublasLtMatmulAlgo_t algo = found[i].algo;
    if (!PinnedAlgoFits(*plan, &algo, fixed_rows_) ||
        !PinnedAlgoFits(*plan, &algo, kPinnedCheckTokens)) {
      continue;
    }
    plan->algo = algo;
    plan->use_lt = true;
    return plan;
  }
  return absl::InternalError(absl::StrCat("gemm: no cuBLASLt algorithm for ", fixed_rows_, " x ",
                                          in, " -> ", out, " (deterministic pinned GEMMs)"));
}

absl::Status Gemm::RunPinned(decode::DType dtype, const void* x, int64_t num_tokens, int64_t in,
                             const void* w, int64_t out, void* y, bool y_f32, cudaStream_t stream) {
  std::unique_ptr<LtPlan>& plan = pinned_plans_[Key(static_cast<int>(dtype), 0, in, out, y_f32)];
  if (plan == nullptr) {
    absl::StatusOr<std::unique_ptr<LtPlan>> made = MakePinnedPlan(dtype, in, out, y_f32);
    if (!made.ok()) {
      pinned_plans_.erase(Key(static_cast<int>(dtype), 0, in, out, y_f32));
      return made.status();
    }
    plan = *std::move(made);
  }
  PKV_RETURN_IF_ERROR(SetTokens(plan->b, plan->c, num_tokens));
  return RunLt(*plan, x, w, y, stream);
}

absl::Status Gemm::Tune(const TuneProblem& p, cudaStream_t stream) {
  if (p.weights.empty() || p.tokens <= 0 || p.x == nullptr || p.y == nullptr) {
    return absl::InvalidArgumentError("gemm tune: no weights or operands");
  }
  if (lt_ == nullptr) PKV_RETURN_IF_ERROR(CublasStatus(cublasLtCreate(&lt_), "cublasLtCreate"));
  PKV_ASSIGN_OR_RETURN(std::unique_ptr<LtPlan> plan, MakeLtPlan(p));
  auto weight = [&](int rep) { return p.weights[rep % p.weights.size()]; };
  PKV_ASSIGN_OR_RETURN(const float base_ms, TimeRuns(stream, [&](int rep) {
                         return GemmEx(p.dtype, p.x, p.tokens, p.in, weight(rep), p.out, p.y,
                                       p.y_f32, stream);
                       }));
  cublasLtMatmulHeuristicResult_t found[kTuneCandidates];
  PKV_ASSIGN_OR_RETURN(const int n, Heuristics(*plan, found, CUBLASLT_REDUCTION_SCHEME_MASK));
  float best_ms = base_ms;
  int best = -1;
  for (int i = 0; i < n; ++i) {
    if (found[i].state != CUBLAS_STATUS_SUCCESS) continue;
    plan->algo = found[i].algo;
    absl::StatusOr<float> ms =
        TimeRuns(stream, [&](int rep) { return RunLt(*plan, p.x, weight(rep), p.y, stream); });
    if (!ms.ok()) continue;  // an algorithm the heuristic offered but cannot run here
    if (*ms < best_ms) {
      best_ms = *ms;
      best = i;
    }
  }
  // cuBLASLt only when it beats cublasGemmEx clearly (timing noise is a few percent).
  plan->use_lt = best >= 0 && best_ms < 0.97f * base_ms;
  if (plan->use_lt) plan->algo = found[best].algo;
  PKV_LOG(INFO) << "gemm tune: " << p.tokens << " x " << p.in << " -> " << p.out
                << ": cublasGemmEx " << base_ms * 1e3 << " us, best of " << n << " cuBLASLt "
                << (best >= 0 ? best_ms * 1e3 : -1.f) << " us"
                << (plan->use_lt ? " (using cuBLASLt)" : "");
  lt_plans_[Key(static_cast<int>(p.dtype), p.tokens, p.in, p.out, p.y_f32)] = std::move(plan);
  return absl::OkStatus();
}

}  // namespace pkv::cuda_backend
