// pkv-worker: one serving worker (one per GPU, or the CPU backend). See worker_server.h; the
// flags are in worker_flags.cc.
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "worker/service/worker_flags.h"
#include "worker/service/worker_server.h"

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("pkv-worker --model DIR [--listen ADDR] [flags]");
  absl::ParseCommandLine(argc, argv);
  return pkv::RunWorker(pkv::WorkerOptionsFromFlags());
}
