// Kernels of tp_kernels.h, then their launchers.
#include <algorithm>

#include "kernels/model/model_device.cuh"
#include "worker/cuda_backend/tp_kernels.h"

namespace pkv::cuda_backend {
namespace {

constexpr int kThreads = 256;

// One block per token; a grid-stride loop over the hidden features.
template <typename T>
__global__ void EmbedShardKernel(const T* __restrict__ embed, const int32_t* __restrict__ ids,
                                 int32_t hidden, int32_t begin, int32_t end, float* __restrict__ x,
                                 T* __restrict__ out) {
  const int64_t t = blockIdx.x;
  const int32_t id = ids[t];
  const bool mine = id >= begin && id < end;
  const T* row = embed + static_cast<int64_t>(mine ? id - begin : 0) * hidden;
  for (int32_t j = threadIdx.x; j < hidden; j += blockDim.x) {
    x[t * hidden + j] = 0.f;
    out[t * hidden + j] = mine ? row[j] : gpu::dev::FromF<T>(0.f);
  }
}

__global__ void GatherVocabShardsKernel(const float* __restrict__ gathered, int32_t rows,
                                        int32_t chunk, int32_t vocab, float* __restrict__ out) {
  const int64_t n = static_cast<int64_t>(rows) * vocab;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / vocab;
    const int32_t v = static_cast<int32_t>(i - r * vocab);
    const int32_t q = v / chunk, j = v - q * chunk;
    const int32_t width = min(chunk, vocab - q * chunk);  // rank q's local vocabulary
    out[i] = gathered[static_cast<int64_t>(q) * rows * chunk + r * width + j];
  }
}

}  // namespace

absl::Status LaunchEmbedShard(const EmbedShardArgs& a, cudaStream_t stream) {
  if (a.num_tokens <= 0) return absl::OkStatus();
  if (a.hidden <= 0 || a.vocab_end < a.vocab_begin) {
    return absl::InvalidArgumentError("LaunchEmbedShard: bad hidden size or vocabulary slice");
  }
  return gpu::DispatchDType(a.dtype, [&](auto tag) {
    using T = decltype(tag);
    EmbedShardKernel<T><<<a.num_tokens, kThreads, 0, stream>>>(
        static_cast<const T*>(a.embed), a.token_ids, a.hidden, a.vocab_begin, a.vocab_end, a.x,
        static_cast<T*>(a.out));
    return gpu::CheckLaunch("EmbedShardKernel");
  });
}

absl::Status LaunchGatherVocabShards(const float* gathered, int32_t rows, int32_t tp, int32_t chunk,
                                     int32_t vocab, float* out, cudaStream_t stream) {
  if (rows <= 0) return absl::OkStatus();
  if (tp < 1 || chunk < 1 || static_cast<int64_t>(tp) * chunk < vocab) {
    return absl::InvalidArgumentError("LaunchGatherVocabShards: tp * chunk must cover the vocab");
  }
  const int64_t n = static_cast<int64_t>(rows) * vocab;
  const int blocks = static_cast<int>(std::min<int64_t>((n + kThreads - 1) / kThreads, 4096));
  GatherVocabShardsKernel<<<blocks, kThreads, 0, stream>>>(gathered, rows, chunk, vocab, out);
  return gpu::CheckLaunch("GatherVocabShardsKernel");
}

}  // namespace pkv::cuda_backend
