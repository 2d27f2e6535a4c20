#include "bench/e2e/e2e_bench.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <numeric>
#include <optional>
#include <random>

#include "absl/strings/str_cat.h"
#include "bench/e2e/e2e_timeline.h"
#include "bench/kernels/gpu_util.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "kernels/prefill/prefill_plan.h"
#include "worker/cuda_backend/device_buffer.h"
#include "worker/cuda_backend/gemm.h"
#include "worker/kv_cache/page_pool.h"
#include "worker/scheduler/scheduler.h"

namespace pkv::bench {
namespace {

using Clock = std::chrono::steady_clock;
using cuda_backend::DeviceBuffer;

double Ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

struct BenchSeq {
  std::vector<int32_t> tokens;
  std::vector<int32_t> pages;
};

absl::StatusOr<double> MeasureGemmTflops(int64_t n, cudaStream_t stream) {
  PKV_ASSIGN_OR_RETURN(auto gemm, cuda_backend::Gemm::Create(int64_t{32} << 20));
  PKV_ASSIGN_OR_RETURN(DeviceBuffer a, DeviceBuffer::Allocate(n * n * 2));
  PKV_ASSIGN_OR_RETURN(DeviceBuffer b, DeviceBuffer::Allocate(n * n * 2));
  PKV_ASSIGN_OR_RETURN(DeviceBuffer c, DeviceBuffer::Allocate(n * n * 2));
  PKV_RETURN_IF_ERROR(FillRandom16(a.get(), n * n, 3, true, stream));
  PKV_RETURN_IF_ERROR(FillRandom16(b.get(), n * n, 4, true, stream));
  cudaEvent_t e0, e1;
  PKV_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e0));
  PKV_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e1));
  std::vector<double> ms;
  for (int i = 0; i < 13; ++i) {
    PKV_CUDA_RETURN_IF_ERROR(cudaEventRecord(e0, stream));
    PKV_RETURN_IF_ERROR(
        gemm->Linear(decode::DType::kBFloat16, a.get(), n, n, b.get(), n, c.get(), false, stream));
    PKV_CUDA_RETURN_IF_ERROR(cudaEventRecord(e1, stream));
    PKV_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(e1));
    float t = 0;
    PKV_CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&t, e0, e1));
    if (i >= 3) ms.push_back(t);  // three warm-ups
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return 2.0 * n * n * n / (Percentile(ms, 0.5) * 1e-3) / 1e12;
}

// Random tokens and shuffled pages for rows that will grow to `final_len` tokens.
// Rows take their pages from a random permutation of the whole pool (a long-running server's
// fragmented pool), or with `compact` in order from page 0 (a fresh server's allocator).
absl::StatusOr<std::vector<BenchSeq>> MakeSeqs(const std::vector<int32_t>& final_lens,
                                               int32_t vocab, int32_t page_size, int64_t pool,
                                               std::mt19937* rng, bool compact = false) {
  int64_t need = 0;
  for (int32_t len : final_lens) need += (len + page_size - 1) / page_size;
  if (need > pool) {
    return absl::ResourceExhaustedError(
        absl::StrCat("needs ", need, " KV pages, the pool has ", pool));
  }
  std::vector<int32_t> perm(pool);
  std::iota(perm.begin(), perm.end(), 0);
  if (!compact) std::shuffle(perm.begin(), perm.end(), *rng);
  std::vector<BenchSeq> seqs;
  int64_t next = 0;
  for (int32_t len : final_lens) {
    BenchSeq s;
    s.tokens.resize(len);
    for (int32_t& t : s.tokens) t = static_cast<int32_t>((*rng)() % (vocab - 2));
    const int32_t np = (len + page_size - 1) / page_size;
    s.pages.assign(perm.begin() + next, perm.begin() + next + np);
    next += np;
    seqs.push_back(std::move(s));
  }
  return seqs;
}

}  // namespace

double PrefillFlops(const ModelConfig& c, int32_t tokens) {
  const double h = c.hidden_size, d = c.head_dim, inter = c.intermediate_size;
  const double per_layer_params =
      h * (c.num_q_heads + 2.0 * c.num_kv_heads) * d + c.num_q_heads * d * h + 3.0 * h * inter;
  const prefill::PrefillRow row{0, tokens, 0, 0};
  const double attention =
      prefill::PrefillAttentionFlops({&row, 1}, c.num_q_heads, c.head_dim) * c.num_layers;
  return 2.0 * tokens * per_layer_params * c.num_layers + attention +
         2.0 * h * c.vocab_size;  // the sampled row's LM head
}

absl::StatusOr<Ceilings> MeasureCeilings(cudaStream_t stream) {
  Ceilings c;
  PKV_ASSIGN_OR_RETURN(c.stream_gbps, MeasureStreamReadGBps(int64_t{4} << 30, 20, stream));
  PKV_ASSIGN_OR_RETURN(c.gemm_tflops, MeasureGemmTflops(8192, stream));
  return c;
}

absl::StatusOr<DecodeResult> RunDecode(CudaModelBackend* backend, const std::string& trace,
                                       const std::vector<int32_t>& lengths, int32_t warmup,
                                       int32_t steps, double stream_gbps, uint32_t seed,
                                       const SamplingParams& sampling_in, bool overlap,
                                       bool compact_pages, const std::string& timeline_path) {
  DecodeResult r;
  r.trace = trace;
  r.batch = static_cast<int32_t>(lengths.size());
  r.mean_len = std::accumulate(lengths.begin(), lengths.end(), 0.0) / lengths.size();
  r.steps = steps;
  r.weight_bytes = backend->weight_read_bytes();
  const int32_t total = warmup + steps;
  std::vector<int32_t> final_lens;
  for (int32_t len : lengths) final_lens.push_back(len + total + 1);
  std::mt19937 rng(seed);
  absl::StatusOr<std::vector<BenchSeq>> seqs =
      MakeSeqs(final_lens, backend->config().vocab_size, backend->page_size(),
               backend->num_kv_pages(), &rng, compact_pages);
  if (!seqs.ok()) {
    r.skipped = std::string(seqs.status().message());
    return r;
  }
  SamplingParams sampling = sampling_in;
  sampling.seed = seed;
  std::vector<double> step_ms, host_us, prep_us, build_us, plan_us, launch_us, post_us, floor_ms,
      fracs;
  std::vector<int64_t> kv_bytes;
  std::vector<BatchRow> rows(lengths.size());
  std::vector<SampleResult> samples;
  // Finishes the step launched `s`-th: its samples become the next step's tokens (already fed on
  // the device when overlapped), and from the warm-up on its time and parts are recorded.
  auto last_finish = Clock::now();
  auto finish = [&](int32_t s, Clock::time_point launched, int64_t kv_tokens,
                    const StepStats& stats) -> absl::Status {
    samples.clear();
    PKV_RETURN_IF_ERROR(backend->Finish(&samples));
    const auto done = Clock::now();
    const double ms = Ms(std::max(launched, last_finish), done);
    last_finish = done;
    for (size_t i = 0; i < lengths.size(); ++i) {
      (*seqs)[i].tokens[lengths[i] + s + 1] = samples[i].token_id;
    }
    if (s < warmup) return absl::OkStatus();
    const int64_t kv = kv_tokens * backend->kv_bytes_per_token();
    const double floor = (r.weight_bytes + kv) / (stream_gbps * 1e9) * 1e3;
    step_ms.push_back(ms);
    const StepTiming& timing = backend->last_timing();
    host_us.push_back(timing.host_us());
    prep_us.push_back(timing.prep_us);
    build_us.push_back(timing.build_us);
    plan_us.push_back(timing.plan_us);
    launch_us.push_back(timing.launch_us);
    post_us.push_back(timing.post_us);
    floor_ms.push_back(floor);
    fracs.push_back(floor / ms);
    kv_bytes.push_back(kv);
    ++r.routes[stats.decode_route];
    r.launches = stats.decode_launches;
    r.occupancy = stats.decode_split_occupancy;
    r.graphs = timing.graph;
    return absl::OkStatus();
  };
  struct Launched {
    int32_t s;
    Clock::time_point at;
    int64_t kv_tokens;
    StepStats stats;
  };
  std::optional<Launched> running;  // overlap: the step launched and not finished
  std::optional<StepTimeline> timeline;
  if (!timeline_path.empty()) {
    PKV_ASSIGN_OR_RETURN(timeline, StepTimeline::Start());
  }
  for (int32_t s = 0; s < total; ++s) {
    // The last step alone in the timeline: the GPU drains first (that step's time includes it).
    if (timeline.has_value() && s == total - 1) PKV_RETURN_IF_ERROR(timeline->Clear());
    int64_t kv_tokens = 0;
    for (size_t i = 0; i < lengths.size(); ++i) {
      BatchRow& row = rows[i];
      const BenchSeq& q = (*seqs)[i];
      row.start_pos = lengths[i] + s;
      row.tokens = q.tokens.data() + row.start_pos;
      row.num_tokens = 1;
      row.pages = q.pages.data();
      row.num_pages = static_cast<int32_t>(q.pages.size());
      row.sample = true;
      row.params = &sampling;
      row.sample_index = s;
      // Overlapped, the token is sample i of the step still running.
      row.feedback = running.has_value() ? static_cast<int32_t>(i) : -1;
      kv_tokens += row.start_pos + 1;
    }
    Launched now{s, Clock::now(), kv_tokens, {}};
    PKV_RETURN_IF_ERROR(backend->Launch(rows, &now.stats));
    if (running.has_value()) {
      PKV_RETURN_IF_ERROR(finish(running->s, running->at, running->kv_tokens, running->stats));
      running.reset();
    }
    if (overlap) {
      running = now;
    } else {
      PKV_RETURN_IF_ERROR(finish(now.s, now.at, now.kv_tokens, now.stats));
    }
  }
  if (running.has_value()) {
    PKV_RETURN_IF_ERROR(finish(running->s, running->at, running->kv_tokens, running->stats));
  }
  if (timeline.has_value()) PKV_RETURN_IF_ERROR(timeline->Write(timeline_path));
  r.step_ms = Percentile(step_ms, 0.5);
  r.tokens_per_s = r.batch / (r.step_ms * 1e-3);
  r.host_us = Percentile(host_us, 0.5);
  r.prep_us = Percentile(prep_us, 0.5);
  r.build_us = Percentile(build_us, 0.5);
  r.plan_us = Percentile(plan_us, 0.5);
  r.launch_us = Percentile(launch_us, 0.5);
  r.post_us = Percentile(post_us, 0.5);
  r.floor_ms = Percentile(floor_ms, 0.5);
  r.floor_frac = Percentile(fracs, 0.5);
  r.kv_bytes = kv_bytes[kv_bytes.size() / 2];
  return r;
}

absl::StatusOr<PrefillResult> RunPrefill(CudaModelBackend* backend, int32_t tokens, int32_t reps,
                                         double gemm_tflops, uint32_t seed) {
  std::mt19937 rng(seed);
  PKV_ASSIGN_OR_RETURN(std::vector<BenchSeq> seqs,
                       MakeSeqs({tokens}, backend->config().vocab_size, backend->page_size(),
                                backend->num_kv_pages(), &rng));
  SamplingParams greedy;
  greedy.temperature = 0.f;
  BatchRow row;
  row.tokens = seqs[0].tokens.data();
  row.num_tokens = tokens;
  row.pages = seqs[0].pages.data();
  row.num_pages = static_cast<int32_t>(seqs[0].pages.size());
  row.sample = true;
  row.params = &greedy;
  std::vector<double> ms;
  for (int32_t i = 0; i < reps + 1; ++i) {  // the first run warms up this GEMM shape
    std::vector<SampleResult> samples;
    const auto t0 = Clock::now();
    PKV_RETURN_IF_ERROR(backend->Step({&row, 1}, &samples, nullptr));
    if (i > 0) ms.push_back(Ms(t0, Clock::now()));
  }
  PrefillResult r;
  r.tokens = tokens;
  r.ttft_ms = Percentile(ms, 0.5);
  r.tflops = PrefillFlops(backend->config(), tokens) / (r.ttft_ms * 1e-3) / 1e12;
  r.gemm_frac = r.tflops / gemm_tflops;
  return r;
}

double MeasureSchedulerUs(int32_t batch, int32_t steps) {
  SchedulerConfig config;
  config.max_running = batch;
  config.max_batch_tokens = std::max(512, batch);
  PagePool pool(1 << 20);
  Scheduler scheduler(config, &pool);
  for (int32_t i = 0; i < batch; ++i) {
    auto seq = std::make_unique<Sequence>();
    seq->id = static_cast<uint64_t>(i + 1);
    seq->tokens.assign(16, 7);
    seq->num_prompt_tokens = 16;
    seq->params.max_tokens = 1 << 20;
    seq->arrival_time = absl::Now();
    if (!scheduler.Add(std::move(seq)).ok()) return -1;
  }
  std::vector<double> us;
  std::vector<BatchRow> rows;
  for (int32_t s = 0; s < steps + 8; ++s) {  // the first steps prefill the prompts
    const auto t0 = Clock::now();
    ScheduledBatch batch_items = scheduler.Schedule(absl::Now(), nullptr);
    rows.clear();
    std::vector<int32_t> sampled;
    for (const ScheduledItem& item : batch_items.items) {  // as the engine builds its rows
      BatchRow row;
      row.tokens = item.seq->tokens.data() + item.start_pos;
      row.num_tokens = item.num_new_tokens;
      row.start_pos = item.start_pos;
      row.pages = item.seq->blocks.pages().data();
      row.num_pages = item.seq->blocks.num_pages();
      row.sample = item.sample;
      row.params = &item.seq->params;
      row.sample_index = item.seq->num_generated();
      rows.push_back(row);
      if (item.sample) sampled.push_back(7);
    }
    scheduler.CommitStep(batch_items, sampled);
    if (s >= 8 && batch_items.num_decode == batch) us.push_back(Ms(t0, Clock::now()) * 1e3);
  }
  return Percentile(us, 0.5);
}

}  // namespace pkv::bench
