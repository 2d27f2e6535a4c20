// Probe (issues 13/14): can a B=1 GEMV fed by bulk copies (cp.async.bulk, the TMA's 1-D form)
// stream its weights closer to the read floor than the engine's register-batch GEMV (~81% of DRAM
// peak by ncu, 0.84-0.86 of the measured stream in the step)? The shared-memory rings tried
// before (bench/NOTES.md "w4speed", "Thirteenth session") copied by per-lane cp.async, and the
// MIO queue (one LDGSTS per lane per 16 bytes, plus the LDS of every weight word) became the limit.
// A bulk copy is one instruction from one lane for a whole chunk and completes on an mbarrier, so
// only the consumer's LDS remains on the MIO queue (one LDS.128 of weights and one of x per 8
// MACs, ~37 B/clk/SM at the H200's stream against 128).
//
// Design: the weight matrix [n][k] (bf16, row-major) is one contiguous byte stream of chunks; each
// warp takes an equal contiguous range of chunks (so no warp gets a row more than another: rows
// may straddle two warps, whose partial sums meet by atomicAdd; a full row is stored) and streams
// it through its own ring of `slots` chunks, lane 0 issuing one bulk copy per chunk and refilling a
// slot as soon as the warp has read it. No CTA barrier after x's staging; the first `slots` copies
// are issued before the PDL wait (weights do not depend on the previous kernel).
// Timing as pkv-bench gemv's `chain`: back-to-back PDL launches in a graph over distinct copies of
// the weights (together >= 512 MiB), per launch; beside it a streaming read of the same bytes in
// the same chain form. The results are checked against a double-precision host GEMV.
//
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o tma_gemv_probe tma_gemv_probe.cu
//   tma_gemv_probe [reps]
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#define CK(x)                                                                                \
  do {                                                                                       \
    cudaError_t e_ = (x);                                                                    \
    if (e_ != cudaSuccess) {                                                                 \
      std::printf("CUDA %s at %s:%d: %s\n", #x, __FILE__, __LINE__, cudaGetErrorString(e_)); \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)

namespace {

__device__ __forceinline__ uint32_t SmemU32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void PdlWait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void MbarInit(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void MbarExpectTx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void MbarWait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n .reg .pred p;\n"
      "WAIT_%=:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      " @!p bra WAIT_%=;\n}" ::"r"(bar),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void BulkLoad(uint32_t dst, const void* src, uint32_t bytes,
                                         uint32_t bar, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1], %2, [%3], %4;" ::"r"(dst),
      "l"(src), "r"(bytes), "r"(bar), "l"(policy)
      : "memory");
}

// 8 bf16 products of two 16-byte words, into two accumulators (shorter dependency chains).
__device__ __forceinline__ void Dot8(const uint4& a, const uint4& b, float& s0, float& s1) {
  const uint32_t av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    s0 = fmaf(__uint_as_float(av[i] << 16), __uint_as_float(bv[i] << 16), s0);
    s1 = fmaf(__uint_as_float(av[i] & 0xffff0000u), __uint_as_float(bv[i] & 0xffff0000u), s1);
  }
}

struct ProbeShape {
  const char* name;
  int n, k;
};

// Shared memory: x [k] bf16 (128-aligned), then each warp's ring [slots][kChunk], then each warp's
// mbarriers [slots].
template <int kChunk>
__global__ void __launch_bounds__(512)
    BulkGemv(const uint8_t* __restrict__ w, const __nv_bfloat16* __restrict__ x,
             float* __restrict__ out, int n, int k, int slots, int whole_rows) {
  extern __shared__ __align__(128) uint8_t smem[];
  const int warps = blockDim.x >> 5, warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int x_bytes = (k * 2 + 127) & ~127;
  uint8_t* ring = smem + x_bytes + warp * slots * kChunk;
  uint64_t* bars =
      reinterpret_cast<uint64_t*>(smem + x_bytes + warps * slots * kChunk) + warp * slots;
  const int64_t nwarps = static_cast<int64_t>(gridDim.x) * warps;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * warps + warp;
  const int cpr = k * 2 / kChunk;  // chunks a row (the launcher checks divisibility)
  // Equal byte ranges, or (whole_rows: the form an epilogue needs) equal row ranges.
  const int64_t total_chunks = int64_t{n} * cpr;
  const int64_t c0 = whole_rows ? t * n / nwarps * cpr : t * total_chunks / nwarps;
  const int64_t c1 = whole_rows ? (t + 1) * n / nwarps * cpr : (t + 1) * total_chunks / nwarps;
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  if (lane == 0) {
    for (int s = 0; s < slots; ++s) MbarInit(SmemU32(bars + s), 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    for (int s = 0; s < slots && c0 + s < c1; ++s) {
      const uint32_t bar = SmemU32(bars + s);
      MbarExpectTx(bar, kChunk);
      BulkLoad(SmemU32(ring + s * kChunk), w + (c0 + s) * kChunk, kChunk, bar, policy);
    }
  }
  __syncwarp();
  PdlWait();
  for (int i = threadIdx.x; i < k / 8; i += blockDim.x) {
    reinterpret_cast<uint4*>(smem)[i] = reinterpret_cast<const uint4*>(x)[i];
  }
  __syncthreads();
  int64_t row = c0 / cpr;
  int kc = static_cast<int>(c0 - row * cpr);
  bool partial = kc != 0;  // the row began in the previous warp's range
  float s0 = 0.f, s1 = 0.f;
  int slot = 0;
  uint32_t parity = 0;
  for (int64_t c = c0; c < c1; ++c) {
    MbarWait(SmemU32(bars + slot), parity);
    const uint4* ws = reinterpret_cast<const uint4*>(ring + slot * kChunk);
    const uint4* xv = reinterpret_cast<const uint4*>(smem + kc * kChunk);
    uint4 a[kChunk / 512], b[kChunk / 512];
#pragma unroll
    for (int j = 0; j < kChunk / 512; ++j) {
      a[j] = ws[j * 32 + lane];
      b[j] = xv[j * 32 + lane];
    }
    __syncwarp();  // every lane has read the slot
    if (lane == 0 && c + slots < c1) {
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
      const uint32_t bar = SmemU32(bars + slot);
      MbarExpectTx(bar, kChunk);
      BulkLoad(SmemU32(ring + slot * kChunk), w + (c + slots) * kChunk, kChunk, bar, policy);
    }
#pragma unroll
    for (int j = 0; j < kChunk / 512; ++j) Dot8(a[j], b[j], s0, s1);
    if (++slot == slots) {
      slot = 0;
      parity ^= 1u;
    }
    if (++kc == cpr) {
      float s = s0 + s1;
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
      if (lane == 0) {
        if (partial) {
          atomicAdd(out + row, s);
        } else {
          out[row] = s;
        }
      }
      s0 = s1 = 0.f;
      kc = 0;
      ++row;
      partial = false;
    }
  }
  if (kc != 0) {  // the range ends inside a row: the next warp has the rest
    float s = s0 + s1;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) atomicAdd(out + row, s);
  }
}

// The floor: every byte of the matrix read once (16-byte streaming loads, 4 in flight a thread).
__global__ void __launch_bounds__(512)
    StreamRead(const uint4* __restrict__ w, int64_t n16, uint32_t* __restrict__ sink) {
  PdlWait();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  uint32_t acc = 0;
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * stride < n16; i += 4 * stride) {
    uint4 v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) v[u] = __ldcs(w + i + u * stride);
#pragma unroll
    for (int u = 0; u < 4; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n16; i += stride) {
    const uint4 v = __ldcs(w + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) *sink = acc;  // keeps the loads; practically never true
}

struct Config {
  int chunk, slots, warps, ctas_per_sm, whole_rows;
};

template <typename Kernel, typename... Args>
void LaunchPdl(Kernel kernel, int grid, int threads, int smem, cudaStream_t st, Args... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(threads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = st;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  CK(cudaLaunchKernelEx(&cfg, kernel, args...));
}

using GemvFn = void (*)(const uint8_t*, const __nv_bfloat16*, float*, int, int, int, int);

GemvFn GemvFor(int chunk) {
  switch (chunk) {
    case 1024:
      return BulkGemv<1024>;
    case 2048:
      return BulkGemv<2048>;
    case 4096:
      return BulkGemv<4096>;
  }
  return nullptr;
}

// Median per-launch time of a graph of `chain` PDL launches over the copies, `reps` replays.
template <typename Launch>
double ChainUs(cudaStream_t st, int chain, int reps, Launch launch) {
  cudaGraph_t g;
  cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < chain; ++i) launch(i);
  CK(cudaStreamEndCapture(st, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  CK(cudaGraphLaunch(ge, st));  // warm-up
  CK(cudaStreamSynchronize(st));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<double> v;
  for (int r = 0; r < reps; ++r) {
    CK(cudaEventRecord(e0, st));
    CK(cudaGraphLaunch(ge, st));
    CK(cudaEventRecord(e1, st));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    v.push_back(ms * 1000.0 / chain);
  }
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

float Bf16ToFloat(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 10;
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  std::printf("device %s, %d SMs, L2 %d MB\n", prop.name, sms, prop.l2CacheSize >> 20);
  const ProbeShape shapes[] = {{"8B.qkv", 6144, 4096},      {"8B.o", 4096, 4096},
                               {"8B.gate_up", 28672, 4096}, {"8B.down", 4096, 14336},
                               {"1B.qkv", 3072, 2048},      {"1B.o", 2048, 2048},
                               {"1B.gate_up", 16384, 2048}, {"1B.down", 2048, 8192}};
  const Config configs[] = {{2048, 4, 8, 2, 0}, {2048, 6, 8, 2, 0},  {1024, 8, 8, 2, 0},
                            {4096, 3, 8, 2, 0}, {2048, 4, 16, 1, 0}, {2048, 8, 8, 1, 0},
                            {2048, 4, 8, 2, 1}, {2048, 6, 8, 2, 1}};
  const int64_t chain_bytes = int64_t{512} << 20;
  const int chain = 16;
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  uint32_t* sink;
  CK(cudaMalloc(&sink, 4));
  std::printf(
      "shape\tn\tk\tMB\tvariant\tgrid\tchain_us\tstream_us\tof_stream\tGBps\tmax_rel_err\n");
  for (const ProbeShape& sh : shapes) {
    const int64_t w_bytes = int64_t{sh.n} * sh.k * 2;
    const int copies =
        static_cast<int>(std::max<int64_t>(2, (chain_bytes + w_bytes - 1) / w_bytes));
    uint8_t* w;
    __nv_bfloat16* x;
    float* out;
    CK(cudaMalloc(&w, w_bytes * copies));
    CK(cudaMalloc(&x, sh.k * 2));
    CK(cudaMalloc(&out, sh.n * sizeof(float)));
    // Host data: copy 0 random, the others copies of it (the timing only needs distinct bytes).
    std::mt19937 rng(7 + sh.n);
    std::uniform_real_distribution<float> dist(-1.f, 1.f);
    std::vector<uint16_t> hw(static_cast<size_t>(sh.n) * sh.k), hx(sh.k);
    auto to_bf16 = [](float f) {
      uint32_t u;
      std::memcpy(&u, &f, 4);
      return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    };
    for (auto& v : hw) v = to_bf16(dist(rng));
    for (auto& v : hx) v = to_bf16(dist(rng));
    for (int c = 0; c < copies; ++c) {
      CK(cudaMemcpy(w + c * w_bytes, hw.data(), w_bytes, cudaMemcpyHostToDevice));
    }
    CK(cudaMemcpy(x, hx.data(), sh.k * 2, cudaMemcpyHostToDevice));
    std::vector<double> ref(sh.n);
    for (int r = 0; r < sh.n; ++r) {
      double s = 0;
      const uint16_t* wr = hw.data() + static_cast<size_t>(r) * sh.k;
      for (int i = 0; i < sh.k; ++i) s += double(Bf16ToFloat(wr[i])) * Bf16ToFloat(hx[i]);
      ref[r] = s;
    }
    // The floor in the same chain form.
    const int stream_grid = sms * 4;
    const double stream_us = ChainUs(st, chain, reps, [&](int i) {
      LaunchPdl(StreamRead, stream_grid, 512, 0, st,
                reinterpret_cast<const uint4*>(w + (i % copies) * w_bytes), w_bytes / 16, sink);
    });
    for (const Config& cf : configs) {
      char name[64];
      std::snprintf(name, sizeof name, "bulk c%d s%d w%d x%d%s", cf.chunk, cf.slots, cf.warps,
                    cf.ctas_per_sm, cf.whole_rows ? " rows" : "");
      if ((sh.k * 2) % cf.chunk != 0) {
        std::printf("%s\t%d\t%d\t%.1f\t%s\tskipped: row not a multiple of the chunk\n", sh.name,
                    sh.n, sh.k, w_bytes / 1e6, name);
        continue;
      }
      GemvFn fn = GemvFor(cf.chunk);
      const int smem = ((sh.k * 2 + 127) & ~127) + cf.warps * cf.slots * (cf.chunk + 8);
      CK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      int occ = 0;
      CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, fn, cf.warps * 32, smem));
      if (occ == 0) {
        std::printf("%s\t%d\t%d\t%.1f\t%s\tskipped: %d B of shared memory do not fit\n", sh.name,
                    sh.n, sh.k, w_bytes / 1e6, name, smem);
        continue;
      }
      const int grid = sms * std::min(occ, cf.ctas_per_sm);
      // Correctness: one launch on copy 0 into a zeroed output.
      CK(cudaMemset(out, 0, sh.n * sizeof(float)));
      LaunchPdl(fn, grid, cf.warps * 32, smem, st, static_cast<const uint8_t*>(w),
                static_cast<const __nv_bfloat16*>(x), out, sh.n, sh.k, cf.slots, cf.whole_rows);
      CK(cudaStreamSynchronize(st));
      std::vector<float> got(sh.n);
      CK(cudaMemcpy(got.data(), out, sh.n * sizeof(float), cudaMemcpyDeviceToHost));
      double max_rel = 0;
      for (int r = 0; r < sh.n; ++r) {
        max_rel = std::max(max_rel, std::fabs(got[r] - ref[r]) / (std::sqrt(double(sh.k)) * 0.33));
      }
      const double us = ChainUs(st, chain, reps, [&](int i) {
        LaunchPdl(fn, grid, cf.warps * 32, smem, st,
                  static_cast<const uint8_t*>(w + (i % copies) * w_bytes),
                  static_cast<const __nv_bfloat16*>(x), out, sh.n, sh.k, cf.slots, cf.whole_rows);
      });
      std::printf("%s\t%d\t%d\t%.1f\t%s\t%d\t%.2f\t%.2f\t%.3f\t%.0f\t%.2e%s\n", sh.name, sh.n, sh.k,
                  w_bytes / 1e6, name, grid, us, stream_us, stream_us / us, w_bytes / us / 1e3,
                  max_rel, max_rel > 1e-4 ? "\tMISMATCH" : "");
      std::fflush(stdout);
    }
    CK(cudaFree(w));
    CK(cudaFree(x));
    CK(cudaFree(out));
  }
  return 0;
}
