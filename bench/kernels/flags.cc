#include "bench/kernels/flags.h"

#include <cstdio>

#include "absl/strings/str_cat.h"

namespace pkv::bench {

absl::Status Flags::Parse(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) return absl::InvalidArgumentError("unexpected argument " + arg);
    arg = arg.substr(2);
    std::string value;
    const size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return absl::InvalidArgumentError("flag --" + arg + " needs a value");
    }
    auto it = values_.find(arg);
    if (it == values_.end()) return absl::InvalidArgumentError("unknown flag --" + arg);
    it->second = value;
  }
  return absl::OkStatus();
}

std::string Flags::Usage() const {
  std::string s;
  for (const auto& [k, v] : values_) absl::StrAppend(&s, "  --", k, " (default '", v, "')\n");
  return s;
}

int RunSubcommand(const char* name, Flags& flags, int argc, char** argv,
                  const std::function<absl::Status(const Flags&)>& run) {
  absl::Status st = flags.Parse(argc, argv);
  if (!st.ok()) {
    std::fprintf(stderr, "pkv-bench %s: %s\nflags:\n%s", name, std::string(st.message()).c_str(),
                 flags.Usage().c_str());
    return 2;
  }
  st = run(flags);
  if (!st.ok()) {
    std::fprintf(stderr, "pkv-bench %s: %s\n", name, std::string(st.message()).c_str());
    return 1;
  }
  return 0;
}

}  // namespace pkv::bench
