// pkv-router's command-line flags (absl flags), turned into RouterProcessOptions
// (router_options.h). Linked into the binary only: the library never reads flags.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "router/router_options.h"

namespace pkv::router {

// Reads the flags after absl::ParseCommandLine; INVALID_ARGUMENT naming a bad flag.
absl::StatusOr<RouterProcessOptions> RouterProcessOptionsFromFlags();

}  // namespace pkv::router
