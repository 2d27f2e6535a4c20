// pkv-bench's flags shared by several subcommands. pkv-bench is one binary with one absl flag
// registry, so a name like --out is defined once, here, and every subcommand that takes it reads
// it; a flag only one subcommand reads is defined in that subcommand's file. Where subcommands
// want different defaults (--iters, --steps) the flag is a std::optional (--dtype: empty) and each
// subcommand applies its own default, as the help text says. Read after absl::ParseCommandLine
// (main.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/flags/declare.h"
#include "absl/status/status.h"
#include "kernels/attention/kv_layout.h"

ABSL_DECLARE_FLAG(std::string, trace);
ABSL_DECLARE_FLAG(std::string, lines);
ABSL_DECLARE_FLAG(std::string, out);
ABSL_DECLARE_FLAG(std::string, dtype);
ABSL_DECLARE_FLAG(std::string, kv_dtype);
ABSL_DECLARE_FLAG(std::optional<int32_t>, iters);
ABSL_DECLARE_FLAG(std::optional<int32_t>, steps);
ABSL_DECLARE_FLAG(int32_t, sm_count);
ABSL_DECLARE_FLAG(int32_t, ctas_per_sm);
ABSL_DECLARE_FLAG(int32_t, hq);
ABSL_DECLARE_FLAG(int32_t, hkv);
ABSL_DECLARE_FLAG(int32_t, d);
ABSL_DECLARE_FLAG(int32_t, page);
ABSL_DECLARE_FLAG(std::string, measurements);
ABSL_DECLARE_FLAG(std::string, traces);
ABSL_DECLARE_FLAG(std::string, gpu_name);

namespace pkv::bench {

// The KV shape of --hq --hkv --d --page.
KvShape KvShapeFromFlags();

// Writes `text` to the file --out names; nothing when --out is empty.
absl::Status WriteToOutFlag(const std::string& text);

// The shared body of a subcommand: runs `run` and reports its error as "pkv-bench <name>: ..."
// with exit code 1 (0 on success).
int RunSubcommand(const char* name, const std::function<absl::Status()>& run);

}  // namespace pkv::bench
