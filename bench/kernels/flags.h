// A tiny --name=value / --name value parser for the kernels subcommand. pkv-bench links several
// subcommands into one binary, so global flag registries (absl flags) would collide on names like
// --out; each subcommand parses its own argv instead.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "absl/status/statusor.h"

namespace pkv::bench {

class Flags {
 public:
  // `known` maps each accepted flag name to its default value (and documents the set).
  explicit Flags(std::map<std::string, std::string> known) : values_(std::move(known)) {}
  // INVALID_ARGUMENT for an unknown flag or a missing value.
  absl::Status Parse(int argc, char** argv);
  const std::string& Str(const std::string& name) const { return values_.at(name); }
  int Int(const std::string& name) const { return std::stoi(values_.at(name)); }
  std::string Usage() const;

 private:
  std::map<std::string, std::string> values_;
};

// The shared body of a subcommand's main: parses argv into `flags` (usage and exit code 2 on a
// bad flag), runs `run` and reports its error as "pkv-bench <name>: ..." with exit code 1.
int RunSubcommand(const char* name, Flags& flags, int argc, char** argv,
                  const std::function<absl::Status(const Flags&)>& run);

}  // namespace pkv::bench
