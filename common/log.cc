#include "common/log.h"

#include <sys/time.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <string>

namespace pkv {
namespace {

LogLevel ThresholdFromEnv() {
  const char* env = std::getenv("PKV_LOG_LEVEL");
  if (env == nullptr) return LogLevel::kInfo;
  std::string_view v(env);
  if (v == "debug") return LogLevel::kDebug;
  if (v == "warning") return LogLevel::kWarning;
  if (v == "error") return LogLevel::kError;
  return LogLevel::kInfo;
}

std::mutex& TagMutex() {
  static std::mutex mu;
  return mu;
}
std::string& Tag() {
  static std::string tag;
  return tag;
}

}  // namespace

bool LogEnabled(LogLevel level) {
  static const LogLevel threshold = ThresholdFromEnv();
  return level >= threshold;
}

void SetLogTag(std::string_view tag) {
  std::lock_guard<std::mutex> lock(TagMutex());
  Tag() = std::string(tag);
}

LogMessage::LogMessage(LogLevel level, const char* file, int line) : level_(level) {
  static const char kLetters[] = {'D', 'I', 'W', 'E'};
  timeval tv;
  gettimeofday(&tv, nullptr);
  tm local;
  localtime_r(&tv.tv_sec, &local);
  char when[32];
  std::snprintf(when, sizeof(when), "%02d:%02d:%02d.%03d", local.tm_hour, local.tm_min,
                local.tm_sec, static_cast<int>(tv.tv_usec / 1000));
  const char* base = std::strrchr(file, '/');
  std::string tag;
  {
    std::lock_guard<std::mutex> lock(TagMutex());
    tag = Tag();
  }
  stream_ << kLetters[static_cast<int>(level_)] << ' ' << when << ' ';
  if (!tag.empty()) stream_ << '[' << tag << "] ";
  stream_ << (base ? base + 1 : file) << ':' << line << "] ";
}

LogMessage::~LogMessage() {
  stream_ << '\n';
  const std::string s = stream_.str();
  std::fwrite(s.data(), 1, s.size(), stderr);
  std::fflush(stderr);
}

}  // namespace pkv
