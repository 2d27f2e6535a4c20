// The host half of a step (CudaModelBackend::Impl::Prepare / Run / CollectSamples / FillStats):
// build the staging image, upload it and the decode plan, run the forward pass eagerly or by
// replaying the bucket's CUDA graph, and bring the sampled ids back.
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

absl::Status CudaModelBackend::Impl::Prepare(absl::Span<const BatchRow> rows, bool need_params,
                                             bool allow_graph, DeviceStep* s) {
  const auto t0 = Clock::now();
  PKV_RETURN_IF_ERROR(builder->Build(rows, need_params, &host));
  PKV_RETURN_IF_ERROR(Stage(allow_graph, s));
  timing.prep_us = Micros(t0, Clock::now());
  return absl::OkStatus();
}

absl::Status CudaModelBackend::Impl::Stage(bool allow_graph, DeviceStep* s) {
  int32_t bucket = 0;
  if (allow_graph && options.cuda_graphs && host.decode_only) {
    bucket = cuda_backend::GraphBucketFor(host.num_tokens, options.max_rows);
  }
  cuda_backend::StagingLayout layout;
  if (bucket > 0) {
    // The bucket's fixed layout: the captured graph's pointers stay valid for every replay.
    cuda_backend::StepBuilder::PadForGraph(bucket, &host);
    cuda_backend::StagingCaps caps;
    caps.tokens = bucket;
    caps.sampled = bucket;
    caps.page_ids = 1;  // page_ids is the last region: its capacity does not move any offset
    layout = cuda_backend::LayoutStaging(caps);
  } else {
    layout = cuda_backend::LayoutStaging(host.Caps());
  }
  const int64_t used =
      cuda_backend::StepBuilder::FillStaging(host, layout, staging_host.bytes_ptr());
  PKV_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(staging.get(), staging_host.get(), used, cudaMemcpyHostToDevice, stream()));
  PKV_RETURN_IF_ERROR(kv->PrepareDecode(host, bucket, options.max_rows, stream()));
  const uint8_t* base = staging.bytes_ptr();
  s->tokens = host.padded_tokens;
  s->decode_tokens = host.decode_only ? host.padded_tokens : host.num_decode_rows;
  s->logit_rows = bucket > 0 ? bucket : host.num_sampled;
  s->num_tiles = static_cast<int32_t>(host.tiles.size());
  s->header = reinterpret_cast<const int32_t*>(base + layout.header);
  s->token_ids = reinterpret_cast<const int32_t*>(base + layout.token_ids);
  s->positions = reinterpret_cast<const int32_t*>(base + layout.positions);
  s->kv_slots = reinterpret_cast<const int32_t*>(base + layout.kv_slots);
  s->token_page_base = reinterpret_cast<const int32_t*>(base + layout.token_page_base);
  s->sample_token = reinterpret_cast<const int32_t*>(base + layout.sample_token);
  s->sample_params = reinterpret_cast<const gpu::SampleRowParams*>(base + layout.sample_params);
  s->tiles = reinterpret_cast<const prefill::PrefillTile*>(base + layout.prefill_tiles);
  s->page_ids = reinterpret_cast<const int32_t*>(base + layout.page_ids);
  current_bucket = bucket;
  timing.bucket = bucket;
  return absl::OkStatus();
}

cuda_backend::ForwardPass CudaModelBackend::Impl::Forward(const DeviceStep& s) {
  const cuda_backend::ForwardParts parts{config, weights, *gemm, *kv, buffers, fused, tp, stream()};
  cuda_backend::ForwardFlags flags;
  flags.fused = UseFused(s);
  flags.pdl = UsePdl();
  flags.prefetch_steps = options.fused_prefetch_steps;
  return cuda_backend::ForwardPass(parts, flags);
}

bool CudaModelBackend::Impl::UseFused(const DeviceStep& s) const {
  return fused.available() && options.fused_small_batch && s.tokens >= 1 &&
         s.tokens <= options.fused_max_tokens;
}

uint64_t CudaModelBackend::Impl::FusedSignature(const DeviceStep& s) const {
  uint64_t sig = 0;
  if (UseFused(s)) sig ^= 0xC2B2AE3D27D4EB4Full;
  if (UsePdl()) sig ^= 0x165667B19E3779F9ull + static_cast<uint64_t>(options.fused_prefetch_steps);
  if (gemm->tuned()) sig ^= 0x27D4EB2F165667C5ull;
  return sig;
}

absl::Status CudaModelBackend::Impl::Run(const DeviceStep& s, bool sample) {
  const auto t0 = Clock::now();
  const cuda_backend::ForwardPass pass = Forward(s);
  auto enqueue = [&]() -> absl::Status {
    PKV_RETURN_IF_ERROR(pass.EnqueueForward(s));
    if (sample && s.logit_rows > 0) PKV_RETURN_IF_ERROR(pass.EnqueueSample(s));
    return absl::OkStatus();
  };
  if (current_bucket > 0 && sample) {
    // The signature names everything a capture bakes in besides the bucket: the decode launches,
    // which GEMM path the projections took, the fused path and PDL.
    const uint64_t signature =
        kv->LaunchSignature() ^ (gemm->skinny() ? 0x9E3779B97F4A7C15ull : 0) ^ FusedSignature(s);
    PKV_ASSIGN_OR_RETURN(timing.graph, graphs.Run(current_bucket, signature, stream(), enqueue));
  } else {
    PKV_RETURN_IF_ERROR(enqueue());
  }
  timing.launch_us = Micros(t0, Clock::now());
  return absl::OkStatus();
}

absl::Status CudaModelBackend::Impl::CollectSamples(std::vector<SampleResult>* samples) {
  const auto t0 = Clock::now();
  const int32_t n = host.num_sampled;
  if (n > 0) {
    PKV_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(buffers.results_host(), buffers.results(),
                                             int64_t{n} * sizeof(gpu::SampleRowResult),
                                             cudaMemcpyDeviceToHost, stream()));
    if (host.any_logprobs) {
      PKV_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(buffers.top_host(), buffers.top(),
                          int64_t{n} * gpu::kMaxTopLogprobs * sizeof(gpu::TopLogprob),
                          cudaMemcpyDeviceToHost, stream()));
    }
  }
  PKV_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream()));
  const auto t1 = Clock::now();
  timing.wait_us = Micros(t0, t1);
  const auto* res = static_cast<const gpu::SampleRowResult*>(buffers.results_host());
  const auto* tops = static_cast<const gpu::TopLogprob*>(buffers.top_host());
  for (int32_t i = 0; i < n; ++i) {
    if (res[i].status != gpu::kSampleOk) {
      return absl::InvalidArgumentError("sampling: logits are all -inf or NaN");
    }
    SampleResult out;
    out.token_id = res[i].token_id;
    if (host.sample_params[i].logprobs != 0) {
      out.logprob = res[i].logprob;
      const gpu::TopLogprob* row = tops + int64_t{i} * gpu::kMaxTopLogprobs;
      for (int32_t j = 0; j < res[i].num_top && j < host.sample_top_logprobs[i]; ++j) {
        out.top.push_back({row[j].token_id, row[j].logprob});
      }
    }
    samples->push_back(std::move(out));
  }
  timing.post_us = Micros(t1, Clock::now());
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
  kv->FillDecodeStats(host.num_decode_rows, stats);
}

}  // namespace pkv
