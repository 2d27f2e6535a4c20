#include "bench/command_table.h"

namespace pkv::bench {

// Declared by each subcommand's file; add a line here when adding a subcommand.
#if PKV_HAVE_CUDA
int KernelsMain(int argc, char** argv);
#endif

const std::vector<Command>& Commands() {
  static const std::vector<Command> table = {
#if PKV_HAVE_CUDA
      {"kernels", "decode-attention routes over a trace grid (GPU)", KernelsMain},
#endif
  };
  return table;
}

}  // namespace pkv::bench
