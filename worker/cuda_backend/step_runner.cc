// The host half of a step (CudaModelBackend::Impl's Step / Forward and their parts): build and
// stage the batch (StepStaging) and the decode plan (KvAttention), run the forward pass eagerly or
// by replaying the bucket's CUDA graph (GraphCache), and bring the sampled ids back.
#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/cuda_status.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "worker/cuda_backend/backend_impl.h"

namespace pkv {
namespace {

using Clock = std::chrono::steady_clock;

double Micros(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

}  // namespace

absl::Status CudaModelBackend::Impl::Step(absl::Span<const BatchRow> rows,
                                          std::vector<SampleResult>* samples, StepStats* stats) {
  if (!launched_.empty()) {
    return absl::FailedPreconditionError("Step with a launched step unfinished");
  }
  if (rows.empty()) {
    timing_ = StepTiming{};
    if (stats != nullptr) *stats = StepStats{};
    return absl::OkStatus();
  }
  PKV_RETURN_IF_ERROR(Launch(rows, stats));
  return Finish(samples);
}

absl::Status CudaModelBackend::Impl::Launch(absl::Span<const BatchRow> rows, StepStats* stats) {
  if (launched_.size() >= ModelBackend::kMaxLaunched) {
    return absl::FailedPreconditionError(
        absl::StrCat("Launch with ", launched_.size(), " launched steps unfinished"));
  }
  PKV_RETURN_IF_ERROR(ValidateFeedbackRows(rows, latest_sampled_));
  PKV_CUDA_RETURN_IF_ERROR(cudaSetDevice(device()));
  timing_ = StepTiming{};
  SampledStep step;
  if (rows.empty()) {
    PKV_RETURN_IF_ERROR(EnqueueResults(nullptr, &step));
    if (stats != nullptr) *stats = StepStats{};
  } else {
    DeviceStep s;
    PKV_RETURN_IF_ERROR(Prepare(rows, /*need_params=*/true, /*allow_graph=*/true, &s));
    PKV_RETURN_IF_ERROR(Run(s, /*sample=*/true));
    PKV_RETURN_IF_ERROR(EnqueueResults(&staging_.host(), &step));
    if (stats != nullptr) FillStats(rows, stats);
  }
  latest_sampled_ = step.num_sampled;
  step.timing = timing_;
  launched_.push_back(std::move(step));
  return absl::OkStatus();
}

absl::Status CudaModelBackend::Impl::Finish(std::vector<SampleResult>* samples) {
  if (launched_.empty()) return absl::FailedPreconditionError("Finish with no step launched");
  SampledStep step = std::move(launched_.front());
  launched_.pop_front();
  PKV_CUDA_RETURN_IF_ERROR(cudaSetDevice(device()));
  return AwaitResults(&step, samples);
}

absl::Status CudaModelBackend::Impl::Forward(absl::Span<const BatchRow> rows,
                                             std::vector<float>* logits) {
  if (!launched_.empty()) {
    return absl::FailedPreconditionError("Forward with a launched step unfinished");
  }
  timing_ = StepTiming{};
  logits->clear();
  if (rows.empty()) return absl::OkStatus();
  PKV_CUDA_RETURN_IF_ERROR(cudaSetDevice(device()));
  DeviceStep s;
  PKV_RETURN_IF_ERROR(Prepare(rows, /*need_params=*/false, /*allow_graph=*/false, &s));
  PKV_RETURN_IF_ERROR(Run(s, /*sample=*/false));
  const int64_t n = int64_t{s.logit_rows} * config_.vocab_size;
  logits->resize(n);
  if (n > 0) {
    PKV_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(logits->data(), buffers_.logits(), n * 4,
                                             cudaMemcpyDeviceToHost, stream()));
  }
  PKV_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream()));
  return absl::OkStatus();
}

absl::Status CudaModelBackend::Impl::Prepare(absl::Span<const BatchRow> rows, bool need_params,
                                             bool allow_graph, DeviceStep* s) {
  const auto t0 = Clock::now();
  PKV_RETURN_IF_ERROR(staging_.Build(rows, need_params));
  timing_.build_us = Micros(t0, Clock::now());
  PKV_RETURN_IF_ERROR(Stage(allow_graph, s));
  timing_.prep_us = Micros(t0, Clock::now());
  return absl::OkStatus();
}

absl::Status CudaModelBackend::Impl::PrepareBuilt(const cuda_backend::StepHost& host,
                                                  bool allow_graph, DeviceStep* s) {
  const auto t0 = Clock::now();
  timing_ = StepTiming{};
  staging_.SetHost(host);
  PKV_RETURN_IF_ERROR(Stage(allow_graph, s));
  timing_.prep_us = Micros(t0, Clock::now());
  return absl::OkStatus();
}

absl::Status CudaModelBackend::Impl::Stage(bool allow_graph, DeviceStep* s) {
  const cuda_backend::StepHost& host = staging_.host();
  int32_t bucket = 0;
  if (allow_graph && options_.cuda_graphs && host.decode_only) {
    bucket = cuda_backend::GraphBucketFor(host.num_tokens, options_.max_rows);
  }
  PKV_RETURN_IF_ERROR(staging_.Upload(bucket, stream(), s));
  const auto t0 = Clock::now();
  PKV_RETURN_IF_ERROR(kv_->PrepareDecode(host, bucket, options_.max_rows, stream()));
  timing_.plan_us = Micros(t0, Clock::now());
  current_bucket_ = bucket;
  timing_.bucket = bucket;
  return absl::OkStatus();
}

cuda_backend::ForwardPass CudaModelBackend::Impl::Pass(const DeviceStep& s) {
  const cuda_backend::ForwardParts parts{config_, weights_, *gemm_, *kv_,    buffers_,
                                         fused_,  packed_,  tp_,    stream()};
  cuda_backend::ForwardFlags flags;
  flags.fused = UseFused(s);
  flags.pdl = UsePdl();
  flags.pdl_attention = UsePdlAttention(s);
  flags.prefetch_steps = options_.fused_prefetch_steps;
  flags.prenorm = UsePrenorm(s);
  flags.gemv_bulk = GemvBulk(s);
  flags.skip_attention = skip_attention_;
  return cuda_backend::ForwardPass(parts, flags);
}

bool CudaModelBackend::Impl::UsePdlAttention(const DeviceStep& s) const {
  return UsePdl() && s.tokens <= cuda_backend::kPdlAttentionMaxTokens;
}

bool CudaModelBackend::Impl::UsePrenorm(const DeviceStep& s) const {
  const int32_t min_tokens = PrenormMinTokens();
  return UseFused(s) && min_tokens > 0 && s.tokens >= min_tokens;
}

uint32_t CudaModelBackend::Impl::GemvBulk(const DeviceStep& s) const {
  return UseFused(s) && s.tokens == 1 ? BulkProjections() : 0u;
}

// Bulk copies are sm_90 instructions: where PDL is usable, sm_90 code is loaded.
uint32_t CudaModelBackend::Impl::BulkProjections() const {
  if (!fused_.available() || !fused_.pdl_usable()) return 0;
  return options_.fused_gemv_bulk == kFusedBulkAuto ? kBulkAll : options_.fused_gemv_bulk;
}

bool CudaModelBackend::Impl::UseFused(const DeviceStep& s) const {
  return fused_.available() && options_.fused_small_batch && !options_.deterministic &&
         s.tokens >= 1 && s.tokens <= fused_token_limit_;
}

uint64_t CudaModelBackend::Impl::FusedSignature(const DeviceStep& s) const {
  uint64_t sig = 0;
  if (UseFused(s)) sig ^= 0xC2B2AE3D27D4EB4Full;
  if (UsePdl()) sig ^= 0x165667B19E3779F9ull + static_cast<uint64_t>(options_.fused_prefetch_steps);
  if (UsePdlAttention(s)) sig ^= 0x9E3779B97F4A7C15ull;
  if (UsePrenorm(s)) sig ^= 0xA0761D6478BD642Full;
  sig ^= 0x8EBC6AF09C88C6E3ull * GemvBulk(s);
  if (skip_attention_) sig ^= 0xE7037ED1A0B428DBull;
  if (gemm_->tuned()) sig ^= 0x27D4EB2F165667C5ull;
  // Deterministic mode: fixed-row GEMMs and the prefill kernel over one tile per row, or (split
  // tiles) max_splits tiles a row in windows with a merge each.
  if (options_.deterministic) sig ^= 0x85EBCA77C2B2AE63ull;
  if (options_.deterministic && kv_->uniform_split()) sig ^= 0xD6E8FEB86659FD93ull;
  if (options_.deterministic && gemm_->pinned()) sig ^= 0x94D049BB133111EBull;
  return sig;
}

absl::Status CudaModelBackend::Impl::Run(const DeviceStep& s, bool sample) {
  const auto t0 = Clock::now();
  const cuda_backend::ForwardPass pass = Pass(s);
  auto enqueue = [&]() -> absl::Status {
    PKV_RETURN_IF_ERROR(pass.EnqueueForward(s));
    if (sample && s.logit_rows > 0) PKV_RETURN_IF_ERROR(pass.EnqueueSample(s));
    return absl::OkStatus();
  };
  if (current_bucket_ > 0 && sample) {
    // The signature names everything a capture bakes in besides the bucket: the decode launches,
    // which GEMM path the projections took, the fused path and PDL.
    const uint64_t signature =
        kv_->LaunchSignature() ^ (gemm_->skinny() ? 0x9E3779B97F4A7C15ull : 0) ^ FusedSignature(s);
    PKV_ASSIGN_OR_RETURN(timing_.graph, graphs_.Run(current_bucket_, signature, stream(), enqueue));
  } else {
    PKV_RETURN_IF_ERROR(enqueue());
  }
  timing_.launch_us = Micros(t0, Clock::now());
  return absl::OkStatus();
}

absl::Status CudaModelBackend::Impl::CollectSamples(std::vector<SampleResult>* samples) {
  SampledStep step;
  step.timing = timing_;
  PKV_RETURN_IF_ERROR(EnqueueResults(&staging_.host(), &step));
  return AwaitResults(&step, samples);
}

absl::Status CudaModelBackend::Impl::EnqueueResults(const cuda_backend::StepHost* host,
                                                    SampledStep* step) {
  // The slot's previous copy was unpacked: at most kHostSlots steps are launched and unfinished.
  step->slot = next_slot_;
  next_slot_ = (next_slot_ + 1) % cuda_backend::StepBuffers::kHostSlots;
  step->num_sampled = host != nullptr ? host->num_sampled : 0;
  step->top_logprobs.clear();
  const int32_t n = step->num_sampled;
  for (int32_t i = 0; i < n; ++i) {
    step->top_logprobs.push_back(host->sample_params[i].logprobs != 0 ? host->sample_top_logprobs[i]
                                                                      : -1);
  }
  if (n > 0) {
    PKV_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(buffers_.results_host(step->slot), buffers_.results(),
                                             int64_t{n} * sizeof(gpu::SampleRowResult),
                                             cudaMemcpyDeviceToHost, stream()));
    if (host->any_logprobs) {
      PKV_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(buffers_.top_host(step->slot), buffers_.top(),
                          int64_t{n} * gpu::kMaxTopLogprobs * sizeof(gpu::TopLogprob),
                          cudaMemcpyDeviceToHost, stream()));
    }
  }
  return results_ready_[step->slot].Record(stream());
}

absl::Status CudaModelBackend::Impl::AwaitResults(SampledStep* step,
                                                  std::vector<SampleResult>* samples) {
  const auto t0 = Clock::now();
  PKV_RETURN_IF_ERROR(results_ready_[step->slot].Wait());
  const auto t1 = Clock::now();
  step->timing.wait_us = Micros(t0, t1);
  const gpu::SampleRowResult* res = buffers_.results_host(step->slot);
  const gpu::TopLogprob* tops = buffers_.top_host(step->slot);
  for (int32_t i = 0; i < step->num_sampled; ++i) {
    if (res[i].status != gpu::kSampleOk) {
      return absl::InvalidArgumentError("sampling: logits are all -inf or NaN");
    }
    SampleResult out;
    out.token_id = res[i].token_id;
    if (step->top_logprobs[i] >= 0) {
      out.logprob = res[i].logprob;
      const gpu::TopLogprob* row = tops + int64_t{i} * gpu::kMaxTopLogprobs;
      for (int32_t j = 0; j < res[i].num_top && j < step->top_logprobs[i]; ++j) {
        out.top.push_back({row[j].token_id, row[j].logprob});
      }
    }
    samples->push_back(std::move(out));
  }
  step->timing.post_us = Micros(t1, Clock::now());
  timing_ = step->timing;
  return absl::OkStatus();
}

void CudaModelBackend::Impl::FillStats(absl::Span<const BatchRow> rows, StepStats* stats) const {
  *stats = StepStats{};
  for (const BatchRow& row : rows) {  // the CPU backend's definitions
    if (row.num_tokens == 1 && row.start_pos > 0) {
      ++stats->num_decode_rows;
    } else {
      stats->num_prefill_tokens += row.num_tokens;
    }
  }
  kv_->FillDecodeStats(staging_.host(), stats);
}

}  // namespace pkv
