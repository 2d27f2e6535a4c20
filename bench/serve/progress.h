// The benchmark's progress display on stderr: a redrawn bar when the stream is a terminal, else
// one plain line about every 5 s (logs and CI stay readable). Runs on the dispatcher thread.
#pragma once

#include <cstdio>
#include <functional>
#include <string>

#include "bench/serve/driver.h"

namespace pkv::serve_bench {

// A LoadOptions::progress callback writing to `out`; `label` prefixes each line. `terminal`:
// draw a bar with \r (pass isatty(fileno(out))).
std::function<void(const LoadProgress&)> MakeProgressPrinter(std::FILE* out, bool terminal,
                                                             std::string label);

}  // namespace pkv::serve_bench
