// pkv-bench: one binary, one subcommand per benchmark family (see commands.h).
#include <cstdio>
#include <cstring>

#include "bench/command_table.h"
#include "bench/commands.h"

int main(int argc, char** argv) {
  const auto& table = pkv::bench::Commands();
  if (argc >= 2) {
    for (const auto& c : table) {
      if (std::strcmp(argv[1], c.name) == 0) return c.run(argc - 1, argv + 1);
    }
  }
  std::fprintf(stderr, "usage: pkv-bench <command> [flags]\ncommands:\n");
  for (const auto& c : table) std::fprintf(stderr, "  %-10s %s\n", c.name, c.summary);
  return argc >= 2 ? 2 : 0;
}
