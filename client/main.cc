// `pkv`: command-line client of PersistentKV.
//   pkv generate --router 127.0.0.1:50051 --prompt "text" | --token_ids 1,2,3 [sampling flags]
//   pkv health --addr host:port [--service name]
//   pkv load --addr worker:port
//   pkv info --addr router_or_worker:port
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "client/commands.h"

namespace {

constexpr char kUsage[] =
    "usage: pkv <command> [flags]\n"
    "commands:\n"
    "  generate  stream a completion through the router\n"
    "            --router host:port (default 127.0.0.1:50051)\n"
    "            --prompt \"text\" | --token_ids 1,2,3\n"
    "            [--max_tokens 64 --temperature T --top_k K --top_p P --min_p M --seed S\n"
    "             --stop \"a,b\" --stop_token_ids 1,2 --ignore_eos --session_id ID\n"
    "             --request_id ID --deadline_ms MS --logprobs --top_logprobs N]\n"
    "  health    grpc.health.v1 Check: --addr host:port [--service name]\n"
    "  load      a worker's load: --addr worker:port\n"
    "  info      model info from a router or a worker: --addr host:port\n"
    "every command: [--tls_ca ca.pem | --tls] [--tls_cert c.pem --tls_key k.pem]\n"
    "               [--api_key KEY (default: $PKV_API_KEY)]\n"
    "run `pkv <command> --helpfull` for every flag\n";

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  if (argc < 2 || std::strcmp(argv[1], "help") == 0 || std::strcmp(argv[1], "--help") == 0 ||
      std::strcmp(argv[1], "-h") == 0) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? pkv::client::kUsageError : 0;
  }
  const std::string command = argv[1];
  // Parse the flags after the subcommand (argv[1] stands in for the program name).
  std::vector<char*> args = absl::ParseCommandLine(argc - 1, argv + 1);
  if (args.size() > 1) {
    return pkv::client::UsageError("unexpected argument '" + std::string(args[1]) +
                                   "' (flags are --name=value)");
  }
  if (command == "generate") return pkv::client::RunGenerate();
  if (command == "health") return pkv::client::RunHealth();
  if (command == "load") return pkv::client::RunLoad();
  if (command == "info") return pkv::client::RunInfo();
  return pkv::client::UsageError("unknown command '" + command +
                                 "'; expected generate, health, load or info");
}
