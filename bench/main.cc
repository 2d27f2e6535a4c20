// pkv-bench: one binary, one subcommand per benchmark family (see commands.h).
//   pkv-bench <command> [--flag=value ...]; pkv-bench --help lists every flag.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/command_table.h"
#include "bench/commands.h"

namespace {

std::string Usage() {
  std::string s =
      "usage: pkv-bench <command> [--flag=value ...]\n"
      "e.g. pkv-bench kernels --trace bench/traces/heldout-20260623.tsv --out k.tsv\n"
      "commands:\n";
  for (const auto& c : pkv::bench::Commands()) {
    absl::StrAppend(&s, absl::StrFormat("  %-10s %s\n", c.name, c.summary));
  }
  absl::StrAppend(&s, "each flag's help names the commands that read it");
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(Usage());
  // --help lists the flags defined under bench/ (by default absl lists only those of a file
  // named after the binary), not the libraries' own.
  absl::FlagsUsageConfig config;
  config.contains_help_flags = [](absl::string_view file) {
    return absl::StrContains(file, "bench/");
  };
  absl::SetFlagsUsageConfig(config);
  const std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() < 2) {
    std::fprintf(stderr, "%s\n", Usage().c_str());
    return 2;
  }
  if (args.size() > 2) {
    std::fprintf(stderr, "pkv-bench: one command, then flags (--name=value); unexpected '%s'\n",
                 args[2]);
    return 2;
  }
  for (const auto& c : pkv::bench::Commands()) {
    if (args[1] == std::string(c.name)) return c.run();
  }
  std::fprintf(stderr, "pkv-bench: unknown command '%s'\n%s\n", args[1], Usage().c_str());
  return 2;
}
