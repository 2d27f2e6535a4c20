// The projections: y[T][N] = x[T][K] . w[N][K]^T with fp16/bf16 inputs and fp32 accumulation
// through cuBLAS (cublasGemmEx, tensor cores), output in the input dtype or float32. Row-major
// activations and nn.Linear-shaped weights map onto column-major cuBLAS as y^T = w . x^T, so no
// transpose is ever materialised.
//
// cuBLAS gets a fixed workspace (cublasSetWorkspace) so its calls can be captured in CUDA graphs
// and never allocate.
//
// Autotuning (gemm_tune.cc, the backend option gemm_autotune): cublasGemmEx runs cuBLAS's first
// heuristic choice, which for decode-sized token counts (8..256 rows of a weight streamed once)
// is often a tile grid too small to stream the weight at full bandwidth. Tune() times cublasGemmEx
// and up to kTuneCandidates of cuBLASLt's heuristic algorithms (split-K ones among them) on one
// exact problem and keeps the fastest; while tuned() is on, Linear() runs it for that problem.
// Batch-invariant mode (set_fixed_rows, the backend's deterministic option): cuBLAS picks its
// kernel, tile and split-K by the problem's shape, so a token's row of y changes bitwise with
// how many other tokens share the GEMM. With fixed_rows = R every call runs as ceil(T / R)
// GEMMs of exactly R rows each: one shape, hence one algorithm and one reduction order over K
// for every row whatever T is (cuBLAS is run-to-run reproducible for a shape on one GPU with a
// fixed workspace and atomics off, its default). The skinny kernel and tuned algorithms are
// bypassed. The caller's x and y must hold ceil(T / R) * R rows; the padding rows' y is garbage.
// Pinned form (set_fixed_rows(R, true)): one cuBLASLt algorithm per projection shape, cuBLASLt's
// first heuristic choice for R tokens without split-K reduction, with its whole configuration
// (tile, stages, swizzle), runs every call whatever its T, so a prompt is one GEMM instead of
// ceil(T / R), each re-reading the weights. A row's result still does not depend on T: the
// configuration fixes each output's summation over K, and T only changes how many token tiles
// there are. On the H200 (2026-12-05) the first form (split-K reductions in place allowed) failed
// a 2048-token prompt; this one passes the determinism test and runs the prompt (103 ms against
// 156 for the 64-row chunks) but makes the 8B one-token step 2.6x slower (no split-K), so the
// mode does not use it by default.
// Thread-safety: not thread-safe (one handle, owned by the backend).
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "kernels/decode/decode_params.h"
#include "worker/cuda_backend/device_buffer.h"

namespace pkv::cuda_backend {

class Gemm {
 public:
  static absl::StatusOr<std::unique_ptr<Gemm>> Create(int64_t workspace_bytes);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // x [num_tokens][in] dtype, w [out][in] dtype, y [num_tokens][out] dtype or float32 (y_f32).
  // With the skinny kernel enabled, 1..kSkinnyGemmMaxTokens tokens go through it instead of
  // cuBLAS (kernels/model/model_kernels.h). REQUIRES with fixed_rows() = R > 0: x and y hold
  // RoundUp(num_tokens, R) rows.
  absl::Status Linear(decode::DType dtype, const void* x, int64_t num_tokens, int64_t in,
                      const void* w, int64_t out, void* y, bool y_f32, cudaStream_t stream);

  void set_skinny(bool enabled) { skinny_ = enabled; }
  bool skinny() const { return skinny_; }
  // 0: cuBLAS's choice by shape; R > 0: batch-invariant, every GEMM R rows, or (pinned) the
  // algorithm chosen for R rows at every T (see above).
  void set_fixed_rows(int32_t rows, bool pinned = false) {
    fixed_rows_ = rows > 0 ? rows : 0;
    pinned_ = fixed_rows_ > 0 && pinned;
  }
  int32_t fixed_rows() const { return fixed_rows_; }
  bool pinned() const { return pinned_; }

  // One problem to tune: x [tokens][in] and y [tokens][out] are scratch operands; the timing
  // cycles through `weights` (matrices of this shape, e.g. every layer's) so it reads them from
  // memory rather than L2.
  struct TuneProblem {
    decode::DType dtype = decode::DType::kBFloat16;
    int64_t tokens = 0;
    int64_t in = 0;
    int64_t out = 0;
    bool y_f32 = false;
    std::vector<const void*> weights;  // each [out][in] dtype
    const void* x = nullptr;
    void* y = nullptr;
  };
  static constexpr int kTuneCandidates = 16;
  // Synchronous (start-up and benchmarks only). Candidates that fail are skipped; an error only
  // when nothing, not even cublasGemmEx, runs.
  absl::Status Tune(const TuneProblem& p, cudaStream_t stream);
  void set_tuned(bool enabled) { tuned_ = enabled; }
  bool tuned() const { return tuned_; }
  // Problems tuned so far, and how many of them run a cuBLASLt algorithm (not cublasGemmEx).
  int num_tuned() const { return static_cast<int>(lt_plans_.size()); }
  int num_lt() const;

 private:
  // A tuned problem: its cuBLASLt descriptors and algorithm, or use_lt = false when
  // cublasGemmEx was fastest. Owns the descriptors.
  struct LtPlan {
    bool use_lt = false;
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo = {};
    LtPlan() = default;
    LtPlan(const LtPlan&) = delete;
    LtPlan& operator=(const LtPlan&) = delete;
    ~LtPlan();
  };
  using Key = std::tuple<int, int64_t, int64_t, int64_t, bool>;  // dtype, tokens, in, out, f32

  Gemm() = default;
  absl::Status GemmEx(decode::DType dtype, const void* x, int64_t num_tokens, int64_t in,
                      const void* w, int64_t out, void* y, bool y_f32, cudaStream_t stream);
  absl::Status RunLt(const LtPlan& p, const void* x, const void* w, void* y,
                     cudaStream_t stream) const;
  absl::StatusOr<std::unique_ptr<LtPlan>> MakeLtPlan(const TuneProblem& p) const;
  absl::StatusOr<int> Heuristics(const LtPlan& plan,
                                 cublasLtMatmulHeuristicResult_t (&found)[kTuneCandidates],
                                 uint32_t reductions) const;
  // The pinned form: the shape's plan (made on first use), its B and C layouts set to T tokens.
  absl::Status RunPinned(decode::DType dtype, const void* x, int64_t num_tokens, int64_t in,
                         const void* w, int64_t out, void* y, bool y_f32, cudaStream_t stream);
  // Whether cuBLASLt accepts `algo` for `plan` at `tokens` columns within the workspace (sets the
  // plan's B and C layouts to that many; RunPinned sets them per call).
  bool PinnedAlgoFits(const LtPlan& plan, cublasLtMatmulAlgo_t* algo, int64_t tokens) const;
  static constexpr int64_t kPinnedCheckTokens = 8192;  // a long prompt's chunk
  absl::StatusOr<std::unique_ptr<LtPlan>> MakePinnedPlan(decode::DType dtype, int64_t in,
                                                         int64_t out, bool y_f32);

  bool skinny_ = false;
  bool tuned_ = false;
  int32_t fixed_rows_ = 0;
  bool pinned_ = false;
  cublasHandle_t handle_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  DeviceBuffer workspace_;
  absl::flat_hash_map<Key, std::unique_ptr<LtPlan>> lt_plans_;
  absl::flat_hash_map<Key, std::unique_ptr<LtPlan>> pinned_plans_;  // tokens 0 in the key
};

// CUBLAS_STATUS -> absl::Status (INTERNAL naming the call).
absl::Status CublasStatus(cublasStatus_t st, const char* what);

}  // namespace pkv::cuda_backend
