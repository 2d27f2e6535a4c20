// Minimal leveled logging to stderr (Debian's abseil has no absl/log). Thread-safe: each message is
// formatted into one buffer and written with a single fwrite. Not for the decode hot path.
//   PKV_LOG(INFO) << "worker listening on " << addr;
// Level threshold: PKV_LOG_LEVEL=debug|info|warning|error (default info), read once.
#pragma once

#include <sstream>
#include <string_view>

namespace pkv {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// True when messages at `level` are printed.
bool LogEnabled(LogLevel level);
// Sets a process-wide prefix (e.g. "worker-0") shown on every line.
void SetLogTag(std::string_view tag);

class LogMessage {
 public:
  LogMessage(LogLevel level, const char* file, int line);
  ~LogMessage();
  std::ostream& stream() { return stream_; }

 private:
  LogLevel level_;
  std::ostringstream stream_;
};

}  // namespace pkv

#define PKV_LOG_LEVEL_DEBUG ::pkv::LogLevel::kDebug
#define PKV_LOG_LEVEL_INFO ::pkv::LogLevel::kInfo
#define PKV_LOG_LEVEL_WARNING ::pkv::LogLevel::kWarning
#define PKV_LOG_LEVEL_ERROR ::pkv::LogLevel::kError
#define PKV_LOG(level)                             \
  if (!::pkv::LogEnabled(PKV_LOG_LEVEL_##level)) { \
  } else                                           \
    ::pkv::LogMessage(PKV_LOG_LEVEL_##level, __FILE__, __LINE__).stream()
