#include "worker/cuda_backend/kv_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "kernels/model/model_kernels.h"
#include "kernels/policy/route_timer.h"
#include "kernels/prefill/prefill_launch.h"
#include "worker/model/rope.h"

namespace pkv::cuda_backend {
namespace {

constexpr int64_t kElem = 2;  // bytes of one fp16 / bf16 element (q, out; 16-bit pages)

}  // namespace

absl::StatusOr<std::unique_ptr<KvAttention>> KvAttention::Create(
    const ModelConfig& c, const KvAttentionOptions& options, decode::DType dtype,
    const std::vector<int32_t>& buckets, int device) {
  std::unique_ptr<KvAttention> kv(new KvAttention());
  kv->shape_ = KvShape{c.num_q_heads, c.num_kv_heads, c.head_dim, options.page_size};
  kv->num_layers_ = c.num_layers;
  kv->dtype_ = dtype;
  kv->kv_dtype_ = options.kv_cache_dtype;
  kv->shape_.kv_elem_bytes = IsFp8(kv->kv_dtype_) ? 1 : 2;
  kv->kv_scales_ = options.kv_scales;
  if (kv->kv_scales_.empty()) kv->kv_scales_.assign(c.num_layers, Fp8KvScales{});
  if (static_cast<int32_t>(kv->kv_scales_.size()) != c.num_layers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kv attention: ", kv->kv_scales_.size(), " FP8 scale pairs for ", c.num_layers, " layers"));
  }
  for (const Fp8KvScales& sc : kv->kv_scales_) {
    if (!(sc.k > 0.f && sc.v > 0.f && std::isfinite(sc.k) && std::isfinite(sc.v))) {
      return absl::InvalidArgumentError(absl::StrCat("kv attention: FP8 scales k=", sc.k,
                                                     " v=", sc.v, " must be positive and finite"));
    }
  }
  if (options.tensor_cores && DecodeAttention::Supports(kv->shape_)) {
    PKV_ASSIGN_OR_RETURN(kv->decode_, DecodeAttention::Create(kv->shape_, dtype, buckets, device,
                                                              options.policy, kv->kv_dtype_));
  }
  kv->prefill_tensor_cores_ = options.tensor_cores && prefill::PrefillHeadDimSupported(c.head_dim);
  if (kv->prefill_tensor_cores_) PKV_RETURN_IF_ERROR(prefill::ConfigurePrefillKernels());
  // The deterministic mode's slots now, before the pool takes the free memory (SetUniform
  // allocates them on first use otherwise).
  if (options.split_partials) PKV_RETURN_IF_ERROR(kv->AllocateSplitPartials());
  kv->softmax_scale_ = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim)));
  const std::vector<double> inv_freq = RopeInvFrequencies(c);
  PKV_ASSIGN_OR_RETURN(kv->inv_freq_, DeviceBuffer::Allocate(inv_freq.size() * sizeof(double)));
  PKV_CUDA_RETURN_IF_ERROR(cudaMemcpy(kv->inv_freq_.get(), inv_freq.data(),
                                      inv_freq.size() * sizeof(double), cudaMemcpyHostToDevice));
  return kv;
}

int64_t KvAttention::bytes_per_page() const {
  return 2 * int64_t{num_layers_} * shape_.page_elems() * shape_.kv_elem_bytes;  // K and V
}

absl::StatusOr<int64_t> KvPoolPages(int64_t num_pages, double memory_fraction, int64_t free_bytes,
                                    std::optional<int64_t> limit_left, int64_t page_bytes) {
  const auto gib = [](int64_t b) { return absl::StrFormat("%.2f GiB", b / 1073741824.0); };
  if (num_pages > 0) {
    if (limit_left.has_value() && num_pages * page_bytes > *limit_left) {
      return absl::ResourceExhaustedError(
          absl::StrCat(num_pages, " KV pages need ", gib(num_pages * page_bytes),
                       ", the GPU memory limit leaves ", gib(*limit_left),
                       " after the weights and buffers; ask for fewer pages or a higher limit"));
    }
    return num_pages;
  }
  const int64_t room = limit_left.has_value() ? std::min(free_bytes, *limit_left) : free_bytes;
  const int64_t pages =
      static_cast<int64_t>(static_cast<double>(std::max<int64_t>(room, 0)) * memory_fraction) /
      page_bytes;
  if (pages < 1) {
    return absl::ResourceExhaustedError(
        limit_left.has_value() && *limit_left < free_bytes
            ? absl::StrCat("the GPU memory limit leaves ", gib(*limit_left),
                           " after the weights and buffers, less than one KV page (",
                           gib(page_bytes), "); raise the limit or use a smaller model")
            : absl::StrCat("no GPU memory left for a single KV page (", gib(free_bytes),
                           " free, a page takes ", gib(page_bytes), ")"));
  }
  return pages;
}

absl::Status KvAttention::AllocatePool(int64_t num_pages, double memory_fraction,
                                       std::optional<int64_t> limit_left, cudaStream_t stream) {
  const int64_t page_bytes = shape_.page_elems() * shape_.kv_elem_bytes;  // one layer's K
  size_t free_bytes = 0, total_bytes = 0;
  PKV_CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
  PKV_ASSIGN_OR_RETURN(int64_t pages,
                       KvPoolPages(num_pages, memory_fraction, static_cast<int64_t>(free_bytes),
                                   limit_left, bytes_per_page()));
  // Slots (page * page_size + offset) are int32 on the device.
  pages = std::min<int64_t>(pages, std::numeric_limits<int32_t>::max() / shape_.page_size);
  num_pages_ = pages;
  const int64_t layer_bytes = pages * page_bytes;
  PKV_ASSIGN_OR_RETURN(pool_, DeviceBuffer::Allocate(2 * num_layers_ * layer_bytes));
  // Zeroed so tokens past a row's length inside its last page never hold NaN bit patterns.
  PKV_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(pool_.get(), 0, pool_.bytes(), stream));
  for (int l = 0; l < num_layers_; ++l) {
    k_cache_.push_back(pool_.bytes_ptr() + (2 * l) * layer_bytes);
    v_cache_.push_back(pool_.bytes_ptr() + (2 * l + 1) * layer_bytes);
  }
  return absl::OkStatus();
}

absl::Status KvAttention::FillRandom(uint64_t seed, cudaStream_t stream) {
  if (IsFp8(kv_dtype_)) {  // random finite codes (no NaN bit patterns)
    return policy::FillRandomFp8(pool_.get(), pool_.bytes(), static_cast<uint32_t>(seed), stream);
  }
  return gpu::LaunchFillRandom(pool_.get(), pool_.bytes() / 2, false, dtype_, seed, 0.f, 1.f,
                               stream);
}

absl::Status KvAttention::PrepareDecode(const StepHost& host, int32_t bucket, int32_t max_rows,
                                        cudaStream_t stream) {
  if (decode_ == nullptr || uniform_ || host.num_decode_rows <= 0) return absl::OkStatus();
  const int32_t decode_bucket =
      bucket > 0 ? bucket : GraphBucketFor(host.num_decode_rows, max_rows);
  return decode_->Prepare(host.decode_lengths.data(), host.decode_page_indptr.data(),
                          host.num_decode_rows, decode_bucket, stream, host.page_ids.data());
}

absl::Status KvAttention::EnqueueGeneric(int layer, const DeviceStep& s, int32_t first,
                                         int32_t count, const void* q, void* out,
                                         cudaStream_t stream) const {
  if (count <= 0) return absl::OkStatus();
  const int64_t row = int64_t{shape_.num_q_heads} * shape_.head_dim * kElem;
  gpu::GenericAttentionArgs a;
  a.dtype = dtype_;
  a.q = static_cast<const uint8_t*>(q) + first * row;
  a.k_cache = k_cache_[layer];
  a.v_cache = v_cache_[layer];
  a.kv_dtype = kv_dtype_;
  a.kv_scales = kv_scales_[layer];
  a.page_ids = s.page_ids;
  a.positions = s.positions + first;
  a.page_base = s.token_page_base + first;
  a.num_tokens = count;
  a.num_q_heads = shape_.num_q_heads;
  a.num_kv_heads = shape_.num_kv_heads;
  a.head_dim = shape_.head_dim;
  a.page_size = shape_.page_size;
  a.scale = softmax_scale_;
  a.out = static_cast<uint8_t*>(out) + first * row;
  return gpu::LaunchGenericAttention(a, stream);
}

absl::Status KvAttention::EnqueueAttention(int layer, const DeviceStep& s, const void* q, void* out,
                                           cudaStream_t stream, bool pdl) const {
  if (uniform_) {  // one kernel for every row: the step's tiles cover every token
    if (!prefill_tensor_cores_) return EnqueueGeneric(layer, s, 0, s.tokens, q, out, stream);
    return EnqueuePrefill(layer, s, q, out, stream);
  }
  if (decode_ != nullptr && s.decode_tokens > 0) {
    PKV_RETURN_IF_ERROR(decode_->Launch(q, k_cache_[layer], v_cache_[layer], s.page_ids, out,
                                        softmax_scale_, kv_scales_[layer], stream, pdl));
  } else {
    PKV_RETURN_IF_ERROR(EnqueueGeneric(layer, s, 0, s.decode_tokens, q, out, stream));
  }
  const int32_t prefill_tokens = s.tokens - s.decode_tokens;
  if (prefill_tokens <= 0) return absl::OkStatus();
  if (!prefill_tensor_cores_) {
    return EnqueueGeneric(layer, s, s.decode_tokens, prefill_tokens, q, out, stream);
  }
  return EnqueuePrefill(layer, s, q, out, stream);
}

absl::Status KvAttention::AllocateSplitPartials() {
  if (!prefill_tensor_cores_ || split_partials_.get() != nullptr) return absl::OkStatus();
  PKV_ASSIGN_OR_RETURN(split_partials_, DeviceBuffer::Allocate(prefill::PrefillSplitPartialBytes(
                                            prefill::kPrefillSplitWindowTokens, shape_.num_q_heads,
                                            shape_.head_dim, split_rule())));
  return absl::OkStatus();
}

absl::Status KvAttention::SetUniform(bool enabled, bool split_tiles) {
  uniform_ = enabled;
  split_ = enabled && split_tiles && prefill_tensor_cores_;
  if (split_) PKV_RETURN_IF_ERROR(AllocateSplitPartials());
  return absl::OkStatus();
}

absl::Status KvAttention::EnqueuePrefill(int layer, const DeviceStep& s, const void* q, void* out,
                                         cudaStream_t stream) const {
  if (s.num_tiles <= 0) return absl::OkStatus();
  prefill::PrefillArgs a;
  a.dtype = dtype_;
  a.kv_dtype = kv_dtype_;
  a.kv_scales = kv_scales_[layer];
  a.q = q;
  a.k_cache = k_cache_[layer];
  a.v_cache = v_cache_[layer];
  a.page_ids = s.page_ids;
  a.tiles = s.tiles;
  a.num_tiles = s.num_tiles;
  a.num_q_heads = shape_.num_q_heads;
  a.num_kv_heads = shape_.num_kv_heads;
  a.head_dim = shape_.head_dim;
  a.page_size = shape_.page_size;
  a.scale = softmax_scale_;
  a.out = out;
  if (s.num_split_windows == 0) return prefill::LaunchPrefillAttention(a, stream);
  // Split tiles, window by window through one window's partial slots (stream order keeps a
  // window's merge before the next window's tiles overwrite the slots).
  a.split_partials = split_partials_.get();
  a.split_rule = split_rule();
  a.positions = s.positions;
  for (int32_t w = 0; w < s.num_split_windows; ++w) {
    const prefill::PrefillSplitWindow& win = s.split_windows[w];
    a.tiles = s.tiles + win.tile_begin;
    a.num_tiles = win.num_tiles;
    a.split_token_begin = win.token_begin;
    a.num_tokens = win.num_tokens;
    PKV_RETURN_IF_ERROR(prefill::LaunchPrefillAttention(a, stream));
  }
  return absl::OkStatus();
}

void KvAttention::FillDecodeStats(const StepHost& host, StepStats* stats) const {
  const int32_t num_decode_rows = host.num_decode_rows;
  if (uniform_ && num_decode_rows > 0) {  // the decode rows ran as one-query tiles
    stats->decode_route = !prefill_tensor_cores_ ? "generic"
                          : split_               ? "uniform-split"
                                                 : "uniform-prefill";
    // Split tiles: a window's tiles, then its merge (EnqueuePrefill).
    stats->decode_launches = split_ ? 2 * static_cast<int32_t>(host.split_windows.size()) : 1;
    stats->decode_split_occupancy = 1.0;
  } else if (decode_ != nullptr && num_decode_rows > 0) {
    const decode::DecodePlan& plan = decode_->plan();
    stats->decode_route = std::string(decode::RouteName(plan.route));
    stats->decode_launches = plan.counters.launches;
    stats->decode_split_occupancy = plan.counters.occupancy();
  } else {
    stats->decode_route = "generic";
    stats->decode_launches = num_decode_rows > 0 ? 1 : 0;
    stats->decode_split_occupancy = 1.0;
  }
}

}  // namespace pkv::cuda_backend
