// pkv-tp-bench cpu: the tensor-parallel CPU backend's decode step for each --tp.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

#include "bench/tp/tp_bench.h"
#include "common/status_macros.h"
#include "worker/model/tp_cpu_backend.h"
#include "worker/model/tp_shard.h"
#include "worker/tools/model_shapes.h"

namespace pkv::tp_bench {
namespace {

constexpr int32_t kPageSize = 16;

// Random weights of `config`: matrices N(0, 0.02^2), norms 1 + N(0, 0.02^2), embeddings N(0, 1).
LlamaWeights RandomLlama(const ModelConfig& config, uint64_t seed) {
  LlamaWeights w;
  w.config = config;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (LlamaTensorSlot& slot : LlamaTensorSlots(&w)) {
    slot.dst->resize(slot.spec.numel());
    const bool norm = slot.spec.kind == TensorSpec::Kind::kNorm;
    const float scale = slot.spec.kind == TensorSpec::Kind::kEmbedding ? 1.0f : 0.02f;
    for (float& v : *slot.dst) v = (norm ? 1.0f : 0.0f) + scale * normal(rng);
  }
  return w;
}

absl::StatusOr<std::unique_ptr<TpCpuBackend>> MakeBackend(const CpuBenchOptions& o,
                                                          const ModelConfig& config,
                                                          const LlamaWeights* full, int tp,
                                                          int64_t pages) {
  if (!o.model_dir.empty()) {
    return TpCpuBackend::Load(o.model_dir, tp, kPageSize, pages);
  }
  std::vector<LlamaWeights> shards;
  for (int r = 0; r < tp; ++r) {
    PKV_ASSIGN_OR_RETURN(LlamaWeights s, ShardLlamaWeights(*full, tp, r));
    shards.push_back(std::move(s));
  }
  return TpCpuBackend::Create(config, std::move(shards), kPageSize, pages);
}

struct RowState {
  std::vector<int32_t> tokens;
  std::vector<int32_t> pages;
};

// Prefills every row, then times `warmup + steps` decode steps; prints one TSV row.
absl::Status BenchOne(TpCpuBackend* b, const CpuBenchOptions& o, int tp) {
  const int32_t pages_per_row = (o.context + o.warmup + o.steps + kPageSize) / kPageSize + 1;
  std::mt19937 rng(static_cast<uint32_t>(o.seed));
  std::vector<RowState> rows(o.batch);
  for (int32_t i = 0; i < o.batch; ++i) {
    for (int32_t t = 0; t < o.context; ++t) {
      rows[i].tokens.push_back(static_cast<int32_t>(rng() % b->config().vocab_size));
    }
    for (int32_t p = 0; p < pages_per_row; ++p) rows[i].pages.push_back(i * pages_per_row + p);
  }
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  std::vector<double> step_s, comm_s;
  for (int step = -1; step < o.warmup + o.steps; ++step) {  // step -1: the prefill
    std::vector<BatchRow> batch;
    for (RowState& r : rows) {
      BatchRow row;
      row.start_pos = step < 0 ? 0 : static_cast<int32_t>(r.tokens.size()) - 1;
      row.num_tokens = static_cast<int32_t>(r.tokens.size()) - row.start_pos;
      row.tokens = r.tokens.data() + row.start_pos;
      row.pages = r.pages.data();
      row.num_pages = static_cast<int32_t>(r.pages.size());
      row.sample = true;
      row.params = &greedy;
      row.sample_index = std::max(0, row.start_pos + row.num_tokens - o.context);
      batch.push_back(row);
    }
    std::vector<SampleResult> samples;
    StepStats stats;
    const auto t0 = std::chrono::steady_clock::now();
    PKV_RETURN_IF_ERROR(b->Step(batch, &samples, &stats));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (size_t i = 0; i < rows.size(); ++i) rows[i].tokens.push_back(samples[i].token_id);
    if (step >= o.warmup) {
      step_s.push_back(s);
      comm_s.push_back(b->last_comm_seconds());
    }
  }
  std::sort(step_s.begin(), step_s.end());
  std::sort(comm_s.begin(), comm_s.end());
  const double step = step_s[step_s.size() / 2], comm = comm_s[comm_s.size() / 2];
  std::printf("%d\t%d\t%d\t%d\t%.3f\t%.1f\t%.3f\t%d\t%.1f\t%.1f\n", tp, o.batch, o.context, o.steps,
              step * 1e3, o.batch / step, comm * 1e3, b->last_num_collectives(),
              b->rank_weight_bytes() / 1048576.0, b->rank_kv_bytes() / 1048576.0);
  std::fflush(stdout);
  return absl::OkStatus();
}

}  // namespace

int RunCpuBench(const CpuBenchOptions& o) {
  absl::StatusOr<ModelConfig> config =
      o.model_dir.empty() ? ModelShapeConfig(o.shape) : LoadModelConfig(o.model_dir);
  if (!config.ok()) {
    std::fprintf(stderr, "pkv-tp-bench: %s\n", std::string(config.status().message()).c_str());
    return 2;
  }
  if (o.layers > 0) config->num_layers = o.layers;
  if (!o.model_dir.empty() && o.layers > 0) {
    std::fprintf(stderr, "pkv-tp-bench: --layers applies to random models only\n");
    return 2;
  }
  LlamaWeights full;
  if (o.model_dir.empty()) full = RandomLlama(*config, o.seed);
  const int64_t pages =
      int64_t{o.batch} * ((o.context + o.warmup + o.steps + kPageSize) / kPageSize + 1);
  std::printf(
      "tp\tbatch\tcontext\tsteps\tstep_ms\tdecode_tok_s\tcomm_ms\tcollectives\t"
      "rank_weight_mib\trank_kv_mib\n");
  for (int tp : o.tps) {
    absl::StatusOr<std::unique_ptr<TpCpuBackend>> b = MakeBackend(o, *config, &full, tp, pages);
    absl::Status st = b.ok() ? BenchOne(b->get(), o, tp) : b.status();
    if (!st.ok()) {
      std::fprintf(stderr, "pkv-tp-bench: tp %d: %s\n", tp, std::string(st.message()).c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace pkv::tp_bench
