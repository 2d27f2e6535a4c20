#include "worker/cuda_backend/decode_attention.h"

#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/cuda_status.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "kernels/policy/features.h"
#include "kernels/policy/on_start_calibration.h"
#include "kernels/policy/policy_loader.h"

namespace pkv::cuda_backend {

namespace {

// The route policy for this GPU: a policy file, or an on-start calibration through the engine on
// this device (policy_loader.h decides; progress lines go to the log).
absl::StatusOr<policy::LoadedPolicy> LoadRoutePolicy(const KvShape& shape, decode::DType dtype,
                                                     const decode::KernelConfig& config,
                                                     const decode::DeviceLimits& limits, int device,
                                                     const DecodePolicyOptions& o) {
  cudaDeviceProp prop;
  PKV_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, device));
  const std::string gpu_name = prop.name;
  const policy::CalibrateFn calibrate = [&]() -> absl::StatusOr<policy::PolicyFile> {
    policy::OnStartCalibrationOptions c;
    c.gpu_name = gpu_name;
    c.shape = shape;
    c.dtype = dtype;
    c.config = config;
    c.limits = limits;
    c.budget_s = o.calibration_budget_s;
    c.progress = [](const std::string& line) { PKV_LOG(INFO) << line; };
    PKV_LOG(INFO) << "decode route policy: no policy file for " << gpu_name << " at "
                  << limits.num_sms << " SMs; calibrating (budget " << c.budget_s << " s)";
    cudaStream_t stream = nullptr;
    PKV_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    absl::StatusOr<policy::PolicyFile> file = policy::CalibrateOnDevice(c, stream);
    cudaStreamDestroy(stream);
    return file;
  };
  return policy::LoadPolicyForGpu({o.policy_file, o.policy_dir, o.kind}, gpu_name, limits, shape,
                                  calibrate);
}

// FP8 pages: this GPU's stored FP8 policy (features in FP8 bytes, fitted on FP8 measurements)
// when there is one; nullopt otherwise, and the caller uses the 16-bit policy on the batch's
// 16-bit-equivalent features. An explicit file or a fixed route is the caller's path too.
absl::StatusOr<std::optional<policy::LoadedPolicy>> StoredFp8Policy(
    const KvShape& shape, const decode::DeviceLimits& limits, int device,
    const DecodePolicyOptions& o) {
  if (!o.policy_file.empty() || absl::StartsWith(o.kind, "fixed:")) return std::nullopt;
  cudaDeviceProp prop;
  PKV_CUDA_RETURN_IF_ERROR(cudaGetDeviceProperties(&prop, device));
  return policy::LoadStoredPolicy({o.policy_file, o.policy_dir, o.kind}, prop.name, limits, shape);
}

}  // namespace

bool DecodeAttention::Supports(const KvShape& shape) { return decode::ValidateShape(shape).ok(); }

absl::StatusOr<std::unique_ptr<DecodeAttention>> DecodeAttention::Create(
    const KvShape& shape, decode::DType dtype, const std::vector<int32_t>& buckets, int device,
    const DecodePolicyOptions& policy_options, KvCacheDtype kv_dtype) {
  PKV_RETURN_IF_ERROR(decode::ValidateShape(shape));
  if (IsFp8(kv_dtype) != (shape.kv_elem_bytes == 1)) {
    return absl::InvalidArgumentError(absl::StrCat("decode attention: kv dtype ",
                                                   KvCacheDtypeName(kv_dtype), " with ",
                                                   shape.kv_elem_bytes, "-byte pages"));
  }
  std::unique_ptr<DecodeAttention> d(new DecodeAttention());
  d->shape_ = shape;
  // FP8 pages: their own stored policy, else the 16-bit one on 16-bit-equivalent features.
  d->policy_shape_ = shape;
  d->policy_shape_.kv_elem_bytes = 2;
  d->dtype_ = dtype;
  d->kv_dtype_ = kv_dtype;
  decode::KernelConfig candidates[2];
  int32_t num_candidates = decode::CandidateKernelConfigs(kv_dtype, shape.head_dim, candidates);
  // 16-bit pages set up their second config (w8s3 for 1-2 row steps) only when asked, so a
  // worker without it runs exactly the one config it always did.
  if (!IsFp8(kv_dtype) && !policy_options.few_row_w8) num_candidates = 1;
  d->few_row_w8_ = policy_options.few_row_w8;
  d->num_configs_ = 0;
  for (int32_t i = 0; i < num_candidates; ++i) {
    absl::StatusOr<decode::DeviceLimits> limits =
        decode::QueryDeviceLimits(device, shape, dtype, candidates[i]);
    if (!limits.ok() && i > 0) {  // an optional config this GPU cannot fit: steps never take it
      PKV_LOG(INFO) << "decode attention: kernel config w" << candidates[i].warps << "s"
                    << candidates[i].stages << " skipped: " << limits.status().message();
      continue;
    }
    PKV_RETURN_IF_ERROR(limits.status());
    d->configs_[d->num_configs_] = candidates[i];
    d->config_limits_[d->num_configs_++] = *limits;
  }
  const decode::KernelConfig& base = d->configs_[0];
  decode::DeviceLimits widest;  // the most resident CTAs: sizes the workspaces
  int largest = 0;              // the most shared memory: sets the kernels' limit, last
  for (int i = 0; i < d->num_configs_; ++i) {
    if (d->config_limits_[i].slots() > widest.slots()) widest = d->config_limits_[i];
    if (decode::AttentionSmemBytes(shape.head_dim, d->configs_[i], shape.kv_elem_bytes) >
        decode::AttentionSmemBytes(shape.head_dim, d->configs_[largest], shape.kv_elem_bytes)) {
      largest = i;
    }
  }
  PKV_ASSIGN_OR_RETURN(d->policy_limits_,
                       decode::QueryDeviceLimits(device, d->policy_shape_, dtype, base));
  PKV_RETURN_IF_ERROR(decode::ConfigureDecodeKernels(d->configs_[largest]));
  std::optional<policy::LoadedPolicy> stored;
  if (IsFp8(kv_dtype)) {
    PKV_ASSIGN_OR_RETURN(stored,
                         StoredFp8Policy(shape, d->config_limits_[0], device, policy_options));
  }
  policy::LoadedPolicy loaded;
  if (stored.has_value()) {
    loaded = *std::move(stored);
  } else {
    PKV_ASSIGN_OR_RETURN(loaded, LoadRoutePolicy(d->policy_shape_, dtype, base, d->policy_limits_,
                                                 device, policy_options));
    // The on-start calibration set the kernels' shared-memory limit to the base config's.
    PKV_RETURN_IF_ERROR(decode::ConfigureDecodeKernels(d->configs_[largest]));
  }
  if (loaded.kv_elem_bytes == shape.kv_elem_bytes) {  // the policy counts this cache's bytes
    d->policy_shape_ = shape;
    d->policy_limits_ = d->config_limits_[0];
  }
  d->policy_ = std::move(loaded.policy);
  PKV_LOG(INFO) << "decode route policy: " << loaded.origin;
  for (int32_t rows : buckets) {
    Bucket b;
    b.rows = rows;
    decode::PlanOptions options;
    options.capacity_rows = rows;
    b.caps = decode::CapacityFor(rows, shape, widest, options);
    const decode::WorkspaceLayout layout = decode::LayoutWorkspace(b.caps, shape, nullptr, nullptr);
    PKV_ASSIGN_OR_RETURN(b.workspace, DeviceBuffer::Allocate(layout.total_bytes));
    for (PinnedBuffer& image : b.images) {
      PKV_ASSIGN_OR_RETURN(image, PinnedBuffer::Allocate(layout.partial_lse));
    }
    // The merge tickets must start at zero; the kernels leave them at zero after every launch.
    PKV_CUDA_RETURN_IF_ERROR(
        cudaMemset(b.workspace.bytes_ptr() + layout.counters, 0, layout.counters_bytes));
    d->buckets_.push_back(std::move(b));
  }
  return d;
}

absl::Status DecodeAttention::Prepare(const int32_t* lengths, const int32_t* page_indptr,
                                      int32_t num_rows, int32_t bucket, cudaStream_t stream,
                                      const int32_t* page_ids) {
  current_ = nullptr;
  for (const Bucket& b : buckets_) {
    if (b.rows == bucket) current_ = &b;
  }
  if (current_ == nullptr || num_rows > bucket) {
    return absl::InternalError(
        absl::StrCat("decode attention: no workspace for ", num_rows, " rows in bucket ", bucket));
  }
  decode::PlanInput in;
  in.lengths = lengths;
  in.page_indptr = page_indptr;
  in.num_rows = num_rows;
  in.shape = shape_;
  in.page_ids = page_ids;
  // The policy's choice for this batch (the one call site; O(B) summary + O(1) choice).
  const decode::Route previous = choice_.route;
  const policy::BatchFeatures features =
      policy::SummarizeBatch(lengths, num_rows, policy_shape_, policy_limits_);
  choice_ = policy_->Choose(features);
  chosen_ = 0;  // also when the chosen config was skipped at Create
  if (IsFp8(kv_dtype_) || few_row_w8_) {
    const decode::KernelConfig c =
        decode::ChooseKernelConfig(kv_dtype_, shape_.head_dim, features.batch, features.len_cv);
    for (int32_t i = 1; i < num_configs_; ++i) {
      if (c.warps == configs_[i].warps && c.stages == configs_[i].stages) chosen_ = i;
    }
  }
  // Route changes are logged (the first 32, then every 1000th): the metric
  // pkv_decode_steps_total{route} counts every step.
  if (steps_++ == 0 || choice_.route != previous) {
    ++route_changes_;
    if (route_changes_ <= 32 || route_changes_ % 1000 == 0) {
      PKV_LOG(INFO) << "decode route " << decode::RouteName(choice_.route) << " from step "
                    << steps_ << " (" << policy_->kind() << " policy, " << num_rows
                    << " rows, predicted " << choice_.predicted_us << " us per layer; change "
                    << route_changes_ << ")";
    }
  }
  decode::PlanOptions options;
  choice_.ApplyTo(&options);
  options.workqueue_balanced = workqueue_balanced_;
  options.capacity_rows = bucket;
  if (num_rows <= kSmallStepMaxRows) options.min_split_kv_elems = kSmallStepMinSplitKvElems;
  PKV_RETURN_IF_ERROR(decode::PlanDecode(in, config_limits_[chosen_], options, &plan_));
  PKV_RETURN_IF_ERROR(decode::CheckFits(plan_, current_->caps));
  uint8_t* image = current_->images[next_image_].bytes_ptr();
  next_image_ ^= 1;
  layout_ = decode::LayoutWorkspace(current_->caps, shape_, &plan_, image);
  // Only the plan's own bytes travel; the header carries the counts the graph-sized kernels read.
  return decode::UploadPlan(image, layout_, /*graph_sized=*/false, current_->workspace.get(),
                            stream);
}

absl::Status DecodeAttention::Launch(const void* q, const void* k_cache, const void* v_cache,
                                     const int32_t* page_ids, void* out, float scale,
                                     const Fp8KvScales& kv_scales, cudaStream_t stream,
                                     bool pdl) const {
  if (current_ == nullptr) return absl::InternalError("decode attention: no prepared plan");
  decode::DecodeTensors t;
  t.dtype = dtype_;
  t.kv_dtype = kv_dtype_;
  if (IsFp8(kv_dtype_)) t.kv_scales = kv_scales;
  t.q = q;
  t.k_cache = k_cache;
  t.v_cache = v_cache;
  t.page_ids = page_ids;
  t.out = out;
  t.lse = nullptr;
  return decode::LaunchDecode(plan_, layout_, t, current_->workspace.get(), configs_[chosen_],
                              scale, stream, pdl);
}

uint64_t DecodeAttention::LaunchSignature() const {
  // FNV-1a over what the captured launches bake in: route, merge mode and each launch's kind,
  // first item, grid and persistence (counts come from the workspace header).
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](int64_t v) {
    h ^= static_cast<uint64_t>(v);
    h *= 1099511628211ull;
  };
  mix(static_cast<int64_t>(plan_.route));
  mix(static_cast<int64_t>(plan_.merge));
  mix(plan_.graph_sized ? 1 : 0);
  mix(configs_[chosen_].warps);  // block size and shared memory
  mix(configs_[chosen_].stages);
  for (const decode::LaunchSpec& l : plan_.launches) {
    mix(static_cast<int64_t>(l.kind));
    mix(l.first);
    mix(l.grid);
    mix(l.persistent ? 1 : 0);
  }
  return h;
}

int64_t DecodeAttention::workspace_bytes() const {
  int64_t total = 0;
  for (const Bucket& b : buckets_) {
    total += b.workspace.bytes() + b.images[0].bytes() + b.images[1].bytes();
  }
  return total;
}

}  // namespace pkv::cuda_backend
