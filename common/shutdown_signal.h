// Turns SIGTERM / SIGINT into an ordinary event a server's main thread can wait for, so shutdown
// (drain, then exit 0) runs on a normal thread instead of inside a signal handler.
// Construct it in main() before any other thread starts: it blocks the two signals process-wide
// (threads inherit the mask) and waits for them with sigwait on its own thread.
// Thread-safe.
#pragma once

#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace pkv {

class ShutdownSignal {
 public:
  ShutdownSignal();
  ~ShutdownSignal();

  // Requests shutdown from code (an admin RPC, a fatal error). The first reason wins.
  void Request(const std::string& reason);
  // Blocks until a signal arrives or Request() is called; returns the reason.
  std::string Wait();
  // Like Wait() with a deadline; empty string when it passed without a request.
  std::string WaitUntil(absl::Time deadline);

 private:
  absl::Mutex mu_;
  std::string reason_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace pkv
