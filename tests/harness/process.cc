#include "tests/harness/process.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"

namespace pkv::testing {

absl::StatusOr<std::unique_ptr<Process>> Process::Spawn(const std::string& binary,
                                                        const std::vector<std::string>& args,
                                                        const std::string& log_path) {
  std::vector<std::string> argv_storage = {binary};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) return absl::InternalError(absl::StrCat("cannot open log ", log_path));
  const pid_t pid = fork();
  if (pid < 0) {
    close(log_fd);
    return absl::InternalError("fork failed");
  }
  if (pid == 0) {
    setpgid(0, 0);
    // The test process may block signals (gRPC threads); the child starts with a clean mask.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  close(log_fd);
  setpgid(pid, pid);
  return std::unique_ptr<Process>(new Process(pid, log_path));
}

Process::~Process() {
  if (Running()) {
    kill(-pid_, SIGKILL);
    kill(pid_, SIGKILL);
    Wait(absl::Seconds(10));
  }
}

void Process::Signal(int sig) {
  if (!exit_code_) kill(pid_, sig);
}

bool Process::Freeze(absl::Duration timeout) {
  if (exit_code_ || kill(pid_, SIGSTOP) != 0) return false;
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    // The parent hears of a stop once the whole thread group has stopped (WUNTRACED).
    int status = 0;
    const pid_t r = waitpid(pid_, &status, WUNTRACED | WNOHANG);
    if (r == pid_ && WIFSTOPPED(status)) return true;
    if (r == pid_) {  // exited meanwhile
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

std::optional<int> Process::Wait(absl::Duration timeout) {
  if (exit_code_) return exit_code_;
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    int status = 0;
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
      return exit_code_;
    }
    if (r < 0 && errno == ECHILD) {
      exit_code_ = -1;
      return exit_code_;
    }
    if (absl::Now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

bool Process::Running() { return !Wait(absl::ZeroDuration()).has_value(); }

std::string Process::LogTail(size_t max_bytes) const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  if (s.size() > max_bytes) s = s.substr(s.size() - max_bytes);
  return absl::StrCat("--- ", log_path_, " (tail) ---\n", s);
}

int PickFreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

std::string BinDir() {
  const char* dir = std::getenv("PKV_BIN_DIR");
  return dir != nullptr ? dir : "build/bin";
}

std::string MakeTempDir(const std::string& prefix) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = absl::StrCat(tmp ? tmp : "/tmp", "/", prefix, "-XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) return "";
  return pattern;
}

std::string TinyModelDir() {
  static const std::string dir = [] {
    const std::string out = MakeTempDir("pkv-tiny-model") + "/tiny";
    const std::string cmd =
        absl::StrCat(BinDir(), "/pkv-make-model --out ", out, " --shape tiny > ", out, ".log 2>&1");
    if (std::system(cmd.c_str()) != 0) return std::string();
    return out;
  }();
  return dir;
}

absl::StatusOr<std::string> RefusedWorkerStartLog(const std::vector<std::string>& extra_args,
                                                  absl::Duration timeout) {
  const std::string model = TinyModelDir();
  if (model.empty()) return absl::InternalError("pkv-make-model failed");
  std::vector<std::string> args = {absl::StrCat("--listen=127.0.0.1:", PickFreePort()),
                                   absl::StrCat("--metrics_listen=127.0.0.1:", PickFreePort()),
                                   absl::StrCat("--model=", model), "--backend=cpu", "--insecure"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  auto p = Process::Spawn(BinDir() + "/pkv-worker", args,
                          MakeTempDir("pkv-refused-start") + "/worker.log");
  if (!p.ok()) return p.status();
  const std::optional<int> code = (*p)->Wait(timeout);
  if (!code.has_value()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the worker kept running; log:\n", (*p)->LogTail()));
  }
  if (*code == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("the worker exited 0; log:\n", (*p)->LogTail()));
  }
  return (*p)->LogTail();
}

}  // namespace pkv::testing
