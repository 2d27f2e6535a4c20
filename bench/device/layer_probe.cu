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
//   kernels+pdlpf  PDL, each warp loads its first weight unit before the wait (pf2's form in the
//                  engine, where it was neutral to negative)
//   persistent     one cooperative kernel for all layers, phases separated by a global counter
//   persistent+pf  the same, and a warp that finished its rows of phase g loads its first unit
//                  of phase g+1 before the CTA waits for phase g's counter
// Floor: the same bytes through a plain streaming read in the same process.
// Second form (twenty-first session, after the first ran at 31-40% of the stream on an H100,
// latency-bound: bench/results/2026-12-05-h100-call21): the phase table in constant memory (no
// dependent global read after a barrier), x staged once a CTA in shared memory, and every warp
// streams its rows as one pipeline of 4 KB units, two in flight (the next row's first unit loads
// while this row's last one is summed), so the GEMV is bandwidth-bound as the engine's are.
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

constexpr int kWarps = 8;       // a CTA
constexpr int kUnit = 8;        // uint4 a lane a pipeline unit: 8 x 8 bf16, 2048 elements a warp
constexpr int kMaxPhases = 96;  // 8B: 8 layers x 5; 1B: 16 x 5

struct Phase {
  const __nv_bfloat16* w;  // [rows][k] row-major
  int rows;
  int k;           // a multiple of 256
  const float* x;  // [k]: the previous phase's output
  float* y;        // [rows]
};

__constant__ Phase c_phases[kMaxPhases];

__device__ __forceinline__ void PdlWait() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }
__device__ __forceinline__ void PdlTrigger() {
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}

// Unit u of a row: its weight steps [u * kUnit, u * kUnit + kUnit) of k / 256, 16 bytes a lane
// each.
__device__ __forceinline__ void LoadUnit(const Phase& p, int row, int u, uint4 (&r)[kUnit],
                                         int lane) {
  const uint4* w =
      reinterpret_cast<const uint4*>(p.w + static_cast<size_t>(row) * p.k) + u * kUnit * 32 + lane;
  const int left = p.k / 256 - u * kUnit;
#pragma unroll
  for (int i = 0; i < kUnit; ++i) {
    if (i < left) r[i] = __ldcs(w + i * 32);
  }
}

__device__ __forceinline__ float DotUnit(const float* xs, int k, int u, const uint4 (&r)[kUnit],
                                         int lane) {
  const int left = k / 256 - u * kUnit;
  float acc = 0.f;
#pragma unroll
  for (int i = 0; i < kUnit; ++i) {
    if (i < left) {
      const float4* x = reinterpret_cast<const float4*>(xs + (u * kUnit + i) * 256 + lane * 8);
      const float4 a = x[0], b = x[1];
      const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&r[i]);
      const float2 w0 = __bfloat1622float2(h[0]), w1 = __bfloat1622float2(h[1]);
      const float2 w2 = __bfloat1622float2(h[2]), w3 = __bfloat1622float2(h[3]);
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

// x (the previous phase's output, written by other CTAs: L2 only) into shared memory, once a CTA.
__device__ __forceinline__ void StageX(const Phase& p, float* xs) {
  const float4* x = reinterpret_cast<const float4*>(p.x);
  for (int i = threadIdx.x; i < p.k / 4; i += blockDim.x) {
    reinterpret_cast<float4*>(xs)[i] = __ldcg(x + i);
  }
  __syncthreads();
}

__device__ __forceinline__ void FinishRow(const Phase& p, int row, float acc) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if ((threadIdx.x & 31) == 0) p.y[row] = tanhf(acc * rsqrtf(static_cast<float>(p.k)));
}

// The warp's rows of one phase (row = gwarp, gwarp + nwarps, ...) as one pipeline of units, two
// in flight: b0 and b1 alternate, each refilled right after it is summed. b0 already holds the
// first unit when `preloaded`.
__device__ __forceinline__ void RunPhase(const Phase& p, const float* xs, int gwarp, int nwarps,
                                         int lane, uint4 (&b0)[kUnit], bool preloaded) {
  const int units = (p.k / 256 + kUnit - 1) / kUnit;
  const int rows = gwarp < p.rows ? (p.rows - gwarp + nwarps - 1) / nwarps : 0;
  const int total = rows * units;
  if (total == 0) return;
  auto row_of = [&](int t) { return gwarp + (t / units) * nwarps; };
  if (!preloaded) LoadUnit(p, row_of(0), 0, b0, lane);
  uint4 b1[kUnit];
  float acc = 0.f;
  for (int t = 0; t < total; t += 2) {
    if (t + 1 < total) LoadUnit(p, row_of(t + 1), (t + 1) % units, b1, lane);
    acc += DotUnit(xs, p.k, t % units, b0, lane);
    if (t % units == units - 1) {
      FinishRow(p, row_of(t), acc);
      acc = 0.f;
    }
    if (t + 2 < total) LoadUnit(p, row_of(t + 2), (t + 2) % units, b0, lane);
    if (t + 1 < total) {
      acc += DotUnit(xs, p.k, (t + 1) % units, b1, lane);
      if ((t + 1) % units == units - 1) {
        FinishRow(p, row_of(t + 1), acc);
        acc = 0.f;
      }
    }
  }
}

// kPrefetch: load the first unit before the PDL wait (kernels+pdlpf).
template <bool kPrefetch>
__global__ void __launch_bounds__(kWarps * 32, 2) PhaseKernel(int g) {
  extern __shared__ float4 smem[];
  float* xs = reinterpret_cast<float*>(smem);
  const Phase& p = c_phases[g];
  const int lane = threadIdx.x & 31;
  const int gwarp = blockIdx.x * kWarps + threadIdx.x / 32, nwarps = gridDim.x * kWarps;
  uint4 b0[kUnit];
  bool preloaded = false;
  if (kPrefetch && gwarp < p.rows) {
    LoadUnit(p, gwarp, 0, b0, lane);
    preloaded = true;
  }
  PdlWait();
  PdlTrigger();
  StageX(p, xs);
  RunPhase(p, xs, gwarp, nwarps, lane, b0, preloaded);
}

__device__ __forceinline__ int LoadAcquire(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// All phases in one cooperative launch; done[g] counts the CTAs through phase g (zeroed before
// the launch).
template <bool kPrefetch>
__global__ void __launch_bounds__(kWarps * 32, 2) PersistentKernel(int num_phases, int* done) {
  extern __shared__ float4 smem[];
  float* xs = reinterpret_cast<float*>(smem);
  const int lane = threadIdx.x & 31;
  const int gwarp = blockIdx.x * kWarps + threadIdx.x / 32, nwarps = gridDim.x * kWarps;
  uint4 b0[kUnit];
  bool preloaded = false;
  for (int g = 0; g < num_phases; ++g) {
    const Phase& p = c_phases[g];
    StageX(p, xs);
    RunPhase(p, xs, gwarp, nwarps, lane, b0, preloaded);
    preloaded = false;
    if (g + 1 == num_phases) break;
    if (kPrefetch) {  // the next phase's weights do not depend on this phase: load them now
      const Phase& n = c_phases[g + 1];
      if (gwarp < n.rows) {
        LoadUnit(n, gwarp, 0, b0, lane);
        preloaded = true;
      }
    }
    __syncthreads();  // every warp done with xs and its rows
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
  std::vector<Phase> phases;  // host copy of c_phases
  int smem_bytes = 0;         // x of the widest phase, fp32
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
  if (b->phases.size() > kMaxPhases) {
    std::printf("%zu phases, at most %d\n", b->phases.size(), kMaxPhases);
    std::exit(1);
  }
  CK(cudaMemcpyToSymbol(c_phases, b->phases.data(), b->phases.size() * sizeof(Phase)));
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
    config.dynamicSmemBytes = b.smem_bytes;
    config.stream = stream;
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    config.attrs = &attr;
    config.numAttrs = pdl ? 1 : 0;
    CK(cudaLaunchKernelEx(&config, kernel, g));
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
  b.smem_bytes =
      std::max({shape.hidden, shape.intermediate, shape.kv_bytes_4k / 2 / shape.hidden}) * 4;
  const void* kernels[] = {reinterpret_cast<const void*>(PhaseKernel<false>),
                           reinterpret_cast<const void*>(PhaseKernel<true>),
                           reinterpret_cast<const void*>(PersistentKernel<false>),
                           reinterpret_cast<const void*>(PersistentKernel<true>)};
  int sms = 0, occ = 2;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  for (const void* k : kernels) {
    CK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, b.smem_bytes));
    int o = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&o, k, kWarps * 32, b.smem_bytes));
    occ = std::min(occ, o);
  }
  if (occ < 1) {
    std::printf("no CTA fits an SM\n");
    std::exit(1);
  }
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
    int* done = b.d_done;
    int count = num_phases;
    void* args[] = {&count, &done};
    CK(cudaLaunchCooperativeKernel(v == kPersistent
                                       ? reinterpret_cast<const void*>(PersistentKernel<false>)
                                       : reinterpret_cast<const void*>(PersistentKernel<true>),
                                   dim3(b.grid), dim3(kWarps * 32), args, b.smem_bytes, stream));
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
