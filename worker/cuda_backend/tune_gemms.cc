#include "worker/cuda_backend/tune_gemms.h"

#include <algorithm>
#include <vector>

#include "common/log.h"
#include "common/status_macros.h"
#include "kernels/model/model_kernels.h"

namespace pkv::cuda_backend {

absl::Status TuneGemms(const ModelConfig& config, const DeviceWeights& weights,
                       const std::vector<int32_t>& buckets, float* logits, Gemm* gemm,
                       cudaStream_t stream) {
  const ModelConfig& c = config;
  const int64_t h = c.hidden_size, inter = c.intermediate_size;
  const int64_t q_dim = int64_t{c.num_q_heads} * c.head_dim;
  const int64_t qkv_dim = int64_t{c.num_q_heads + 2 * c.num_kv_heads} * c.head_dim;
  const int64_t max_t = buckets.empty() ? 1 : buckets.back();
  const int64_t max_in = std::max({h, q_dim, inter});
  const int64_t max_out_bytes = std::max({qkv_dim * 4, h * 2, 2 * inter * 2});
  PKV_ASSIGN_OR_RETURN(DeviceBuffer x_scratch, DeviceBuffer::Allocate(max_t * max_in * 2));
  PKV_ASSIGN_OR_RETURN(DeviceBuffer y_scratch, DeviceBuffer::Allocate(max_t * max_out_bytes));
  PKV_RETURN_IF_ERROR(gpu::LaunchFillRandom(x_scratch.get(), max_t * max_in, false, weights.dtype,
                                            17, 0.f, 1.f, stream));
  struct Shape {
    int64_t in, out;
    bool f32;
    std::vector<const void*> w;
  };
  std::vector<Shape> shapes(4);
  shapes[0] = {h, qkv_dim, true, {}};
  shapes[1] = {q_dim, h, false, {}};
  shapes[2] = {h, 2 * inter, false, {}};
  shapes[3] = {inter, h, false, {}};
  for (const LayerWeights& w : weights.layers) {
    shapes[0].w.push_back(w.qkv);
    shapes[1].w.push_back(w.o);
    shapes[2].w.push_back(w.gate_up);
    shapes[3].w.push_back(w.down);
  }
  for (int32_t t : buckets) {
    for (const Shape& s : shapes) {
      Gemm::TuneProblem p{weights.dtype,  t, s.in, s.out, s.f32, s.w, x_scratch.get(),
                          y_scratch.get()};
      PKV_RETURN_IF_ERROR(gemm->Tune(p, stream));
    }
    // The LM head of a decode step's sampled rows (logits is sized for max_rows of them).
    Gemm::TuneProblem head{weights.dtype,   t,     h, c.vocab_size, true, {weights.lm_head},
                           x_scratch.get(), logits};
    PKV_RETURN_IF_ERROR(gemm->Tune(head, stream));
  }
  PKV_LOG(INFO) << "cuda backend: tuned " << gemm->num_tuned() << " GEMM problems, "
                << gemm->num_lt() << " run a cuBLASLt algorithm";
  return absl::OkStatus();
}

}  // namespace pkv::cuda_backend
