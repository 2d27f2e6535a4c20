// The quantized-weight GEMM (CUDA): y = x . w^T for any number of tokens straight from the packed
// 4-bit / fp8 weights of the fused GEMV (gemv_quant.h), without a dequantized copy. Tiling, split
// and route rule: qgemm_plan.h; kernel: qgemm_kernel.cuh.
//
// Numerics: the weights are dequantized to the activation dtype exactly as the GEMV and the
// dequantize kernel do (4-bit: round((q - zero) * scale) once; fp8: exact e4m3, the per-row or
// per-tensor float scale multiplies the fp32 sum), fp32 accumulation over k in a fixed order
// (MMA k order within a stage, stages in order, split parts in part order), so a launch gives the
// same bits on every run; sums differ from cuBLAS's order by fp32 rounding only.
// Output: y[t][n] in the activation dtype or float32 (y_f32), the epilogues the backend's cuBLAS
// path uses (forward.cc: q/k/v in float32, the others in the dtype).
//
// Programmatic dependent launch (`pdl`, sm_90 code): the first stages' weights are requested
// before the dependency wait (weights never depend on earlier kernels), x and every write after
// it. Safe in CUDA graphs: the launcher allocates nothing and never synchronises; it raises the
// kernel's dynamic shared memory limit (cudaFuncSetAttribute, not a stream operation) when the
// ring needs more than 48 KB.
// Thread-safety: pure function of its arguments (the attribute update is idempotent).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/statusor.h"
#include "kernels/model/model_kernels.h"
#include "kernels/model/qgemm_plan.h"

namespace pkv::gpu {

struct QGemmArgs {
  DType dtype = DType::kBFloat16;
  QGemmPlan plan;                  // PlanQGemm(m, n, k, format, device)
  const void* w = nullptr;         // packed [n] rows (gemv_quant.h), 16-byte aligned
  const void* w_scales = nullptr;  // kInt4: uint32 [n][k / 128], 4-byte aligned; kFp8: float
  int32_t w_scale_count = 0;       // kFp8: n (per row) or 1 (per tensor)
  const void* x = nullptr;         // [m][k] dtype, 16-byte aligned
  void* y = nullptr;               // [m][n] dtype, or float with y_f32
  bool y_f32 = false;
  // Split workspace (plan.parts > 1): partials [plan.partial_floats()], 16-byte aligned; tickets
  // [plan.num_tickets()] zeroed once: every launch leaves them at zero again.
  float* partials = nullptr;
  int32_t* tickets = nullptr;
  bool pdl = false;

  // Memory-pipeline options, all off by default: the 2026-12-02 H200 measurement (bench/NOTES.md
  // w4gemm) found none of them moving the time by more than noise (the bench times them). A stage
  // reads 128 bytes (one line) of each of 256 rows strided by the row length:
  //   l2_256b        the weight copies carry the .L2::256B hint (a miss fetches the aligned
  //                  256-byte block, so the next stages of the row hit the L2).
  //   stagger        each row tile walks its part's stages from its own offset (row tile * 5 mod
  //                  the part's length, wrapping around), so the grid's requests spread over
  //                  the rows' byte offsets. The order of the fp32 sum stays fixed per tile.
  //   prefetch_stages  > 0: each thread prefetches its row's bytes of the stage that many ahead
  //                  into the L2, beyond the shared-memory ring's depth.
  bool l2_256b = false;
  bool stagger = false;
  int32_t prefetch_stages = 0;
};

// SM count and shared memory of `device`, for PlanQGemm.
absl::StatusOr<QGemmDevice> QueryQGemmDevice(int device);

// INVALID_ARGUMENT naming the problem for a plan not from PlanQGemm, a null or misaligned
// operand, missing scales or split workspace.
absl::Status LaunchQGemm(const QGemmArgs& a, cudaStream_t stream);

}  // namespace pkv::gpu
