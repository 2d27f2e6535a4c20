// Child processes for integration tests: real pkv-router / pkv-worker binaries started on
// loopback, each in its own process group so a test can SIGKILL, SIGSTOP or SIGTERM it like an
// operator (or the kernel) would. Output goes to a log file the failure message can point at.
// Not thread-safe; owned by one test.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace pkv::testing {

class Process {
 public:
  static absl::StatusOr<std::unique_ptr<Process>> Spawn(const std::string& binary,
                                                        const std::vector<std::string>& args,
                                                        const std::string& log_path);
  ~Process();  // SIGKILLs the process group if still running, then reaps it

  pid_t pid() const { return pid_; }
  const std::string& log_path() const { return log_path_; }
  void Signal(int sig);
  // SIGSTOP, then waits until the kernel reports the process stopped. A stop signal is taken by
  // one thread, which stops the others when it next runs: on a loaded machine the others (a gRPC
  // server's) may still serve for a while after kill() returns. False if it did not stop within
  // `timeout`. SIGCONT (Signal) resumes it.
  bool Freeze(absl::Duration timeout = absl::Seconds(10));
  // Exit code (or -signal when killed) once exited; nullopt if still running after `timeout`.
  std::optional<int> Wait(absl::Duration timeout);
  bool Running();
  // Last `max_bytes` of the log, for failure messages.
  std::string LogTail(size_t max_bytes = 4000) const;

 private:
  Process(pid_t pid, std::string log_path) : pid_(pid), log_path_(std::move(log_path)) {}
  pid_t pid_;
  std::string log_path_;
  std::optional<int> exit_code_;
};

// A TCP port on 127.0.0.1 that was free a moment ago.
int PickFreePort();
// Folder of the built binaries (PKV_BIN_DIR, set by ctest).
std::string BinDir();
// A fresh temporary folder under $TMPDIR.
std::string MakeTempDir(const std::string& prefix);
// The tiny model (pkv-make-model --shape tiny), made once per test process.
std::string TinyModelDir();
// Starts pkv-worker on the tiny model (CPU backend, plaintext, free ports) with `extra_args` for a
// start-up check that must refuse: returns the log's tail once it exited non-zero within
// `timeout`, else an error saying it kept running or exited 0 (with the tail).
absl::StatusOr<std::string> RefusedWorkerStartLog(const std::vector<std::string>& extra_args,
                                                  absl::Duration timeout);

}  // namespace pkv::testing
