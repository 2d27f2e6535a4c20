// Premise test of the persistent layer kernel (issue 14's lead in bench/NOTES.md, twentieth
// session): how much of a B=1 layer's time is its kernel boundaries, and how much of that a
// persistent kernel gets back when a CTA that finished its part of one phase loads its part of
// the next phase's weights before it waits for the others.
//
// A B=1 decoder layer modelled as five dependent GEMV phases over the shape's weights (qkv,
// "attention" = a GEMV over the layer's 4k-token KV bytes, o, gate+up, down); each phase reads
// the previous phase's whole output vector, so every boundary is a grid-wide dependency. The
// same warp -> row mapping and summation order in every variant, so all of them must produce
// the same bits (checked: the oracle that the persistent barrier is right):
//   kernels        one kernel a phase, graph, no PDL
//   kernels+pdl    the same with PDL, every kernel waits before its first load (the engine's form)
//   kernels+pdlpf  PDL, each warp loads its first weight chunk before the wait (refuted in the
//                  engine as pf2: the loads compete with the previous kernel's stream)
//   persistent     one cooperative kernel for all layers, phases separated by a global counter
//   persistent+pf  the same, and a warp that finished its rows of phase g loads its first chunk
//                  of phase g+1 before the CTA waits for phase g's counter
// Floor: the same bytes through a plain streaming read in the same process.
// Build: nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o layer_probe layer_probe.cu
// Run:   layer_probe [reps]   (prints one line a shape and variant)
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CK(x)                                                                      \
  do {                                                                             \
    cudaError_t e_ = (x);                                                          \
    if (e_ != cudaSuccess) {                                                       \
      std::printf("CUDA error %s at line %d\n", cudaGetErrorString(e_), __LINE__); \
      std::exit(1);                                                                \
    }                                                                              \
  } while (0)

namespace {

constexpr int kWarps = 8;   // a CTA
constexpr int kChunk = 16;  // uint4 a lane in flight: 16 x 8 bf16 = 128 elements, 4096 a warp

struct Phase {
  const __nv_bfloat16* w;  // [rows][k] row-major
  int rows;
  int k;           // a multiple of 256
  const float* x;  // [k]: the previous phase's output
  float* y;        // [rows]
};

__device__ __forceinline__ void PdlWait() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }
__device__ __forceinline__ void PdlTrigger() {
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}

__device__ __forceinline__ void LoadChunk(const Phase& p, int row, int s0, uint4 (&r)[kChunk],
                                          int lane) {
  const uint4* w = reinterpret_cast<const uint4*>(p.w + static_cast<size_t>(row) * p.k);
  const int steps = p.k / 256;
#pragma unroll
  for (int i = 0; i < kChunk; ++i) {
    if (s0 + i < steps) r[i] = __ldcs(w + (s0 + i) * 32 + lane);
  }
}

__device__ __forceinline__ float DotChunk(const Phase& p, int s0, const uint4 (&r)[kChunk],
                                          int lane) {
  const int steps = p.k / 256;
  float acc = 0.f;
#pragma unroll
  for (int i = 0; i < kChunk; ++i) {
    if (s0 + i < steps) {
      // x comes from other CTAs of the same launch (persistent): L2 only, never a stale L1 line.
      const float4* x = reinterpret_cast<const float4*>(p.x + (s0 + i) * 256 + lane * 8);
      const float4 a = __ldcg(x), b = __ldcg(x + 1);
      const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&r[i]);
      float2 w0 = __bfloat1622float2(h[0]), w1 = __bfloat1622float2(h[1]);
      float2 w2 = __bfloat1622float2(h[2]), w3 = __bfloat1622float2(h[3]);
      acc = fmaf(w0.x, a.x, acc);
      acc = fmaf(w0.y, a.y, acc);
      acc = fmaf(w1.x, a.z, acc);
      acc = fmaf(w1.y, a.w, acc);
      acc = fmaf(w2.x, b.x, acc);
      acc = fmaf(w2.y, b.y, acc);
      acc = fmaf(w3.x, b.z, acc);
      acc = fmaf(w3.y, b.w, acc);
    }
  }
  return acc;
}

// The warp's rows of one phase (row = gwarp, gwarp + nwarps, ...) through the chunk registers
// `r`, which hold the first chunk of the first row already when have_pre (one array, so a
// prefetch costs no registers beyond the loop's own).
__device__ __forceinline__ void RunPhase(const Phase& p, int gwarp, int nwarps, int lane,
                                         uint4 (&r)[kChunk], bool have_pre) {
  const int steps = p.k / 256;
  const float scale = rsqrtf(static_cast<float>(p.k));
  for (int row = gwarp; row < p.rows; row += nwarps) {
    float acc = 0.f;
    for (int s0 = 0; s0 < steps; s0 += kChunk) {
      if (!(have_pre && s0 == 0)) LoadChunk(p, row, s0, r, lane);
      acc += DotChunk(p, s0, r, lane);
    }
    have_pre = false;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) p.y[row] = tanhf(acc * scale);
  }
}

// kPrefetch: load the first chunk before the PDL wait (kernels+pdlpf).
template <bool kPrefetch>
__global__ void __launch_bounds__(kWarps * 32, 2) PhaseKernel(const Phase* phases, int g) {
  const Phase p = phases[g];
  const int lane = threadIdx.x & 31;
  const int gwarp = blockIdx.x * kWarps + threadIdx.x / 32, nwarps = gridDim.x * kWarps;
  uint4 pre[kChunk];
  bool have_pre = false;
  if (kPrefetch && gwarp < p.rows) {
    LoadChunk(p, gwarp, 0, pre, lane);
    have_pre = true;
  }
  PdlWait();
  PdlTrigger();
  RunPhase(p, gwarp, nwarps, lane, pre, have_pre);
}

__device__ __forceinline__ int LoadAcquire(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// All phases in one cooperative launch; done[g] counts the CTAs through phase g (zeroed before
// the launch).
template <bool kPrefetch>
__global__ void __launch_bounds__(kWarps * 32, 2)
    PersistentKernel(const Phase* phases, int num_phases, int* done) {
  const int lane = threadIdx.x & 31;
  const int gwarp = blockIdx.x * kWarps + threadIdx.x / 32, nwarps = gridDim.x * kWarps;
  uint4 pre[kChunk];
  bool have_pre = false;
  for (int g = 0; g < num_phases; ++g) {
    const Phase p = phases[g];
    RunPhase(p, gwarp, nwarps, lane, pre, have_pre);
    have_pre = false;
    if (g + 1 == num_phases) break;
    if (kPrefetch) {  // next phase's weights do not depend on this phase: load them now
      const Phase& n = phases[g + 1];
      if (gwarp < n.rows) {
        LoadChunk(n, gwarp, 0, pre, lane);
        have_pre = true;
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      __threadfence();
      atomicAdd(done + g, 1);
      while (LoadAcquire(done + g) < static_cast<int>(gridDim.x)) {
      }
      __threadfence();
    }
    __syncthreads();
  }
}

__global__ void StreamRead(const uint4* p, int64_t n, uint32_t* sink) {
  uint32_t acc = 0;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const uint4 v = __ldcs(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678u) *sink = acc;
}

__global__ void FillWeights(__nv_bfloat16* w, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    w[i] = __float2bfloat16((static_cast<float>(h & 0xffff) / 32768.f - 1.f));
  }
}

struct Shape {
  const char* name;
  int hidden, qkv_rows, intermediate, kv_bytes_4k, layers;
};

// Llama-3 8B and 3.2 1B at B=1 with a 4k-token context (bf16 KV: tokens x kv heads x head dim x
// 2 (K, V) x 2 bytes). The attention phase reads the KV bytes as a GEMV of hidden rows.
const Shape kShapes[] = {
    {"8B", 4096, 6144, 14336, 4096 * 8 * 128 * 2 * 2, 8},
    {"1B", 2048, 3072, 8192, 4096 * 8 * 64 * 2 * 2, 16},
};

struct Bench {
  Shape shape;
  int grid = 0;
  std::vector<Phase> phases;  // host copy
  Phase* d_phases = nullptr;
  int* d_done = nullptr;
  int64_t weight_bytes = 0;
  __nv_bfloat16* weights = nullptr;
  float* vectors = nullptr;
};

void Build(Bench* b) {
  const Shape& s = b->shape;
  struct Dims {
    int rows, k;
  };
  const int attn_k = s.kv_bytes_4k / 2 / s.hidden;  // the KV bytes as a [hidden][attn_k] matrix
  const Dims layer[5] = {{s.qkv_rows, s.hidden},
                         {s.hidden, attn_k},
                         {s.hidden, s.hidden},
                         {2 * s.intermediate, s.hidden},
                         {s.hidden, s.intermediate}};
  int64_t elems = 0, vec = s.hidden;
  for (int l = 0; l < s.layers; ++l) {
    for (const Dims& d : layer) {
      elems += int64_t{d.rows} * d.k;
      vec += d.rows;
    }
  }
  b->weight_bytes = elems * 2;
  CK(cudaMalloc(&b->weights, b->weight_bytes));
  CK(cudaMalloc(&b->vectors, vec * 4));
  FillWeights<<<1024, 256>>>(b->weights, elems, 0x9e3779b9u);
  std::vector<float> x0(s.hidden);
  for (int i = 0; i < s.hidden; ++i) x0[i] = std::sin(0.37 * i);
  CK(cudaMemcpy(b->vectors, x0.data(), s.hidden * 4, cudaMemcpyHostToDevice));
  int64_t woff = 0, voff = s.hidden;
  const float* x = b->vectors;
  for (int l = 0; l < s.layers; ++l) {
    for (const Dims& d : layer) {
      if (d.k % 256 != 0) {
        std::printf("k %d is not a multiple of 256\n", d.k);
        std::exit(1);
      }
      Phase p{b->weights + woff, d.rows, d.k, x, b->vectors + voff};
      b->phases.push_back(p);
      woff += int64_t{d.rows} * d.k;
      x = p.y;
      voff += d.rows;
    }
  }
  CK(cudaMalloc(&b->d_phases, b->phases.size() * sizeof(Phase)));
  CK(cudaMemcpy(b->d_phases, b->phases.data(), b->phases.size() * sizeof(Phase),
                cudaMemcpyHostToDevice));
  CK(cudaMalloc(&b->d_done, b->phases.size() * sizeof(int)));
}

template <typename Kernel>
cudaGraphExec_t CaptureKernels(const Bench& b, Kernel kernel, bool pdl, cudaStream_t stream) {
  cudaGraph_t graph;
  CK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  for (int g = 0; g < static_cast<int>(b.phases.size()); ++g) {
    cudaLaunchConfig_t config = {};
    config.gridDim = dim3(b.grid);
    config.blockDim = dim3(kWarps * 32);
    config.stream = stream;
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    config.attrs = &attr;
    config.numAttrs = pdl ? 1 : 0;
    CK(cudaLaunchKernelEx(&config, kernel, static_cast<const Phase*>(b.d_phases), g));
  }
  CK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  CK(cudaGraphInstantiate(&exec, graph, 0));
  CK(cudaGraphDestroy(graph));
  return exec;
}

enum Variant { kKernels, kKernelsPdl, kKernelsPdlPf, kPersistent, kPersistentPf, kNumVariants };
const char* kVariantNames[] = {"kernels", "kernels+pdl", "kernels+pdlpf", "persistent",
                               "persistent+pf"};

void RunShape(const Shape& shape, int reps, int device) {
  Bench b;
  b.shape = shape;
  int sms = 0, occ = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, PersistentKernel<true>, kWarps * 32, 0));
  int occ0 = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ0, PersistentKernel<false>, kWarps * 32, 0));
  occ = std::min({occ, occ0, 2});
  b.grid = sms * occ;
  Build(&b);
  cudaStream_t stream;
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraphExec_t graphs[3] = {CaptureKernels(b, PhaseKernel<false>, false, stream),
                               CaptureKernels(b, PhaseKernel<false>, true, stream),
                               CaptureKernels(b, PhaseKernel<true>, true, stream)};
  uint32_t* sink;
  CK(cudaMalloc(&sink, 4));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  const int num_phases = static_cast<int>(b.phases.size());
  const Phase last = b.phases.back();
  std::vector<float> reference(last.rows), got(last.rows);
  auto launch = [&](int v) {
    if (v < kPersistent) {
      CK(cudaGraphLaunch(graphs[v], stream));
      return;
    }
    const Phase* phases = b.d_phases;
    int* done = b.d_done;
    int count = num_phases;
    void* args[] = {&phases, &count, &done};
    CK(cudaLaunchCooperativeKernel(v == kPersistent
                                       ? reinterpret_cast<const void*>(PersistentKernel<false>)
                                       : reinterpret_cast<const void*>(PersistentKernel<true>),
                                   dim3(b.grid), dim3(kWarps * 32), args, 0, stream));
  };
  std::vector<float> times[kNumVariants + 1];
  for (int rep = -1; rep < reps; ++rep) {
    for (int v = 0; v <= kNumVariants; ++v) {
      if (v < kNumVariants) {
        CK(cudaMemsetAsync(b.d_done, 0, num_phases * sizeof(int), stream));
        CK(cudaMemsetAsync(last.y, 0, last.rows * 4, stream));
      }
      CK(cudaEventRecord(e0, stream));
      if (v < kNumVariants) {
        launch(v);
      } else {  // the floor: the same weight bytes, one streaming read
        StreamRead<<<sms * 8, 512, 0, stream>>>(reinterpret_cast<const uint4*>(b.weights),
                                                b.weight_bytes / 16, sink);
      }
      CK(cudaEventRecord(e1, stream));
      CK(cudaStreamSynchronize(stream));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      if (rep >= 0) times[v].push_back(ms * 1000.f);
      if (rep == -1 && v < kNumVariants) {  // bits against the first variant
        CK(cudaMemcpy(v == 0 ? reference.data() : got.data(), last.y, last.rows * 4,
                      cudaMemcpyDeviceToHost));
        if (v > 0 && std::memcmp(reference.data(), got.data(), last.rows * 4) != 0) {
          int bad = 0;
          for (int i = 0; i < last.rows; ++i) bad += reference[i] != got[i];
          std::printf("MISMATCH %s %s: %d of %d outputs differ from %s\n", shape.name,
                      kVariantNames[v], bad, last.rows, kVariantNames[0]);
        }
      }
    }
  }
  auto median = [](std::vector<float> t) {
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  };
  const float floor_us = median(times[kNumVariants]);
  const double bytes_layer = static_cast<double>(b.weight_bytes) / shape.layers;
  std::printf(
      "shape %s layers %d grid %d (%d SMs x %d) bytes/layer %.1f MB stream %.1f us (%.2f TB/s) "
      "floor/layer %.2f us\n",
      shape.name, shape.layers, b.grid, sms, occ, bytes_layer / 1e6, floor_us,
      b.weight_bytes / (floor_us * 1e-6) / 1e12, floor_us / shape.layers);
  const float pdl_us = median(times[kKernelsPdl]);
  for (int v = 0; v < kNumVariants; ++v) {
    const float us = median(times[v]);
    std::printf(
        "%s\t%-14s\ttotal_us %.1f\tper_layer_us %.2f\tof_floor %.3f\tvs_pdl_per_layer_us %+.2f\t"
        "per_boundary_us %+.2f\tmin %.1f\tmax %.1f\n",
        shape.name, kVariantNames[v], us, us / shape.layers, floor_us / us,
        (us - pdl_us) / shape.layers, (us - pdl_us) / num_phases,
        *std::min_element(times[v].begin(), times[v].end()),
        *std::max_element(times[v].begin(), times[v].end()));
  }
  for (cudaGraphExec_t g : graphs) CK(cudaGraphExecDestroy(g));
  CK(cudaFree(b.weights));
  CK(cudaFree(b.vectors));
  CK(cudaFree(b.d_phases));
  CK(cudaFree(b.d_done));
  CK(cudaFree(sink));
  CK(cudaStreamDestroy(stream));
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 20;
  int device = 0;
  CK(cudaSetDevice(device));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, device));
  std::printf("gpu %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  for (const Shape& s : kShapes) RunShape(s, reps, device);
  return 0;
}
