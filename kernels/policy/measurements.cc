#include "kernels/policy/measurements.h"

#include <algorithm>

#include "kernels/policy/route_policy.h"

namespace pkv::policy {

bool CellTimes::complete() const {
  for (decode::Route r : kCandidateRoutes) {
    if (!has(r)) return false;
  }
  return true;
}

decode::Route CellTimes::best() const {
  decode::Route best = kCandidateRoutes[0];
  for (decode::Route r : kCandidateRoutes) {
    if (time(r) < time(best)) best = r;
  }
  return best;
}

double CellTimes::best_lead() const {
  const decode::Route b = best();
  double second = INFINITY;
  for (decode::Route r : kCandidateRoutes) {
    if (r != b) second = std::min(second, time(r));
  }
  return second / time(b);
}

}  // namespace pkv::policy
