// RouterOptions validation: the defaults are valid; a duration that is negative, infinite or
// below its floor is refused with a message naming its flag (checked apart from flag parsing).
#include "router/router_options.h"

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace pkv::router {
namespace {

RouterProcessOptions Valid() {
  RouterProcessOptions p;
  p.router.workers = {"127.0.0.1:50061"};
  return p;
}

TEST(RouterOptionsTest, DefaultsAreValid) {
  const RouterProcessOptions p = Valid();
  EXPECT_TRUE(ValidateRouterProcessOptions(p).ok()) << ValidateRouterProcessOptions(p);
}

TEST(RouterOptionsTest, ZeroMeansOffWhereDocumented) {
  RouterProcessOptions p = Valid();
  p.drain_timeout = absl::ZeroDuration();
  p.router.client_write_timeout = absl::ZeroDuration();
  p.router.queue_timeout = absl::ZeroDuration();
  p.router.retry_backoff = absl::ZeroDuration();
  EXPECT_TRUE(ValidateRouterProcessOptions(p).ok()) << ValidateRouterProcessOptions(p);
}

TEST(RouterOptionsTest, BadDurationsNameTheirFlag) {
  using Spoil = std::function<void(RouterProcessOptions&)>;
  const std::vector<std::pair<std::string, Spoil>> cases = {
      {"--health_interval",
       [](RouterProcessOptions& p) { p.router.health_interval = absl::ZeroDuration(); }},
      {"--health_interval",
       [](RouterProcessOptions& p) { p.router.health_interval = absl::Microseconds(1); }},
      {"--health_timeout",
       [](RouterProcessOptions& p) { p.router.health_timeout = absl::InfiniteDuration(); }},
      {"--load_interval",
       [](RouterProcessOptions& p) { p.router.load_interval = absl::Milliseconds(-1); }},
      {"--dns_interval",
       [](RouterProcessOptions& p) { p.router.dns_interval = absl::Milliseconds(50); }},
      {"--stall_timeout",
       [](RouterProcessOptions& p) { p.router.stall_timeout = absl::ZeroDuration(); }},
      {"--eject_base", [](RouterProcessOptions& p) { p.router.eject_base = absl::ZeroDuration(); }},
      {"--queue_timeout",
       [](RouterProcessOptions& p) { p.router.queue_timeout = absl::Seconds(-1); }},
      {"--retry_backoff_max",
       [](RouterProcessOptions& p) { p.router.retry_backoff_max = absl::Seconds(-1); }},
      {"--worker_keepalive",
       [](RouterProcessOptions& p) { p.router.worker_keepalive = absl::Milliseconds(10); }},
      {"--handshake_timeout",
       [](RouterProcessOptions& p) { p.router.handshake_timeout = absl::ZeroDuration(); }},
      {"--client_write_timeout",
       [](RouterProcessOptions& p) { p.router.client_write_timeout = absl::Seconds(-30); }},
      {"--http_read_timeout",
       [](RouterProcessOptions& p) { p.router.http_read_timeout = absl::ZeroDuration(); }},
      {"--http_request_timeout",
       [](RouterProcessOptions& p) { p.router.http_request_timeout = absl::Milliseconds(500); }},
      {"--drain_timeout", [](RouterProcessOptions& p) { p.drain_timeout = absl::Seconds(-1); }},
      {"--drain_timeout",
       [](RouterProcessOptions& p) { p.drain_timeout = absl::InfiniteDuration(); }},
      {"--max_streams_per_connection_per_second",
       [](RouterProcessOptions& p) { p.router.max_streams_per_connection_per_second = -1; }},
  };
  for (const auto& [flag, spoil] : cases) {
    RouterProcessOptions p = Valid();
    spoil(p);
    const absl::Status s = ValidateRouterProcessOptions(p);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << flag;
    // The flag name followed by a space: --health_interval must not match --health_interval_ms.
    EXPECT_NE(s.message().find(flag + " "), std::string::npos) << flag << ": " << s;
  }
}

TEST(RouterOptionsTest, MessageShowsTheDurationAndItsFloor) {
  RouterProcessOptions p = Valid();
  p.router.health_interval = absl::Milliseconds(5);
  EXPECT_EQ(ValidateRouterProcessOptions(p).message(),
            "--health_interval must be a finite duration >= 10ms, got 5ms");
}

}  // namespace
}  // namespace pkv::router
