// The worker's command-line flags (absl flags: --listen, --model, --backend, ...), turned into
// WorkerOptions (worker_options.h, where every default is kept). Linked into the binaries that
// run a worker (pkv-worker, pkv-colocated) only: the library never reads flags.
#pragma once

#include "worker/service/worker_options.h"

namespace pkv {

// Reads the flags after absl::ParseCommandLine.
WorkerOptions WorkerOptionsFromFlags();

}  // namespace pkv
