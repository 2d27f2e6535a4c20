// pkv-tp-bench cuda in a build without CUDA: says so.
#include <cstdio>

#include "bench/tp/tp_bench.h"

namespace pkv::tp_bench {

int RunCudaBench(const CudaBenchOptions&) {
  std::fprintf(stderr, "pkv-tp-bench: this build has no CUDA backend (configure with CUDA)\n");
  return 2;
}

}  // namespace pkv::tp_bench
