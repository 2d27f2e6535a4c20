#include "worker/tools/quantized_module.h"

#include <cstring>

#include "kernels/common/float16.h"
#include "worker/model/awq.h"
#include "worker/model/gptq.h"
#include "worker/tools/quantize.h"
#include "worker/tools/random_model.h"

namespace pkv {
namespace {

std::vector<uint8_t> Int32Bytes(const std::vector<int32_t>& v) {
  std::vector<uint8_t> out(v.size() * 4);
  std::memcpy(out.data(), v.data(), out.size());  // little-endian host
  return out;
}

std::vector<uint8_t> FloatBytes(const std::vector<float>& v, DType dtype) {
  if (dtype == DType::kF32) {
    std::vector<uint8_t> out(v.size() * 4);
    std::memcpy(out.data(), v.data(), out.size());
    return out;
  }
  std::vector<uint8_t> out(v.size() * 2);
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t bits = dtype == DType::kBF16 ? ToBFloat16(v[i]).bits : ToHalf(v[i]).bits;
    std::memcpy(out.data() + 2 * i, &bits, 2);
  }
  return out;
}

}  // namespace

QuantizedModuleBytes QuantizeRandomModule(const QuantConfig& quant, const std::string& module,
                                          const TensorSpec& source, uint64_t seed,
                                          DType scale_dtype) {
  const int64_t n = source.shape[0], k = source.shape[1];
  std::vector<float> w(static_cast<size_t>(n * k));
  const uint64_t key = RandomTensorKey(seed, source.name);
  for (int64_t i = 0; i < n * k; ++i) w[i] = RandomWeightValue(source.kind, key, i);
  QuantizedModuleBytes out;
  out.module = module;
  if (quant.method == QuantMethod::kFp8) {
    const Fp8Matrix m = QuantizeFp8(w.data(), n, k, quant.fp8_per_tensor, scale_dtype);
    out.parts["weight"] = m.q;
    out.parts["weight_scale"] = FloatBytes(m.scale, scale_dtype);
    return out;
  }
  const auto group = static_cast<int32_t>(Int4GroupOf(quant, k));
  PackedInt4Tensors packed;
  if (quant.method == QuantMethod::kAwq) {
    packed = PackAwq(QuantizeAwq(w.data(), n, k, group));
  } else {
    packed = PackGptq(QuantizeGptq(w.data(), n, k, group, quant.sym), quant.gptq_v2);
    std::vector<int32_t> g_idx(static_cast<size_t>(k));
    for (int64_t j = 0; j < k; ++j) g_idx[j] = static_cast<int32_t>(j / group);
    out.parts["g_idx"] = Int32Bytes(g_idx);
  }
  out.parts["qweight"] = Int32Bytes(packed.qweight);
  out.parts["qzeros"] = Int32Bytes(packed.qzeros);
  out.parts["scales"] = FloatBytes(packed.scales, DType::kF16);
  return out;
}

}  // namespace pkv
