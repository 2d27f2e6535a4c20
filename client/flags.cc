#include "client/flags.h"

#include "absl/flags/flag.h"

// Optional numbers are std::optional flags: unset (the default, or --name=) leaves the server's
// default, which differs from every value.
ABSL_FLAG(std::string, router, "127.0.0.1:50051", "pkv-router address (generate)");
ABSL_FLAG(std::string, addr, "", "address of a router or worker (health, load, info)");
ABSL_FLAG(std::string, service, "", "health: grpc.health.v1 service name (\"\" = whole server)");
ABSL_FLAG(std::string, prompt, "", "generate: prompt text (tokenized by the worker)");
ABSL_FLAG(std::string, token_ids, "", "generate: prompt as comma-separated token ids");
ABSL_FLAG(int, max_tokens, 64, "generate: tokens to generate");
ABSL_FLAG(std::optional<double>, temperature, std::nullopt,
          "generate, bench serve: 0 = greedy; unset = server default (1.0)");
ABSL_FLAG(int, top_k, 0, "generate: keep the k most likely tokens (0 = off)");
ABSL_FLAG(std::optional<double>, top_p, std::nullopt,
          "generate, bench serve: nucleus mass in (0, 1]; unset = 1.0");
ABSL_FLAG(double, min_p, 0.0, "generate: min_p in [0, 1] (0 = off)");
ABSL_FLAG(
    std::optional<uint64_t>, seed, std::nullopt,
    "generate: sampling seed (unset = router picks one); bench serve: workload seed (unset = 0)");
ABSL_FLAG(std::vector<std::string>, stop, {},
          "generate: stop strings, comma-separated; C escapes like \\n are decoded");
ABSL_FLAG(std::vector<std::string>, stop_token_ids, {}, "generate: stop token ids");
ABSL_FLAG(bool, ignore_eos, false, "generate: keep going past EOS");
ABSL_FLAG(std::string, session_id, "", "generate: affinity key (same session, same worker)");
ABSL_FLAG(std::string, request_id, "", "generate: request id (router assigns one when empty)");
ABSL_FLAG(int, priority, 0, "generate: higher runs first when queued");
ABSL_FLAG(absl::Duration, deadline, absl::ZeroDuration(),
          "generate: whole-stream deadline, e.g. 30s (0 = none)");
ABSL_FLAG(bool, logprobs, false, "generate: request per-token log-probabilities");
ABSL_FLAG(int, top_logprobs, 0, "generate: with --logprobs, alternatives per position");
ABSL_FLAG(absl::Duration, timeout, absl::Seconds(3), "health, load, info: RPC deadline");
// Security, for every subcommand (README "Security").
ABSL_FLAG(bool, tls, false, "use TLS, verifying the server with the system's CA roots");
ABSL_FLAG(std::string, tls_ca, "", "use TLS, verifying the server with this PEM CA bundle");
ABSL_FLAG(std::string, tls_cert, "", "PEM client certificate (servers that require one)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert");
ABSL_FLAG(std::string, tls_server_name, "",
          "name to verify the server certificate against instead of the address's host");
ABSL_FLAG(std::string, api_key, "",
          "API key sent as 'authorization: Bearer <key>' (default: $PKV_API_KEY)");
