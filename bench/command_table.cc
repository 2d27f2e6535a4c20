#include "bench/command_table.h"

namespace pkv::bench {

// Declared by each subcommand's file; add a line here when adding a subcommand. Each subcommand
// folder's CMakeLists defines PKV_BENCH_<NAME>=1 when it is built.
#if PKV_BENCH_KERNELS
int KernelsMain();
#endif
#if PKV_BENCH_POLICY
int CalibrateMain();
int PolicyMain();
#endif
#if PKV_BENCH_E2E
int E2eMain();
#endif
#if PKV_BENCH_GEMV
int GemvMain();
int QGemmMain();
#endif

const std::vector<Command>& Commands() {
  static const std::vector<Command> table = {
#if PKV_BENCH_KERNELS
    {"kernels", "decode-attention routes over a trace grid (GPU)", KernelsMain},
#endif
#if PKV_BENCH_POLICY
    {"calibrate", "fit the route policies from kernel measurements, write policy files",
     CalibrateMain},
    {"policy", "evaluate the route policies on a grid (recorded or --live)", PolicyMain},
#endif
#if PKV_BENCH_E2E
    {"e2e", "whole-model decode and prefill on the GPU vs byte floor and GEMM rate", E2eMain},
#endif
#if PKV_BENCH_GEMV
    {"gemv", "the fused few-token GEMV: dense vs 4-bit vs fp8 weights at model shapes (GPU)",
     GemvMain},
    {"qgemm",
     "the quantized-weight GEMM vs dequantize + cuBLAS vs bf16 cuBLAS, 16..256 tokens (GPU)",
     QGemmMain},
#endif
  };
  return table;
}

}  // namespace pkv::bench
