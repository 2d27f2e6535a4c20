#include "worker/model/file_util.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace pkv {

absl::StatusOr<std::string> ReadFileToString(const std::string& path, int64_t max_bytes) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    return absl::InternalError(absl::StrCat(path, ": ", std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  if (st.st_size > max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", st.st_size, " bytes is larger than the limit of ", max_bytes));
  }
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return absl::InternalError(absl::StrCat(path, ": ", std::strerror(errno)));
  std::string out(static_cast<size_t>(st.st_size), '\0');
  const size_t got = out.empty() ? 0 : std::fread(out.data(), 1, out.size(), f);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed || got != out.size()) {
    return absl::InternalError(absl::StrCat(path, ": short read (", got, " of ", out.size(), ")"));
  }
  return out;
}

std::string JoinPath(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  if (dir.back() == '/') return dir + name;
  return absl::StrCat(dir, "/", name);
}

}  // namespace pkv
