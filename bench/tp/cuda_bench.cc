// pkv-tp-bench cuda: decode tokens/s of the CUDA backend for each --tp (TP = 1: the one-GPU
// CudaModelBackend, the baseline; TP > 1: TpCudaBackend over NCCL on the first tp of --gpus, or
// with --share_gpu every rank on the first GPU), and the GPU time inside the collectives of a step.
//
// Per (tp, batch): random weights of --shape generated on the GPUs, the KV cache filled with
// random values, `batch` rows of `context` tokens decoding one token a step; the median wall time
// of Step() over --steps steps after --warmup (CUDA graphs as the backend runs them: on with NCCL,
// off on a shared GPU), then --timed_steps eager steps with every collective bracketed by CUDA
// events (rank 0's stream; waiting for the slowest rank included): the all-reduce + all-gather
// time per step, and the eager step time it belongs to.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bench/tp/tp_bench.h"
#include "common/status_macros.h"
#include "worker/cuda_backend/cuda_backend.h"
#include "worker/cuda_backend/tp_cuda_backend.h"
#include "worker/tools/model_shapes.h"

namespace pkv::tp_bench {
namespace {

constexpr int32_t kPageSize = 16;
using Clock = std::chrono::steady_clock;

// The one-GPU backend (tp 1) or the tensor-parallel one behind one face.
struct Bench {
  std::unique_ptr<CudaModelBackend> one;
  std::unique_ptr<TpCudaBackend> tp;
  ModelBackend* backend() const { return one ? static_cast<ModelBackend*>(one.get()) : tp.get(); }
};

absl::StatusOr<Bench> Make(const CudaBenchOptions& o, const ModelConfig& config, int tp,
                           int32_t max_batch) {
  CudaBackendOptions b;
  b.page_size = kPageSize;
  b.dtype = o.dtype;
  b.max_rows = max_batch;
  b.fused_small_batch = o.fused;
  b.policy_dir = o.policy_dir;
  b.kv_memory_fraction = o.kv_memory_fraction;
  Bench out;
  if (tp == 1) {
    b.device = o.gpus[0];
    PKV_ASSIGN_OR_RETURN(out.one, CudaModelBackend::LoadRandom(config, o.seed, b));
    PKV_RETURN_IF_ERROR(out.one->FillKvCacheRandom(o.seed + 1));
    return out;
  }
  if (!o.share_gpu && tp > static_cast<int>(o.gpus.size())) {
    return absl::InvalidArgumentError(absl::StrCat("--tp ", tp, " needs ", tp,
                                                   " GPUs, --gpus lists ", o.gpus.size(),
                                                   " (or pass --share_gpu)"));
  }
  TpCudaOptions t;
  t.backend = b;
  t.devices = o.share_gpu ? std::vector<int>(tp, o.gpus[0])
                          : std::vector<int>(o.gpus.begin(), o.gpus.begin() + tp);
  PKV_ASSIGN_OR_RETURN(out.tp, TpCudaBackend::LoadRandom(config, o.seed, t));
  PKV_RETURN_IF_ERROR(out.tp->FillKvCacheRandom(o.seed + 1));
  return out;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Rows {
  std::vector<std::vector<int32_t>> tokens;  // [batch][context + steps + 1]
  std::vector<std::vector<int32_t>> pages;   // [batch][pages_per_row], disjoint
};

// Runs `n` decode steps from position `*pos` on; returns each step's wall seconds.
absl::StatusOr<std::vector<double>> Decode(ModelBackend* b, const Rows& r, int32_t n, int32_t* pos,
                                           std::vector<double>* comm_us, TpCudaBackend* tp) {
  SamplingParams greedy;
  greedy.temperature = 0.f;
  std::vector<BatchRow> rows(r.tokens.size());
  std::vector<SampleResult> samples;
  std::vector<double> seconds;
  for (int32_t s = 0; s < n; ++s, ++*pos) {
    for (size_t i = 0; i < rows.size(); ++i) {
      rows[i].start_pos = *pos;
      rows[i].tokens = r.tokens[i].data() + *pos;
      rows[i].num_tokens = 1;
      rows[i].pages = r.pages[i].data();
      rows[i].num_pages = static_cast<int32_t>(r.pages[i].size());
      rows[i].sample = true;
      rows[i].params = &greedy;
      rows[i].sample_index = s;
    }
    samples.clear();
    const auto t0 = Clock::now();
    PKV_RETURN_IF_ERROR(b->Step(rows, &samples, nullptr));
    seconds.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    if (tp != nullptr && comm_us != nullptr) comm_us->push_back(tp->last_collective_us());
  }
  return seconds;
}

absl::Status BenchBatch(const CudaBenchOptions& o, const Bench& bench, int tp, int32_t batch) {
  ModelBackend* b = bench.backend();
  const int32_t total = o.context + o.warmup + o.steps + o.timed_steps + 1;
  const int32_t pages_per_row = (total + kPageSize - 1) / kPageSize;
  if (int64_t{batch} * pages_per_row > b->num_kv_pages()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("batch ", batch, " needs ", int64_t{batch} * pages_per_row,
                     " KV pages, the pool has ", b->num_kv_pages()));
  }
  std::mt19937 rng(static_cast<uint32_t>(o.seed + batch));
  Rows r;
  for (int32_t i = 0; i < batch; ++i) {
    std::vector<int32_t> t(total);
    for (int32_t& v : t) v = static_cast<int32_t>(rng() % (b->config().vocab_size - 2));
    r.tokens.push_back(std::move(t));
    std::vector<int32_t> p(pages_per_row);
    for (int32_t j = 0; j < pages_per_row; ++j) p[j] = i * pages_per_row + j;
    r.pages.push_back(std::move(p));
  }
  int32_t pos = o.context;  // positions [0, context) hold the random KV
  PKV_RETURN_IF_ERROR(Decode(b, r, o.warmup, &pos, nullptr, nullptr).status());
  PKV_ASSIGN_OR_RETURN(std::vector<double> timed, Decode(b, r, o.steps, &pos, nullptr, nullptr));
  // Eager steps with timed collectives (TP), or eager steps alone (TP = 1: no collectives).
  std::vector<double> comm_us;
  if (bench.tp) {
    bench.tp->SetTimeCollectives(true);
  } else {
    bench.one->SetCudaGraphs(false);
  }
  absl::StatusOr<std::vector<double>> eager =
      Decode(b, r, o.timed_steps, &pos, &comm_us, bench.tp.get());
  if (bench.tp) {
    bench.tp->SetTimeCollectives(false);
  } else {
    bench.one->SetCudaGraphs(true);
  }
  PKV_RETURN_IF_ERROR(eager.status());
  const double step_ms = Median(timed) * 1e3;
  const std::string gpus =
      bench.tp ? absl::StrJoin(bench.tp->devices(), ",") : std::to_string(o.gpus[0]);
  const std::string transport = bench.tp ? bench.tp->transport() : "none (one GPU)";
  const bool graphs = bench.tp ? bench.tp->cuda_graphs() : true;
  const int64_t weight_bytes =
      bench.tp ? bench.tp->rank_weight_read_bytes() : bench.one->weight_read_bytes();
  std::printf("%d\t%d\t%d\t%s\t%s\t%d\t%.3f\t%.1f\t%.3f\t%.1f\t%d\t%.1f\t%lld\n", tp, batch,
              o.context, gpus.c_str(), transport.c_str(), graphs ? 1 : 0, step_ms,
              batch / (step_ms * 1e-3), Median(*eager) * 1e3, Median(comm_us),
              bench.tp ? bench.tp->last_num_collectives() : 0, weight_bytes / 1048576.0,
              static_cast<long long>(b->num_kv_pages()));
  std::fflush(stdout);
  return absl::OkStatus();
}

}  // namespace

int RunCudaBench(const CudaBenchOptions& o) {
  absl::StatusOr<ModelConfig> config = ModelShapeConfig(o.shape);
  if (!config.ok() || o.gpus.empty() || o.batches.empty()) {
    std::fprintf(stderr, "pkv-tp-bench: %s\n",
                 config.ok() ? "--gpus and --batch must not be empty"
                             : std::string(config.status().message()).c_str());
    return 2;
  }
  if (o.layers > 0) config->num_layers = o.layers;
  const int32_t max_batch = *std::max_element(o.batches.begin(), o.batches.end());
  std::printf(
      "tp\tbatch\tcontext\tgpus\ttransport\tgraphs\tstep_ms\tdecode_tok_s\teager_step_ms\t"
      "collectives_us_per_step\tcollectives\tweight_read_mib_per_rank\tkv_pages\n");
  for (int tp : o.tps) {
    std::fprintf(stderr, "pkv-tp-bench cuda: loading %s (%d layers) at tp %d\n", o.shape.c_str(),
                 config->num_layers, tp);
    absl::StatusOr<Bench> bench = Make(o, *config, tp, max_batch);
    absl::Status st = bench.status();
    for (int32_t batch : o.batches) {
      if (!st.ok()) break;
      st = BenchBatch(o, *bench, tp, batch);
    }
    if (!st.ok()) {
      std::fprintf(stderr, "pkv-tp-bench: tp %d: %s\n", tp, std::string(st.message()).c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace pkv::tp_bench
