#include "common/shutdown_signal.h"

#include <pthread.h>

#include <csignal>

namespace pkv {
namespace {

sigset_t ShutdownSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGUSR1);  // used internally to stop the waiting thread
  return set;
}

}  // namespace

ShutdownSignal::ShutdownSignal() {
  sigset_t set = ShutdownSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  thread_ = std::thread([this, set] {
    while (true) {
      int sig = 0;
      if (sigwait(&set, &sig) != 0) continue;
      if (sig == SIGUSR1) return;
      Request(sig == SIGTERM ? "SIGTERM" : "SIGINT");
    }
  });
}

ShutdownSignal::~ShutdownSignal() {
  pthread_kill(thread_.native_handle(), SIGUSR1);
  thread_.join();
}

void ShutdownSignal::Request(const std::string& reason) {
  absl::MutexLock lock(&mu_);
  if (reason_.empty()) reason_ = reason;
}

std::string ShutdownSignal::Wait() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](std::string* r) { return !r->empty(); }, &reason_));
  return reason_;
}

std::string ShutdownSignal::WaitUntil(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithDeadline(absl::Condition(
                            +[](std::string* r) { return !r->empty(); }, &reason_),
                        deadline);
  return reason_;
}

}  // namespace pkv
