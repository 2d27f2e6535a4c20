// Flags of the `pkv` command-line client, shared by its subcommands (defined in flags.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/time/time.h"

ABSL_DECLARE_FLAG(std::string, router);
ABSL_DECLARE_FLAG(std::string, addr);
ABSL_DECLARE_FLAG(std::string, service);
ABSL_DECLARE_FLAG(std::string, prompt);
ABSL_DECLARE_FLAG(std::string, token_ids);
ABSL_DECLARE_FLAG(int, max_tokens);
ABSL_DECLARE_FLAG(std::optional<double>, temperature);
ABSL_DECLARE_FLAG(int, top_k);
ABSL_DECLARE_FLAG(std::optional<double>, top_p);
ABSL_DECLARE_FLAG(double, min_p);
ABSL_DECLARE_FLAG(std::optional<uint64_t>, seed);
ABSL_DECLARE_FLAG(std::vector<std::string>, stop);
ABSL_DECLARE_FLAG(std::vector<std::string>, stop_token_ids);
ABSL_DECLARE_FLAG(bool, ignore_eos);
ABSL_DECLARE_FLAG(std::string, session_id);
ABSL_DECLARE_FLAG(std::string, request_id);
ABSL_DECLARE_FLAG(int, priority);
ABSL_DECLARE_FLAG(absl::Duration, deadline);
ABSL_DECLARE_FLAG(bool, logprobs);
ABSL_DECLARE_FLAG(int, top_logprobs);
ABSL_DECLARE_FLAG(absl::Duration, timeout);
ABSL_DECLARE_FLAG(bool, tls);
ABSL_DECLARE_FLAG(std::string, tls_ca);
ABSL_DECLARE_FLAG(std::string, tls_cert);
ABSL_DECLARE_FLAG(std::string, tls_key);
ABSL_DECLARE_FLAG(std::string, tls_server_name);
ABSL_DECLARE_FLAG(std::string, api_key);
