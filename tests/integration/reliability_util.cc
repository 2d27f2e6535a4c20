#include "tests/integration/reliability_util.h"

#include <cmath>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/grpc_status.h"
#include "gtest/gtest.h"

namespace pkv::testing {

int64_t RssKiB(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view rest = line;
    if (!absl::ConsumePrefix(&rest, "VmRSS:")) continue;
    rest = absl::StripAsciiWhitespace(rest);
    absl::ConsumeSuffix(&rest, "kB");
    int64_t kib = 0;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(rest), &kib)) return kib;
  }
  return -1;
}

Outcome Stream(pkv::v1::Generation::Stub* stub, const pkv::v1::GenerateRequest& request,
               absl::Duration deadline, const StreamControl& control) {
  Outcome out;
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  for (const auto& [key, value] : control.metadata) ctx.AddMetadata(key, value);
  if (control.wait_for_ready) ctx.set_wait_for_ready(true);
  const absl::Time start = absl::Now();
  std::atomic<bool> finished{false};
  std::atomic<bool> cancelled{false};
  std::thread timer;
  if (control.cancel_after != absl::InfiniteDuration()) {
    timer = std::thread([&] {
      const absl::Time when = start + control.cancel_after;
      while (!finished.load() && absl::Now() < when) absl::SleepFor(absl::Milliseconds(2));
      if (!finished.load() && !cancelled.exchange(true)) ctx.TryCancel();
    });
  }
  auto reader = stub->Generate(&ctx, request);
  pkv::v1::GenerateResponse response;
  while (reader->Read(&response)) {
    if (response.has_chunk()) {
      for (uint32_t id : response.chunk().token_ids()) out.tokens.push_back(id);
      out.text += response.chunk().text();
      if (control.on_progress) control.on_progress(static_cast<int>(out.tokens.size()));
      if (control.cancel_after_tokens > 0 &&
          static_cast<int>(out.tokens.size()) >= control.cancel_after_tokens &&
          !cancelled.exchange(true)) {
        ctx.TryCancel();
      }
    } else if (response.has_complete()) {
      out.completed = true;
      out.complete = response.complete();
    }
  }
  out.status = reader->Finish();
  finished.store(true);
  if (timer.joinable()) timer.join();
  out.cancelled_by_client = cancelled.load();
  out.elapsed = absl::Now() - start;
  for (const auto& [key, value] : ctx.GetServerTrailingMetadata()) {
    out.trailers.emplace(std::string(key.data(), key.size()),
                         std::string(value.data(), value.size()));
  }
  return out;
}

MetricsSnapshot::MetricsSnapshot(const std::string& address) {
  absl::StatusOr<std::string> text = HttpGet(address, "/metrics");
  ok_ = text.ok();
  if (ok_) text_ = *std::move(text);
}

double MetricsSnapshot::Value(const std::string& sample) const {
  return ok_ ? MetricValue(text_, sample) : std::nan("");
}

absl::Status WaitWorkerQuiescent(const WorkerProc& w, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::string last = "no scrape";
  while (true) {
    MetricsSnapshot m(w.metrics_address());
    if (m.ok()) {
      const double used = m.Value("pkv_kv_cache_pages{state=\"used\"}");
      const double free = m.Value("pkv_kv_cache_pages{state=\"free\"}");
      const double total = m.Value("pkv_kv_cache_pages_total");
      const double allocs = m.Value("pkv_kv_page_allocs");
      const double frees = m.Value("pkv_kv_page_frees");
      const double running = m.Value("pkv_requests{state=\"running\"}");
      const double waiting = m.Value("pkv_requests{state=\"waiting\"}");
      last = absl::StrCat("used ", used, ", free ", free, ", total ", total, ", allocs ", allocs,
                          ", frees ", frees, ", running ", running, ", waiting ", waiting);
      if (used == 0 && running == 0 && waiting == 0 && allocs == frees && used + free == total) {
        return absl::OkStatus();
      }
    }
    if (absl::Now() >= deadline) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::FailedPreconditionError(absl::StrCat("worker ", w.id, " not quiescent: ", last));
}

pkv::v1::GenerateRequest GreedyRequest(int key, int prompt_len, uint32_t max_tokens) {
  std::vector<uint32_t> prompt;
  uint32_t x = 2654435761u * static_cast<uint32_t>(key + 1);
  for (int i = 0; i < prompt_len; ++i) {
    x = x * 1664525u + 1013904223u;
    prompt.push_back(1 + (x >> 8) % 500);  // below the tiny model's special tokens (510, 511)
  }
  pkv::v1::GenerateRequest request = MakeRequest(prompt, max_tokens);
  request.mutable_sampling()->set_ignore_eos(true);
  return request;
}

pkv::v1::GenerateRequest SeededRequest(int key, int prompt_len, uint32_t max_tokens,
                                       uint64_t seed) {
  pkv::v1::GenerateRequest request = GreedyRequest(key, prompt_len, max_tokens);
  request.mutable_sampling()->set_temperature(1.0f);
  request.mutable_sampling()->set_top_k(50);
  request.mutable_sampling()->set_seed(seed);
  return request;
}

int CountCode(const std::vector<Outcome>& outcomes, grpc::StatusCode code) {
  int n = 0;
  for (const Outcome& o : outcomes) n += o.status.error_code() == code;
  return n;
}

std::string CodeSummary(const std::vector<Outcome>& outcomes) {
  std::map<std::string, int> counts;
  std::map<std::string, std::string> example;
  for (const Outcome& o : outcomes) {
    const std::string code = StatusCodeName(static_cast<absl::StatusCode>(o.status.error_code()));
    ++counts[code];
    if (!o.status.ok()) example.emplace(code, o.status.error_message());
  }
  std::string out;
  for (const auto& [code, n] : counts) {
    absl::StrAppend(&out, code, ": ", n);
    if (example.contains(code)) absl::StrAppend(&out, " (e.g. \"", example[code], "\")");
    absl::StrAppend(&out, "; ");
  }
  return out;
}

bool WaitFor(const std::function<bool()>& done, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!done()) {
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

std::unique_ptr<pkv::v1::Generation::Stub> NewRouterStub(const Cluster& cluster) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return pkv::v1::Generation::NewStub(grpc::CreateCustomChannel(
      cluster.router_address(), grpc::InsecureChannelCredentials(), args));
}

std::unique_ptr<Cluster> StartCluster(int workers, std::vector<std::string> worker_args,
                                      std::vector<std::string> router_args, bool start_router,
                                      std::vector<std::string> w0_args) {
  ClusterOptions options;
  options.num_workers = workers;
  options.start_router = start_router;
  options.per_worker_args = {std::move(w0_args)};
  options.worker_args = {"--enable_test_faults"};
  options.worker_args.insert(options.worker_args.end(), worker_args.begin(), worker_args.end());
  options.router_args = std::move(router_args);
  auto cluster = Cluster::Start(options);
  EXPECT_TRUE(cluster.ok()) << cluster.status();
  return cluster.ok() ? *std::move(cluster) : nullptr;
}

std::vector<Outcome> RunConcurrently(const Cluster& cluster,
                                     const std::vector<pkv::v1::GenerateRequest>& requests,
                                     absl::Duration deadline,
                                     const std::vector<StreamControl>& controls) {
  std::vector<Outcome> outcomes(requests.size());
  std::vector<std::thread> threads;
  threads.reserve(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    threads.emplace_back([&, i] {
      auto stub = NewRouterStub(cluster);
      outcomes[i] = Stream(stub.get(), requests[i], deadline,
                           i < controls.size() ? controls[i] : StreamControl{});
    });
  }
  for (std::thread& t : threads) t.join();
  return outcomes;
}

double SumOverWorkers(Cluster& cluster, const std::vector<int>& which, const std::string& sample) {
  double sum = 0;
  for (int w : which) sum += MetricsSnapshot(cluster.worker(w).metrics_address()).Value(sample);
  return sum;
}

double RouterSample(Cluster& cluster, const std::string& sample) {
  return MetricsSnapshot(cluster.router_metrics_address()).Value(sample);
}

std::string SessionOn(Cluster& cluster, int w) {
  auto stub = NewRouterStub(cluster);
  for (int i = 0; i < 64; ++i) {
    const std::string session = absl::StrCat("pin-", w, "-", i);
    pkv::v1::GenerateRequest request = GreedyRequest(i, 4, 1);
    request.set_session_id(session);
    const Outcome o = Stream(stub.get(), request, absl::Seconds(60));
    if (o.status.ok() && o.complete.worker_id() == cluster.worker(w).id) return session;
  }
  ADD_FAILURE() << "no session landed on worker " << w;
  return "";
}

bool WaitRouterHealthy(Cluster& cluster, int healthy, absl::Duration timeout) {
  return WaitFor(
      [&] { return RouterSample(cluster, "pkv_router_workers{state=\"healthy\"}") == healthy; },
      timeout);
}

std::vector<Outcome> References(const Cluster& cluster,
                                const std::vector<pkv::v1::GenerateRequest>& requests) {
  // Concurrently: outputs do not depend on batching (greedy and the seeded sampler are batch-
  // invariant; the model tests check that), and a serial run would cost seconds.
  std::vector<Outcome> out = RunConcurrently(cluster, requests, absl::Seconds(60));
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_TRUE(out[i].status.ok()) << out[i].status.error_message();
    EXPECT_EQ(out[i].tokens.size(), requests[i].sampling().max_tokens());
  }
  return out;
}

}  // namespace pkv::testing
