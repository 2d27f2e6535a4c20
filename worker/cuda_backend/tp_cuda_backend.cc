// TpCudaBackend's steps (the loading is in tp_cuda_load.cc): build the batch once, fan it out to
// the rank threads, join, and answer from rank 0.
#include "worker/cuda_backend/tp_cuda_backend.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "kernels/model/model_kernels.h"
#include "worker/cuda_backend/tp_cuda_ranks.h"

namespace pkv {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

TpCudaBackend::Ranks::Ranks(std::vector<int> devices_in)
    : devices(std::move(devices_in)),
      threads(std::make_unique<RankThreads>(static_cast<int>(devices.size()))),
      impls(devices.size()),
      comms(devices.size(), nullptr),
      hooks(devices.size()) {}

TpCudaBackend::Ranks::~Ranks() {
  threads.reset();
  // Every step ended synchronised, so nothing is in flight. The ranks' backends go first: NCCL
  // waits in ncclCommDestroy for every CUDA graph that captured its collectives to be destroyed.
  for (int r = 0; r < tp(); ++r) {
    if (impls[r] == nullptr) continue;
    cudaSetDevice(devices[r]);
    cudaStreamSynchronize(impls[r]->stream());
    hooks[r].reset();
    impls[r].reset();
  }
#if PKV_HAVE_NCCL
  NcclCommunicator::FinalizeGroup(nccl);  // one thread holds every rank: finalize them together
  nccl.clear();
#endif
  shared.reset();
}

void TpCudaBackend::Ranks::Abort(const std::string& reason) {
  {
    absl::MutexLock lock(&mu_);
    if (aborted_.load()) return;
    abort_reason_ = reason;
    aborted_.store(true);
  }
  for (DeviceCommunicator* c : comms) {
    if (c != nullptr) c->Abort();
  }
}

absl::Status TpCudaBackend::Ranks::CheckAlive() {
  if (!aborted_.load()) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  return absl::FailedPreconditionError(
      absl::StrCat("the tensor-parallel group was aborted after an error: ", abort_reason_));
}

std::vector<int> ConsecutiveDevices(int first, int tp) {
  std::vector<int> out;
  for (int r = 0; r < tp; ++r) out.push_back(first + r);
  return out;
}

TpCudaBackend::TpCudaBackend(const ModelConfig& config, const TpCudaOptions& options)
    : config_(config),
      options_(options),
      devices_(options.devices),
      ranks_(std::make_unique<Ranks>(options.devices)) {}

TpCudaBackend::~TpCudaBackend() = default;

int32_t TpCudaBackend::page_size() const { return options_.backend.page_size; }

std::string TpCudaBackend::dtype_name() const {
  return ranks_->impls[0]->weights().dtype == decode::DType::kBFloat16 ? "bfloat16" : "float16";
}

KvCacheDtype TpCudaBackend::kv_cache_dtype() const {
  return ranks_->impls[0]->kv().kv_cache_dtype();
}

std::string TpCudaBackend::transport() const { return ranks_->comms[0]->transport(); }

bool TpCudaBackend::cuda_graphs() const { return ranks_->graphs && !ranks_->timing; }

void TpCudaBackend::SetCudaGraphs(bool enabled) {
  Ranks& ranks = *ranks_;
  ranks.graphs = enabled && ranks.comms[0]->capturable();
  for (auto& m : ranks.impls) m->SetCudaGraphs(cuda_graphs());
}

void TpCudaBackend::SetTimeCollectives(bool enabled) {
  Ranks& ranks = *ranks_;
  ranks.timing = enabled;
  for (auto& h : ranks.hooks) h->set_time_collectives(enabled);
  for (auto& m : ranks.impls) m->SetCudaGraphs(cuda_graphs());
}

int32_t TpCudaBackend::last_num_collectives() const { return ranks_->hooks[0]->num_collectives(); }

int64_t TpCudaBackend::rank_weight_bytes() const { return ranks_->impls[0]->weights().arena_bytes; }

int64_t TpCudaBackend::rank_weight_read_bytes() const {
  return ranks_->impls[0]->weights().step_read_bytes;
}

int64_t TpCudaBackend::rank_kv_bytes() const { return ranks_->impls[0]->kv().pool_bytes(); }

absl::Status TpCudaBackend::FillKvCacheRandom(uint64_t seed) {
  Ranks& ranks = *ranks_;
  for (int r = 0; r < tp(); ++r) {
    PKV_CUDA_RETURN_IF_ERROR(cudaSetDevice(devices_[r]));
    PKV_RETURN_IF_ERROR(ranks.impls[r]->FillKvCacheRandom(seed + r));
  }
  return absl::OkStatus();
}

absl::Status TpCudaBackend::RunRanks(bool sample, std::vector<SampleResult>* samples,
                                     std::vector<float>* logits) {
  Ranks& ranks = *ranks_;
  return ranks.threads->Run([&](int r) -> absl::Status {
    CudaModelBackend::Impl& m = *ranks.impls[r];
    cuda_backend::TpRankHooks& hooks = *ranks.hooks[r];
    int32_t logit_rows = 0;
    absl::Status enqueued = [&]() -> absl::Status {
      PKV_CUDA_RETURN_IF_ERROR(cudaSetDevice(ranks.devices[r]));
      DeviceStep s;
      PKV_RETURN_IF_ERROR(m.PrepareBuilt(ranks.host, /*allow_graph=*/sample, &s));
      hooks.BeginStep();
      PKV_RETURN_IF_ERROR(m.Run(s, sample));
      logit_rows = s.logit_rows;
      return absl::OkStatus();
    }();
    if (!enqueued.ok()) {
      // The other ranks may be waiting in (or will enter) a collective this rank never joins.
      ranks.Abort(absl::StrCat("rank ", r, ": ", enqueued.message()));
      return enqueued;
    }
    if (r == 0 && samples != nullptr) return m.CollectSamples(samples);  // synchronises
    if (r == 0 && logits != nullptr && logit_rows > 0) {
      PKV_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(logits->data(), hooks.sample_logits(),
                                               int64_t{logit_rows} * config_.vocab_size * 4,
                                               cudaMemcpyDeviceToHost, m.stream()));
    }
    PKV_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(m.stream()));
    return absl::OkStatus();
  });
}

absl::Status TpCudaBackend::Step(absl::Span<const BatchRow> rows,
                                 std::vector<SampleResult>* samples, StepStats* stats) {
  timing_ = StepTiming{};
  last_collective_us_ = 0;
  if (rows.empty()) {
    if (stats != nullptr) *stats = StepStats{};
    return absl::OkStatus();
  }
  Ranks& ranks = *ranks_;
  PKV_RETURN_IF_ERROR(ranks.CheckAlive());
  const auto t0 = Clock::now();
  PKV_RETURN_IF_ERROR(ranks.builder->Build(rows, /*need_params=*/true, &ranks.host));
  const double build_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  PKV_RETURN_IF_ERROR(RunRanks(/*sample=*/true, samples, nullptr));
  timing_ = ranks.impls[0]->timing();
  timing_.prep_us += build_us;
  if (ranks.timing) {
    PKV_ASSIGN_OR_RETURN(last_collective_us_, ranks.hooks[0]->collective_us());
  }
  if (stats != nullptr) ranks.impls[0]->FillStats(rows, stats);
  return absl::OkStatus();
}

absl::Status TpCudaBackend::Forward(absl::Span<const BatchRow> rows, std::vector<float>* logits) {
  timing_ = StepTiming{};
  logits->clear();
  if (rows.empty()) return absl::OkStatus();
  Ranks& ranks = *ranks_;
  PKV_RETURN_IF_ERROR(ranks.CheckAlive());
  PKV_RETURN_IF_ERROR(ranks.builder->Build(rows, /*need_params=*/false, &ranks.host));
  logits->resize(static_cast<size_t>(ranks.host.num_sampled) * config_.vocab_size);
  return RunRanks(/*sample=*/false, nullptr, logits);
}

absl::StatusOr<std::unique_ptr<ModelBackend>> LoadTpCudaBackend(const std::string& model_dir,
                                                                const TpCudaOptions& options) {
  PKV_ASSIGN_OR_RETURN(std::unique_ptr<TpCudaBackend> b, TpCudaBackend::Load(model_dir, options));
  return std::unique_ptr<ModelBackend>(std::move(b));
}

}  // namespace pkv
