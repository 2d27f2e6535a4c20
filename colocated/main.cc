// pkv-colocated: a pkv-router and one pkv-worker in one process (colocated_router.h), for a
// one-GPU box: every pkv-worker flag (worker_flags.cc) plus the router's --router_* flags below;
// the router's other settings keep RouterOptions' defaults (router_options.h). SIGTERM/SIGINT
// drains the router, then the worker, and exits 0.
//   pkv-colocated --model DIR --insecure [--listen=127.0.0.1:50061] [--router_listen=...]
//                 [--router_workers=host:port,...]   (remote workers beside the in-process one)
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "colocated/colocated_router.h"
#include "worker/service/worker_flags.h"
#include "worker/service/worker_server.h"

static const pkv::router::RouterOptions kRouter;  // the defaults, kept in router_options.h

ABSL_FLAG(std::string, router_listen, kRouter.listen, "client-facing gRPC address of the router");
ABSL_FLAG(std::string, router_http_listen, kRouter.http_listen,
          "the router's OpenAI-compatible HTTP API (host:port); empty = off");
ABSL_FLAG(std::string, router_workers, "",
          "remote pkv-worker processes (host:port,...) placed beside the in-process worker");
ABSL_FLAG(int, router_max_inflight, kRouter.max_inflight, "router: Generate streams at once");
ABSL_FLAG(int, router_max_queue, kRouter.max_queue,
          "router: streams waiting for a slot beyond --router_max_inflight");
ABSL_FLAG(bool, router_prefix_routing, kRouter.prefix_routing,
          "router: prefer the worker that likely caches the prompt's prefix");
ABSL_FLAG(bool, router_direct, pkv::colocated::ColocatedOptions().direct,
          "the router's streams call the in-process worker's engine directly; false: over gRPC's "
          "in-process transport (to measure the difference)");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "pkv-colocated --model DIR --insecure [--listen ADDR] [--router_listen ADDR] "
      "[--router_workers host:port,...] [worker flags]");
  absl::ParseCommandLine(argc, argv);
  const pkv::WorkerOptions worker = pkv::WorkerOptionsFromFlags();
  pkv::colocated::ColocatedOptions colocated_options;
  pkv::router::RouterOptions& router = colocated_options.router;
  colocated_options.direct = absl::GetFlag(FLAGS_router_direct);
  router.listen = absl::GetFlag(FLAGS_router_listen);
  router.http_listen = absl::GetFlag(FLAGS_router_http_listen);
  absl::StatusOr<std::vector<std::string>> remote =
      pkv::router::ParseWorkerList(absl::GetFlag(FLAGS_router_workers));
  if (!remote.ok()) {
    std::fprintf(stderr, "pkv-colocated: --router_workers: %s\n",
                 std::string(remote.status().message()).c_str());
    return 2;
  }
  router.workers = *std::move(remote);
  router.max_inflight = absl::GetFlag(FLAGS_router_max_inflight);
  router.max_queue = absl::GetFlag(FLAGS_router_max_queue);
  router.prefix_routing = absl::GetFlag(FLAGS_router_prefix_routing);
  if (absl::Status valid = pkv::colocated::ValidateColocated(router, worker); !valid.ok()) {
    std::fprintf(stderr, "pkv-colocated: %s\n", std::string(valid.message()).c_str());
    return 2;
  }
  std::string worker_name = pkv::colocated::InProcessWorkerName(worker, colocated_options.direct);
  pkv::colocated::ColocatedRouter colocated(std::move(colocated_options), std::move(worker_name));
  return pkv::RunWorker(worker, colocated.Hooks());
}
