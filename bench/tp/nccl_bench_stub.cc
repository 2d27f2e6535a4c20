// pkv-tp-bench nccl in a build without NCCL: says so.
#include <cstdio>

#include "bench/tp/tp_bench.h"

namespace pkv::tp_bench {

int RunNcclBench(const NcclBenchOptions&) {
  std::fprintf(stderr,
               "pkv-tp-bench: this build has no NCCL (configure with CUDA and NCCL present)\n");
  return 2;
}

}  // namespace pkv::tp_bench
