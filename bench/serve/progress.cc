#include "bench/serve/progress.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_format.h"

namespace pkv::serve_bench {
namespace {

// Fraction done: by requests when bounded by count, else by time.
double Fraction(const LoadProgress& p) {
  double f = 0;
  if (p.total > 0) f = static_cast<double>(p.finished) / static_cast<double>(p.total);
  if (p.duration_s > 0) f = std::max(f, p.elapsed_s / p.duration_s);
  return std::clamp(f, 0.0, 1.0);
}

}  // namespace

std::function<void(const LoadProgress&)> MakeProgressPrinter(std::FILE* out, bool terminal,
                                                             std::string label) {
  auto last_line_s = std::make_shared<double>(-1e9);
  return [out, terminal, label = std::move(label), last_line_s](const LoadProgress& p) {
    const double fraction = Fraction(p);
    const bool finished = p.in_flight == 0 && fraction >= 1.0;
    const double rate = p.elapsed_s > 0 ? p.finished / p.elapsed_s : 0;
    if (terminal) {
      constexpr int kWidth = 30;
      const int filled = static_cast<int>(fraction * kWidth);
      absl::FPrintF(out, "\r%s [%s%s] %3.0f%%  %d done (%d ok)  %d in flight  %.1f req/s  %.1fs ",
                    label, std::string(filled, '#'), std::string(kWidth - filled, '.'),
                    100 * fraction, p.finished, p.ok, p.in_flight, rate, p.elapsed_s);
      if (finished) absl::FPrintF(out, "\n");
      std::fflush(out);
      return;
    }
    if (p.elapsed_s - *last_line_s < 5.0 && !finished) return;
    *last_line_s = p.elapsed_s;
    absl::FPrintF(out, "%s %3.0f%%  %d done (%d ok)  %d in flight  %.1f req/s  %.1fs\n", label,
                  100 * fraction, p.finished, p.ok, p.in_flight, rate, p.elapsed_s);
  };
}

}  // namespace pkv::serve_bench
