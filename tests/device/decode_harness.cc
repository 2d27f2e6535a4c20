#include "tests/device/decode_harness.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "kernels/attention/fp8_kv.h"
#include "kernels/attention/reference.h"
#include "kernels/common/float16.h"
#include "kernels/decode/workspace.h"

namespace pkv::decode::testing {
namespace {

uint16_t ToBits(DType t, float x) {
  return t == DType::kFloat16 ? ToHalf(x).bits : ToBFloat16(x).bits;
}
float FromBits(DType t, uint16_t b) {
  return t == DType::kFloat16 ? ToFloat(Half{b}) : ToFloat(BFloat16{b});
}

template <typename T>
void CopyTo(void** dst, const std::vector<T>& src) {
  PKV_CHECK(cudaMalloc(dst, std::max<size_t>(src.size() * sizeof(T), 16)) == cudaSuccess);
  PKV_CHECK(cudaMemcpy(*dst, src.data(), src.size() * sizeof(T), cudaMemcpyHostToDevice) ==
            cudaSuccess);
}

}  // namespace

std::string Case::Name() const {
  return absl::StrCat(RouteName(route), merge == MergeMode::kSeparate ? "/2k" : "", " ",
                      DTypeName(dtype), " kv=", KvCacheDtypeName(kv_dtype),
                      " Hq=", shape.num_q_heads, " Hkv=", shape.num_kv_heads, " D=", shape.head_dim,
                      " ps=", shape.page_size, " B=", lengths.size(), " warps=", config.warps,
                      " stages=", config.stages, page_prefix ? "" : " no-page-prefix");
}

absl::StatusOr<DeviceLimits> LimitsFor(const Case& c) {
  if (c.limits.num_sms > 0) return c.limits;
  KvShape s = c.shape;
  s.kv_elem_bytes = IsFp8(c.kv_dtype) ? 1 : 2;
  return QueryDeviceLimits(0, s, c.dtype, c.config);
}

DecodeProblem::DecodeProblem(const Case& c, std::mt19937& rng)
    : shape_(c.shape), dtype_(c.dtype), kv_dtype_(c.kv_dtype), lengths_(c.lengths) {
  shape_.kv_elem_bytes = IsFp8(kv_dtype_) ? 1 : 2;
  const int32_t rows = static_cast<int32_t>(lengths_.size());
  const int32_t ps = shape_.page_size;
  page_indptr_.push_back(0);
  for (int32_t len : lengths_) {
    // Room to grow by a few tokens for the graph-replay test.
    page_indptr_.push_back(page_indptr_.back() + (len + 8 + ps - 1) / ps);
  }
  const int32_t used = page_indptr_.back();
  num_pages_ = used + used / 3 + 3;
  std::vector<int32_t> pool(num_pages_);
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  page_ids_.assign(pool.begin(), pool.begin() + used);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  out_elems_ = int64_t{rows} * shape_.num_q_heads * shape_.head_dim;
  q_.resize(std::max<int64_t>(out_elems_, 1));
  for (auto& x : q_) x = ToBits(dtype_, u(rng) * c.q_scale);
  const int64_t kv_elems = num_pages_ * shape_.page_elems();
  k_.resize(kv_elems);
  v_.resize(kv_elems);
  for (auto& x : k_) x = ToBits(dtype_, u(rng));
  for (auto& x : v_) x = ToBits(dtype_, u(rng));
  CopyTo(&d_q_, q_);
  if (IsFp8(kv_dtype_)) {
    // Scales that map the |x| < 1 inputs onto the format's range; the codes quantize exactly the
    // 16-bit values the unquantized reference reads.
    const Fp8Format f = Fp8FormatOf(kv_dtype_);
    scales_ = {Fp8ScaleForAbsMax(1.f, f), Fp8ScaleForAbsMax(1.f, f)};
    std::vector<float> x(kv_elems);
    kq_.resize(kv_elems);
    vq_.resize(kv_elems);
    for (int64_t i = 0; i < kv_elems; ++i) x[i] = FromBits(dtype_, k_[i]);
    QuantizeFp8(x.data(), kv_elems, scales_.k, f, kq_.data());
    for (int64_t i = 0; i < kv_elems; ++i) x[i] = FromBits(dtype_, v_[i]);
    QuantizeFp8(x.data(), kv_elems, scales_.v, f, vq_.data());
    CopyTo(&d_k_, kq_);
    CopyTo(&d_v_, vq_);
  } else {
    CopyTo(&d_k_, k_);
    CopyTo(&d_v_, v_);
  }
  CopyTo(reinterpret_cast<void**>(&d_pages_), page_ids_);
  PKV_CHECK(cudaMalloc(&d_out_, std::max<int64_t>(out_elems_ * 2, 16)) == cudaSuccess);
  PKV_CHECK(cudaMalloc(reinterpret_cast<void**>(&d_lse_),
                       std::max<int64_t>(num_heads_total() * 4, 16)) == cudaSuccess);
}

DecodeProblem::~DecodeProblem() {
  for (void* p :
       {d_q_, d_k_, d_v_, static_cast<void*>(d_pages_), d_out_, static_cast<void*>(d_lse_)}) {
    cudaFree(p);
  }
}

void DecodeProblem::SetLengths(const std::vector<int32_t>& lengths) {
  PKV_CHECK(lengths.size() == lengths_.size());
  for (size_t r = 0; r < lengths.size(); ++r) {
    PKV_CHECK(lengths[r] <= (page_indptr_[r + 1] - page_indptr_[r]) * shape_.page_size);
  }
  lengths_ = lengths;
  ref_valid_ = unq_valid_ = false;
}

DecodeTensors DecodeProblem::tensors() const {
  DecodeTensors t;
  t.dtype = dtype_;
  t.kv_dtype = kv_dtype_;
  t.kv_scales = scales_;
  t.q = d_q_;
  t.k_cache = d_k_;
  t.v_cache = d_v_;
  t.page_ids = d_pages_;
  t.out = d_out_;
  t.lse = d_lse_;
  return t;
}

void DecodeProblem::PoisonOutputs(cudaStream_t stream) const {
  // 0xFFFF is NaN in fp16 and bf16, 0xFFFFFFFF NaN in fp32: an unwritten element fails.
  cudaMemsetAsync(d_out_, 0xFF, std::max<int64_t>(out_elems_ * 2, 16), stream);
  cudaMemsetAsync(d_lse_, 0xFF, std::max<int64_t>(num_heads_total() * 4, 16), stream);
}

absl::Status DecodeProblem::Download(cudaStream_t stream, std::vector<uint16_t>* out,
                                     std::vector<float>* lse) const {
  out->resize(out_elems_);
  lse->resize(num_heads_total());
  PKV_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(out->data(), d_out_, out_elems_ * 2, cudaMemcpyDeviceToHost, stream));
  PKV_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(lse->data(), d_lse_, num_heads_total() * 4, cudaMemcpyDeviceToHost, stream));
  PKV_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return absl::OkStatus();
}

absl::Status DecodeProblem::Run(const Case& c, cudaStream_t stream, std::vector<uint16_t>* out,
                                std::vector<float>* lse, DecodePlan* plan_out) {
  PKV_ASSIGN_OR_RETURN(DeviceLimits limits, LimitsFor(c));
  PlanOptions opt;
  opt.route = c.route;
  opt.merge = c.merge;
  opt.min_split_tokens = c.min_split_tokens;
  DecodePlan plan;
  PlanInput in{lengths_.data(), page_indptr_.data(), static_cast<int32_t>(lengths_.size()), shape_};
  if (c.page_prefix) in.page_ids = page_ids_.data();
  PKV_RETURN_IF_ERROR(PlanDecode(in, limits, opt, &plan));
  Workspace ws(in.num_rows, shape_, limits, opt);
  PKV_RETURN_IF_ERROR(ws.Fill(plan));
  PoisonOutputs(stream);
  PKV_RETURN_IF_ERROR(UploadPlan(ws.image(),
                                 LayoutWorkspace(ws.capacity(), shape_, &plan, ws.image()), false,
                                 ws.device(), stream));
  const float scale = 1.f / std::sqrt(static_cast<float>(shape_.head_dim));
  PKV_RETURN_IF_ERROR(
      LaunchDecode(plan, ws.layout(), tensors(), ws.device(), c.config, scale, stream));
  PKV_RETURN_IF_ERROR(Download(stream, out, lse));
  if (!ws.CountersAreZero()) return absl::InternalError("merge tickets were not reset to zero");
  if (plan_out != nullptr) *plan_out = plan;
  return absl::OkStatus();
}

void DecodeProblem::ComputeReference(bool unquantized, std::vector<float>* out,
                                     std::vector<float>* lse) {
  const int32_t rows = static_cast<int32_t>(lengths_.size());
  out->assign(out_elems_, 0.f);
  lse->assign(num_heads_total(), 0.f);
  BlockTableView table{page_indptr_.data(), page_ids_.data(), lengths_.data(), rows};
  const float scale = 1.f / std::sqrt(static_cast<float>(shape_.head_dim));
  KvShape s16 = shape_;
  s16.kv_elem_bytes = 2;
  if (IsFp8(kv_dtype_) && !unquantized) {
    const Fp8PagedKvView kv{
        {kq_.data(), vq_.data(), num_pages_, shape_}, Fp8FormatOf(kv_dtype_), scales_};
    if (dtype_ == DType::kFloat16) {
      ReferenceDecodeAttentionFp8(reinterpret_cast<const Half*>(q_.data()), kv, table, scale,
                                  out->data(), lse->data());
    } else {
      ReferenceDecodeAttentionFp8(reinterpret_cast<const BFloat16*>(q_.data()), kv, table, scale,
                                  out->data(), lse->data());
    }
  } else if (dtype_ == DType::kFloat16) {
    PagedKvView<const Half> kv{reinterpret_cast<const Half*>(k_.data()),
                               reinterpret_cast<const Half*>(v_.data()), num_pages_, s16};
    ReferenceDecodeAttention(reinterpret_cast<const Half*>(q_.data()), kv, table, scale,
                             out->data(), lse->data());
  } else {
    PagedKvView<const BFloat16> kv{reinterpret_cast<const BFloat16*>(k_.data()),
                                   reinterpret_cast<const BFloat16*>(v_.data()), num_pages_, s16};
    ReferenceDecodeAttention(reinterpret_cast<const BFloat16*>(q_.data()), kv, table, scale,
                             out->data(), lse->data());
  }
}

CompareResult DecodeProblem::Compare(const std::vector<uint16_t>& out,
                                     const std::vector<float>& lse) {
  if (!ref_valid_) ComputeReference(false, &ref_out_, &ref_lse_);
  ref_valid_ = true;
  // fp16: output rounding 2^-11 and P rounded to fp16; bf16: 2^-8 for both.
  const double atol = dtype_ == DType::kFloat16 ? 2e-3 : 1e-2;
  const double rtol = dtype_ == DType::kFloat16 ? 1e-2 : 2e-2;
  return CompareWith(out, lse, ref_out_, ref_lse_, atol, rtol, 1e-3);
}

CompareResult DecodeProblem::CompareUnquantized(const std::vector<uint16_t>& out,
                                                const std::vector<float>& lse, double atol,
                                                double lse_atol) {
  if (!unq_valid_) ComputeReference(true, &unq_out_, &unq_lse_);
  unq_valid_ = true;
  return CompareWith(out, lse, unq_out_, unq_lse_, atol, 0.0, lse_atol);
}

CompareResult DecodeProblem::CompareWith(const std::vector<uint16_t>& out,
                                         const std::vector<float>& lse,
                                         const std::vector<float>& ref_out,
                                         const std::vector<float>& ref_lse, double atol,
                                         double rtol, double lse_atol) const {
  CompareResult r;
  for (int64_t i = 0; i < out_elems_; ++i) {
    const double got = FromBits(dtype_, out[i]), want = ref_out[i];
    const double err = std::fabs(got - want);
    ++r.checked;
    if (!(err <= atol + rtol * std::fabs(want))) {  // NaN fails too
      if (r.bad++ == 0) {
        r.first_bad = absl::StrCat("out[", i, "] (row ", i / (out_elems_ / lengths_.size()),
                                   ") = ", got, " want ", want);
      }
    }
    if (err > r.max_err) r.max_err = err;
  }
  for (int64_t i = 0; i < num_heads_total(); ++i) {
    const double got = lse[i], want = ref_lse[i];
    const bool both_empty = std::isinf(want) && want < 0 && std::isinf(got) && got < 0;
    if (!both_empty && !(std::fabs(got - want) <= lse_atol + 1e-3 * std::fabs(want))) {
      if (r.bad_lse++ == 0 && r.first_bad.empty()) {
        r.first_bad = absl::StrCat("lse[", i, "] = ", got, " want ", want);
      }
    }
  }
  return r;
}

Workspace::Workspace(int32_t max_rows, const KvShape& shape, const DeviceLimits& limits,
                     const PlanOptions& options)
    : shape_(shape) {
  capacity_ = CapacityFor(std::max(max_rows, 1), shape, limits, options);
  layout_ = LayoutWorkspace(capacity_, shape, nullptr, nullptr);
  PKV_CHECK(cudaMalloc(&device_, layout_.total_bytes) == cudaSuccess);
  PKV_CHECK(cudaMemset(device_, 0xFF, layout_.total_bytes) == cudaSuccess);
  PKV_CHECK(cudaMemset(static_cast<uint8_t*>(device_) + layout_.counters, 0,
                       layout_.counters_bytes) == cudaSuccess);
  PKV_CHECK(cudaMallocHost(reinterpret_cast<void**>(&image_), layout_.partial_lse) == cudaSuccess);
  std::memset(image_, 0, layout_.partial_lse);
}

Workspace::~Workspace() {
  cudaFree(device_);
  cudaFreeHost(image_);
}

absl::Status Workspace::Fill(const DecodePlan& plan) {
  PKV_RETURN_IF_ERROR(CheckFits(plan, capacity_));
  LayoutWorkspace(capacity_, shape_, &plan, image_);
  return absl::OkStatus();
}

bool Workspace::CountersAreZero() const {
  std::vector<int32_t> c(layout_.counters_bytes / 4);
  if (cudaMemcpy(c.data(), static_cast<uint8_t*>(device_) + layout_.counters,
                 layout_.counters_bytes, cudaMemcpyDeviceToHost) != cudaSuccess) {
    return false;
  }
  return std::all_of(c.begin(), c.end(), [](int32_t x) { return x == 0; });
}

}  // namespace pkv::decode::testing
