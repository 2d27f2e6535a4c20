// pkv-router's command-line flags (absl flags), turned into RouterOptions plus the process-level
// settings main.cc uses. Linked into the binary only: the library never reads flags.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "router/router_options.h"

namespace pkv::router {

struct RouterProcessOptions {
  RouterOptions router;
  std::string metrics_listen = "127.0.0.1:9100";  // Prometheus /metrics; empty = off
  int drain_timeout_s = 30;
};

// Reads the flags after absl::ParseCommandLine; INVALID_ARGUMENT naming a bad flag.
absl::StatusOr<RouterProcessOptions> RouterProcessOptionsFromFlags();

}  // namespace pkv::router
