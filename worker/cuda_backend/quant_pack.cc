#include "worker/cuda_backend/quant_pack.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/cuda_status.h"
#include "common/status_macros.h"
#include "kernels/common/float16.h"
#include "kernels/model/gemv_quant.h"
#include "worker/model/quant_linear.h"
#include "worker/model/quant_matrix.h"

namespace pkv::cuda_backend {
namespace {

constexpr int64_t kRandomBlockBytes = int64_t{4} << 20;

template <typename T>
void Append(const std::vector<T>& from, std::vector<T>* to) {
  to->insert(to->end(), from.begin(), from.end());
}

template <typename T>
std::vector<uint8_t> Bytes(const std::vector<T>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), v.data(), out.size());
  return out;
}

absl::StatusOr<PackedHost> PackInt4(std::vector<QuantizedLinear>& members, int64_t k,
                                    decode::DType dtype) {
  Int4GroupMatrix all;
  all.k = k;
  all.group = members[0].int4.group;
  for (QuantizedLinear& m : members) {
    if (m.int4.group != all.group) {
      return absl::InvalidArgumentError("fused projection members with different group sizes");
    }
    all.n += m.int4.n;
    Append(m.int4.q, &all.q);
    Append(m.int4.scale, &all.scale);
    Append(m.int4.zero, &all.zero);
    m = QuantizedLinear();  // the canonical copy is no longer needed
  }
  PKV_ASSIGN_OR_RETURN(gpu::GemvInt4Weights w,
                       gpu::RepackInt4ForGemv(all.n, k, all.group, all.q.data(), all.scale.data(),
                                              all.zero.data(), dtype));
  return PackedHost{Bytes(w.q), Bytes(w.scales)};
}

absl::StatusOr<PackedHost> PackFp8(std::vector<QuantizedLinear>& members, int64_t k) {
  Fp8Matrix all;
  all.k = k;
  const bool lone_tensor_scale = members.size() == 1 && members[0].fp8.scale.size() == 1;
  for (QuantizedLinear& m : members) {
    all.n += m.fp8.n;
    Append(m.fp8.q, &all.q);
    if (lone_tensor_scale || m.fp8.scale.size() == static_cast<size_t>(m.fp8.n)) {
      Append(m.fp8.scale, &all.scale);
    } else {  // a per-tensor scale of one member among several: one per row of that member
      all.scale.insert(all.scale.end(), m.fp8.n, m.fp8.scale[0]);
    }
    m = QuantizedLinear();
  }
  PKV_ASSIGN_OR_RETURN(gpu::GemvFp8Weights w,
                       gpu::RepackFp8ForGemv(all.n, k, all.q.data(), all.scale.data(),
                                             static_cast<int64_t>(all.scale.size())));
  return PackedHost{Bytes(w.q), Bytes(w.scales)};
}

}  // namespace

absl::StatusOr<PackedLayout> PackedLayoutOf(const QuantConfig& quant, const std::string& module,
                                            int members, int64_t n, int64_t k) {
  PackedLayout l;
  if (quant.int4()) {
    const int64_t group = Int4GroupOf(quant, k);
    if (group % 128 != 0 || k % 128 != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "quantization_config.group_size = ", quant.group_size, " (", module, ": ", k,
          " inputs): the CUDA backend's 4-bit kernels need groups of a multiple of 128 input "
          "columns and an input size that is a multiple of 128"));
    }
    l.format = gpu::GemvWeightFormat::kInt4;
    l.q_bytes = n * k / 2;
    l.scale_bytes = n * (k / 128) * 4;
    return l;
  }
  if (k % 64 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "quantization_config.quant_method = ", std::string(QuantMethodName(quant.method)), " (",
        module, ": ", k,
        " inputs): the CUDA backend's fp8 kernels need an input size that is a "
        "multiple of 64"));
  }
  l.format = gpu::GemvWeightFormat::kFp8;
  l.q_bytes = n * k;
  l.scale_count = members == 1 && quant.fp8_per_tensor ? 1 : static_cast<int32_t>(n);
  l.scale_bytes = int64_t{l.scale_count} * 4;
  return l;
}

absl::StatusOr<PackedHost> PackProjection(std::vector<QuantizedLinear> members, int64_t k,
                                          decode::DType dtype, const std::string& module) {
  for (const QuantizedLinear& m : members) {
    const int64_t mk = m.method == QuantMethod::kFp8 ? m.fp8.k : m.int4.k;
    if (mk != k || m.method != members[0].method) {
      return absl::InvalidArgumentError(absl::StrCat(module, ": fused projection members of ", mk,
                                                     " and ", k, " inputs (or formats)"));
    }
  }
  absl::StatusOr<PackedHost> packed =
      members[0].method == QuantMethod::kFp8 ? PackFp8(members, k) : PackInt4(members, k, dtype);
  if (!packed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(module, ": ", absl::string_view(packed.status().message())));
  }
  return packed;
}

std::vector<uint16_t> DequantizeToDType(const QuantizedLinear& linear, decode::DType dtype) {
  const int64_t numel = linear.method == QuantMethod::kFp8 ? linear.fp8.n * linear.fp8.k
                                                           : linear.int4.n * linear.int4.k;
  std::vector<float> f(numel);
  DequantizeLinear(linear, f.data());
  std::vector<uint16_t> out(numel);
  const bool bf16 = dtype == decode::DType::kBFloat16;
  for (int64_t i = 0; i < numel; ++i) out[i] = bf16 ? ToBFloat16(f[i]).bits : ToHalf(f[i]).bits;
  return out;
}

absl::Status FillRandomPacked(const PackedLayout& layout, int64_t n, int64_t k, decode::DType dtype,
                              uint64_t seed, void* q, void* scales, cudaStream_t stream) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> block(std::min(kRandomBlockBytes, layout.q_bytes));
  std::vector<uint8_t> scale_bytes;
  if (layout.format == gpu::GemvWeightFormat::kInt4) {
    for (uint8_t& b : block) b = static_cast<uint8_t>(rng());
    // Every (row, 128 k) word is the same (scale, zero point): repack one group for its bits.
    std::vector<uint32_t> one_q(16, 0);
    const float s = 0.0047f;
    const uint8_t z = 8;
    PKV_ASSIGN_OR_RETURN(gpu::GemvInt4Weights one,
                         gpu::RepackInt4ForGemv(1, 128, 128, one_q.data(), &s, &z, dtype));
    std::vector<uint32_t> words(n * (k / 128), one.scales[0]);
    scale_bytes = Bytes(words);
  } else {
    std::uniform_real_distribution<float> u(-448.f, 448.f);  // w / s with s = 0.035 / 448
    for (uint8_t& b : block) b = FloatToE4M3(u(rng));
    std::vector<float> s(layout.scale_count, 0.035f / 448.f);
    scale_bytes = Bytes(s);
  }
  PKV_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(q, block.data(), block.size(), cudaMemcpyHostToDevice, stream));
  // Doubling device-to-device copies tile the block over the whole matrix.
  auto* dst = static_cast<uint8_t*>(q);
  for (int64_t done = static_cast<int64_t>(block.size()); done < layout.q_bytes;) {
    const int64_t len = std::min(done, layout.q_bytes - done);
    PKV_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(dst + done, dst, len, cudaMemcpyDeviceToDevice, stream));
    done += len;
  }
  PKV_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(scales, scale_bytes.data(), scale_bytes.size(),
                                           cudaMemcpyHostToDevice, stream));
  PKV_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return absl::OkStatus();
}

}  // namespace pkv::cuda_backend
