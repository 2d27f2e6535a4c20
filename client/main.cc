// `pkv`: command-line client of PersistentKV.
//   pkv generate --router 127.0.0.1:50051 --prompt "text" | --token_ids 1,2,3 [sampling flags]
//   pkv health --addr host:port [--service name]
//   pkv load --addr worker:port
//   pkv info --addr router_or_worker:port
//   pkv bench serve --router host:port --workload multi_turn --request_rate 50 [...]
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
    "             --request_id ID --deadline 30s --logprobs --top_logprobs N]\n"
    "  health    grpc.health.v1 Check: --addr host:port [--service name]\n"
    "  load      a worker's load: --addr worker:port\n"
    "  info      model info from a router or a worker: --addr host:port\n"
    "  bench serve  serving benchmark over the public API (bench/serve/)\n"
    "  bench api    TTFT through the OpenAI HTTP API vs gRPC on one router, same run\n"
    "            e.g. pkv bench api --router 127.0.0.1:50051 --http 127.0.0.1:8000\n"
    "            --router host:port | --target worker --worker host:port | --target both\n"
    "            --workload sharegpt|multi_turn|long_doc [--input_len 128 --output_len 64\n"
    "             --len_sigma 0.5 --system_prompt_tokens N --turns 4 --conversations N\n"
    "             --num_docs 4 --doc_tokens 512 --seed S --temperature T --top_p P]\n"
    "            load: --request_rate R [--arrival poisson|constant] | --concurrency N |\n"
    "                  --rate_sweep 1,2,4,8; bound: --num_requests 200 | --duration 30s\n"
    "            [--slo_ttft 200ms --slo_tpot 50ms --metrics_url router:metrics_port\n"
    "             --json_out FILE --request_timeout 120s --progress=false]\n"
    "            e.g. pkv bench serve --router 127.0.0.1:50051 --metrics_url 127.0.0.1:9100\n"
    "                 --workload multi_turn --request_rate 50 --num_requests 400\n"
    "            every flag: pkv bench serve --help=bench_serve\n"
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
  std::string command = argv[1];
  // `bench serve` is one command of two words.
  const bool bench = command == "bench";
  if (bench &&
      (argc < 3 || (std::strcmp(argv[2], "serve") != 0 && std::strcmp(argv[2], "api") != 0))) {
    return pkv::client::UsageError("expected `pkv bench serve` or `pkv bench api`");
  }
  if (bench) command = std::string("bench ") + argv[2];
  const int skip = bench ? 2 : 1;
  // Parse the flags after the subcommand (its last word stands in for the program name).
  std::vector<char*> args = absl::ParseCommandLine(argc - skip, argv + skip);
  if (args.size() > 1) {
    return pkv::client::UsageError("unexpected argument '" + std::string(args[1]) +
                                   "' (flags are --name=value)");
  }
  if (command == "generate") return pkv::client::RunGenerate();
  if (command == "health") return pkv::client::RunHealth();
  if (command == "load") return pkv::client::RunLoad();
  if (command == "info") return pkv::client::RunInfo();
  if (command == "bench serve") return pkv::client::RunBenchServe();
  if (command == "bench api") return pkv::client::RunBenchApi();
  return pkv::client::UsageError("unknown command '" + command +
                                 "'; expected generate, health, load, info or bench serve");
}
