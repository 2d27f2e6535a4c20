#include "worker/model/cpu_kv_cache.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "kernels/attention/reference.h"

namespace pkv {

absl::Status CheckCpuKvCacheOptions(const CpuKvCacheOptions& options, int32_t num_layers) {
  if (!options.scales.empty() && static_cast<int32_t>(options.scales.size()) != num_layers) {
    return absl::InvalidArgumentError(absl::StrCat("KV cache scales for ", options.scales.size(),
                                                   " layers, the model has ", num_layers));
  }
  for (const Fp8KvScales& s : options.scales) {
    if (!(s.k > 0 && s.v > 0 && std::isfinite(s.k) && std::isfinite(s.v))) {
      return absl::InvalidArgumentError(
          absl::StrCat("KV cache scales must be positive and finite, got k=", s.k, " v=", s.v));
    }
  }
  return absl::OkStatus();
}

std::string CpuKvCacheDescription(const CpuKvCacheOptions& options) {
  if (!IsFp8(options.dtype)) return "float32";
  return absl::StrCat(KvCacheDtypeName(options.dtype),
                      options.scales.empty() ? " (scales 1.0)" : " (per-layer scales)");
}

int64_t CpuKvBytesPerPage(int32_t num_layers, int32_t num_kv_heads, int32_t head_dim,
                          int32_t page_size, KvCacheDtype dtype) {
  const int64_t elem_bytes = IsFp8(dtype) ? 1 : static_cast<int64_t>(sizeof(float));
  return 2 * int64_t{num_layers} * num_kv_heads * page_size * head_dim * elem_bytes;
}

CpuKvCache::CpuKvCache(int32_t num_layers, const KvShape& shape, int64_t num_pages,
                       const CpuKvCacheOptions& options)
    : shape_(shape), num_pages_(num_pages), dtype_(options.dtype) {
  PKV_CHECK(num_layers > 0 && num_pages > 0 && shape.num_kv_heads > 0 && shape.head_dim > 0 &&
            shape.page_size > 0);
  PKV_CHECK(CheckCpuKvCacheOptions(options, num_layers).ok());
  scales_ = options.scales.empty() ? std::vector<Fp8KvScales>(num_layers) : options.scales;
  const size_t layer_elems = static_cast<size_t>(num_pages) * shape.page_elems();
  if (IsFp8(dtype_)) {
    // Code 0 is +0.0 in both formats, so a never-written slot reads as zero, like the float pool.
    k_fp8_.assign(num_layers, std::vector<uint8_t>(layer_elems, 0));
    v_fp8_.assign(num_layers, std::vector<uint8_t>(layer_elems, 0));
  } else {
    k_f32_.assign(num_layers, std::vector<float>(layer_elems, 0.0f));
    v_f32_.assign(num_layers, std::vector<float>(layer_elems, 0.0f));
  }
}

int64_t CpuKvCache::bytes() const {
  return static_cast<int64_t>(scales_.size()) *
         CpuKvBytesPerPage(1, shape_.num_kv_heads, shape_.head_dim, shape_.page_size, dtype_) *
         num_pages_;
}

void CpuKvCache::Write(int layer, const float* k, const float* v, int64_t num_tokens,
                       const int32_t* positions, const int32_t* token_page) {
  const int64_t d = shape_.head_dim;
  PagedKvView<float> layout;  // only for Offset()
  layout.shape = shape_;
  for (int64_t t = 0; t < num_tokens; ++t) {
    const int32_t slot = positions[t] % shape_.page_size;
    for (int32_t h = 0; h < shape_.num_kv_heads; ++h) {
      const int64_t off = layout.Offset(token_page[t], h, slot);
      const int64_t src = (t * shape_.num_kv_heads + h) * d;
      if (IsFp8(dtype_)) {
        const Fp8Format f = Fp8FormatOf(dtype_);
        QuantizeFp8(k + src, d, scales_[layer].k, f, k_fp8_[layer].data() + off);
        QuantizeFp8(v + src, d, scales_[layer].v, f, v_fp8_[layer].data() + off);
      } else {
        std::copy_n(k + src, d, k_f32_[layer].data() + off);
        std::copy_n(v + src, d, v_f32_[layer].data() + off);
      }
    }
  }
}

void CpuKvCache::Attend(int layer, const float* q, const int32_t* qo_indptr,
                        const BlockTableView& table, float softmax_scale, float* out) const {
  if (!IsFp8(dtype_)) {
    PagedKvView<const float> kv;
    kv.k = k_f32_[layer].data();
    kv.v = v_f32_[layer].data();
    kv.num_pages = num_pages_;
    kv.shape = shape_;
    kv.shape.kv_elem_bytes = sizeof(float);
    ReferencePrefillAttention<float>(q, qo_indptr, kv, table, softmax_scale, out);
    return;
  }
  Fp8PagedKvView kv;
  kv.codes.k = k_fp8_[layer].data();
  kv.codes.v = v_fp8_[layer].data();
  kv.codes.num_pages = num_pages_;
  kv.codes.shape = shape_;
  kv.codes.shape.kv_elem_bytes = 1;
  kv.format = Fp8FormatOf(dtype_);
  kv.scales = scales_[layer];
  ReferencePrefillAttentionFp8<float>(q, qo_indptr, kv, table, softmax_scale, out);
}

}  // namespace pkv
