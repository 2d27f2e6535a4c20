// The table of pkv-bench subcommands available in this build. Subcommands that need CUDA are only
// listed when the build has it (PKV_HAVE_CUDA).
#pragma once

#include <vector>

#include "bench/commands.h"

namespace pkv::bench {

const std::vector<Command>& Commands();

}  // namespace pkv::bench
