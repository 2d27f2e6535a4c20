#include "common/deadline.h"

#include "grpc/support/time.h"

namespace pkv {

absl::Time ServerCallDeadline(const grpc::ServerContextBase& ctx) {
  const gpr_timespec raw = gpr_convert_clock_type(ctx.raw_deadline(), GPR_CLOCK_REALTIME);
  if (gpr_time_cmp(raw, gpr_inf_future(GPR_CLOCK_REALTIME)) == 0 ||
      raw.tv_sec >= kFarFutureUnixSeconds) {
    return absl::InfiniteFuture();
  }
  return absl::FromUnixSeconds(raw.tv_sec) + absl::Nanoseconds(raw.tv_nsec);
}

std::chrono::system_clock::time_point ToClientDeadline(absl::Time deadline) {
  if (deadline >= absl::FromUnixSeconds(kFarFutureUnixSeconds)) {
    return std::chrono::system_clock::time_point::max();
  }
  return absl::ToChronoTime(deadline);
}

}  // namespace pkv
