#include "kernels/policy/measurements.h"

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

}  // namespace pkv::policy
