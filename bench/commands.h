// pkv-bench subcommands. Each lives in its own file and is listed in command_table.cc:
//   kernels    decode-attention routes over a trace grid (bench/kernels/)
//   calibrate  fit the route policies from kernel measurements (bench/policy/)
//   policy     evaluate the policies on a grid (bench/policy/)
//   e2e        whole-model decode/prefill (bench/e2e/)
//   gemv       the fused few-token GEMV, dense vs quantized weights (bench/gemv/)
//   qgemm      the quantized-weight GEMM vs dequantize + cuBLAS vs bf16 cuBLAS (bench/gemv/)
// main.cc parses every flag (absl flags; shared ones in bench_flags.h, the others in each
// subcommand's file) before it runs the subcommand, which returns the process exit code.
#pragma once

namespace pkv::bench {

using CommandFn = int (*)();

struct Command {
  const char* name;
  const char* summary;
  CommandFn run;
};

}  // namespace pkv::bench
