#include "worker/model/quant_linear.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "worker/model/awq.h"
#include "worker/model/gptq.h"
#include "worker/model/llama_weights.h"

namespace pkv {
namespace {

const std::vector<DType> kScaleDTypes = {DType::kF16, DType::kBF16, DType::kF32};

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

std::string Describe(const QuantConfig& quant) {
  const std::string_view m = QuantMethodName(quant.method);
  std::string s(m.data(), m.size());
  if (quant.int4()) absl::StrAppend(&s, ", group_size ", quant.group_size);
  return s;
}

absl::Status CheckShapeFor4Bit(const QuantConfig& quant, const std::string& module, int64_t n,
                               int64_t k) {
  const int64_t g = Int4GroupOf(quant, k);
  if (n % 8 != 0 || k % 8 != 0 || k % g != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "quantized module '", module, "' is ", n, " x ", k,
        " (out x in): ", quant.method == QuantMethod::kAwq ? "AWQ" : "GPTQ",
        " needs out % 8 == 0 and in a multiple of quantization_config.group_size ", g));
  }
  return absl::OkStatus();
}

std::vector<int32_t> ReadI32(const TensorView& v) {
  std::vector<int32_t> out(static_cast<size_t>(v.numel()));
  std::memcpy(out.data(), v.bytes.data(), out.size() * 4);  // little-endian host
  return out;
}

std::vector<float> ReadFloat(const TensorView& v) {
  std::vector<float> out(static_cast<size_t>(v.numel()));
  ConvertToFloat32(v, out.data());
  return out;
}

absl::Status CheckGIdx(const Checkpoint& ckpt, const std::string& module, int64_t k, int64_t g) {
  const std::string name = module + ".g_idx";
  if (!ckpt.Contains(name)) return absl::OkStatus();
  PKV_ASSIGN_OR_RETURN(TensorView view, ckpt.Get(name));
  const std::vector<int32_t> g_idx = ReadI32(view);
  for (int64_t j = 0; j < k; ++j) {
    if (g_idx[j] != j / g) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", name, "'[", j, "] = ", g_idx[j], ", expected ", j / g,
                       ": reordered (act-order) GPTQ groups are not supported"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Int4GroupMatrix> LoadInt4(const QuantConfig& quant, const Checkpoint& ckpt,
                                         const std::string& module, int64_t n, int64_t k) {
  const int64_t g = Int4GroupOf(quant, k);
  PackedInt4Tensors p;
  PKV_ASSIGN_OR_RETURN(TensorView qweight, ckpt.Get(module + ".qweight"));
  PKV_ASSIGN_OR_RETURN(TensorView qzeros, ckpt.Get(module + ".qzeros"));
  PKV_ASSIGN_OR_RETURN(TensorView scales, ckpt.Get(module + ".scales"));
  p.qweight = ReadI32(qweight);
  p.qzeros = ReadI32(qzeros);
  p.scales = ReadFloat(scales);
  if (quant.method == QuantMethod::kAwq) return UnpackAwq(p, n, k, static_cast<int32_t>(g));
  PKV_RETURN_IF_ERROR(CheckGIdx(ckpt, module, k, g));
  return UnpackGptq(p, n, k, static_cast<int32_t>(g), quant.gptq_v2);
}

absl::StatusOr<Fp8Matrix> LoadFp8(const Checkpoint& ckpt, const std::string& module, int64_t n,
                                  int64_t k) {
  PKV_ASSIGN_OR_RETURN(TensorView weight, ckpt.Get(module + ".weight"));
  PKV_ASSIGN_OR_RETURN(TensorView scale, ckpt.Get(module + ".weight_scale"));
  Fp8Matrix m;
  m.n = n;
  m.k = k;
  m.q.assign(weight.bytes.begin(), weight.bytes.end());
  m.scale = ReadFloat(scale);  // numel 1 (per tensor) or n (per channel): validated
  return m;
}

}  // namespace

absl::StatusOr<std::vector<QuantTensorSpec>> QuantLinearTensorSpecs(const QuantConfig& quant,
                                                                    const std::string& module,
                                                                    int64_t n, int64_t k) {
  if (quant.method == QuantMethod::kFp8) {
    std::vector<std::vector<int64_t>> scale_shapes = {{n, 1}, {n}};
    if (quant.fp8_per_tensor) scale_shapes = {{1}, {}};
    return std::vector<QuantTensorSpec>{
        {module + ".weight", {{n, k}}, {DType::kF8E4M3}, true},
        {module + ".weight_scale", scale_shapes, kScaleDTypes, true},
        {module + ".input_scale", {{1}, {}}, kScaleDTypes, false}};
  }
  PKV_RETURN_IF_ERROR(CheckShapeFor4Bit(quant, module, n, k));
  const int64_t groups = k / Int4GroupOf(quant, k);
  std::vector<QuantTensorSpec> specs;
  if (quant.method == QuantMethod::kAwq) {
    specs.push_back({module + ".qweight", {{k, n / 8}}, {DType::kI32}, true});
  } else {
    specs.push_back({module + ".qweight", {{k / 8, n}}, {DType::kI32}, true});
  }
  specs.push_back({module + ".qzeros", {{groups, n / 8}}, {DType::kI32}, true});
  specs.push_back({module + ".scales", {{groups, n}}, kScaleDTypes, true});
  if (quant.method == QuantMethod::kGptq) {
    specs.push_back({module + ".g_idx", {{k}}, {DType::kI32}, false});
  }
  return specs;
}

absl::Status ValidateQuantLinear(const QuantConfig& quant, const Checkpoint& checkpoint,
                                 const std::string& module, int64_t n, int64_t k) {
  PKV_ASSIGN_OR_RETURN(std::vector<QuantTensorSpec> specs,
                       QuantLinearTensorSpecs(quant, module, n, k));
  for (const QuantTensorSpec& spec : specs) {
    if (!spec.required && !checkpoint.Contains(spec.name)) continue;
    PKV_ASSIGN_OR_RETURN(TensorView view, checkpoint.Get(spec.name));
    if (std::find(spec.shapes.begin(), spec.shapes.end(), view.shape()) == spec.shapes.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor '", spec.name, "' has shape ", ShapeString(view.shape()), ", expected ",
          ShapeString(spec.shapes[0]), " from config.json (", Describe(quant), ")"));
    }
    if (std::find(spec.dtypes.begin(), spec.dtypes.end(), view.dtype()) == spec.dtypes.end()) {
      const std::string_view got = DTypeName(view.dtype()), want = DTypeName(spec.dtypes[0]);
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor '", spec.name, "' has dtype ", absl::string_view(got.data(), got.size()),
          ", expected ", absl::string_view(want.data(), want.size()), " (", Describe(quant), ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<QuantizedLinear> LoadQuantizedLinear(const QuantConfig& quant,
                                                    const Checkpoint& checkpoint,
                                                    const std::string& module, int64_t n,
                                                    int64_t k) {
  PKV_CHECK(quant.quantized());
  PKV_RETURN_IF_ERROR(ValidateQuantLinear(quant, checkpoint, module, n, k));
  QuantizedLinear out;
  out.method = quant.method;
  if (quant.method == QuantMethod::kFp8) {
    PKV_ASSIGN_OR_RETURN(out.fp8, LoadFp8(checkpoint, module, n, k));
  } else {
    PKV_ASSIGN_OR_RETURN(out.int4, LoadInt4(quant, checkpoint, module, n, k));
  }
  return out;
}

void DequantizeLinear(const QuantizedLinear& linear, float* out) {
  if (linear.method == QuantMethod::kFp8) {
    DequantizeFp8(linear.fp8, out);
  } else {
    DequantizeInt4(linear.int4, out);
  }
}

}  // namespace pkv
