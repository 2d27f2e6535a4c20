// pkv-bench subcommands. Each lives in its own file and is listed in main.cc's table:
//   kernels    decode-attention routes over a trace grid (bench/kernels/)
//   calibrate  fit the route policies from kernel measurements (bench/policy/)
//   policy     evaluate the policies on a grid (bench/policy/)
//   e2e        whole-model decode/prefill (bench/e2e/)
// A subcommand gets argv without the subcommand name and returns the process exit code.
#pragma once

namespace pkv::bench {

using CommandFn = int (*)(int argc, char** argv);

struct Command {
  const char* name;
  const char* summary;
  CommandFn run;
};

}  // namespace pkv::bench
