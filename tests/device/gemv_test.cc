// The fused few-token GEMV (kernels/model/gemv.h) against double-precision host references, on
// fresh random data with poisoned outputs: every input mode and epilogue, 1..8 tokens, split-K
// plans (forced by planning for a few SMs) and unsplit ones, x staged in shared memory (over a
// part or all of k) or read per step, masked last tiles, both dtypes and
// every weight format (dense, 4-bit, fp8: the reference uses the dequantized weights, see
// gemv_test_util.h for the oracle and bound); and two dependent launches under programmatic
// dependent launch, where the second normalises its input from the sums of squares the first
// left.
#include "kernels/model/gemv.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/device/gemv_test_util.h"
#include "tests/harness/test_seed.h"

namespace pkv::gemv_test {
namespace {

// kSiluMul's output act[t][j] of `p` (rows 0..inter-1 gate, inter.. up) against silu(g) * u of the
// references, within the input rounding and the two 16-bit roundings of gate and up, through
// silu' <= 1.1. Returns the mismatches (the first three reported).
int CheckSiluMul(const Problem& p, const std::vector<uint16_t>& got, int32_t inter,
                 const std::string& what) {
  int bad = 0;
  for (int32_t t = 0; t < p.tokens; ++t) {
    for (int32_t j = 0; j < inter; ++j) {
      double mg, mu;
      const double g = p.Ref(t, j, &mg), u = p.Ref(t, inter + j, &mu);
      const double want = g / (1 + std::exp(-g)) * u;
      const double tol = 4e-3 * (mg * std::abs(u) * 1.1 + mu * std::abs(g)) +
                         2 * Ulp16(want, p.bf16) + Ulp16(g, p.bf16) * std::abs(u) * 1.1 +
                         Ulp16(u, p.bf16) * std::abs(g);
      const float v = From16(got[int64_t{t} * inter + j], p.bf16);
      if (!(std::abs(v - want) <= tol) && bad++ < 3) {
        ADD_FAILURE() << what << " t=" << t << " j=" << j << " got " << v << " want " << want;
      }
    }
  }
  return bad;
}

// kResidual: the new residual x1 = x0 + y (+ bias) of `p` and each 16-row tile's sum of squares
// of x1 (sum_sq [tile][8]). Returns the mismatches (the first three reported).
int CheckResidual(const Problem& p, const std::vector<float>& x0, const float* bias,
                  const std::vector<float>& x1, const std::vector<float>& sum_sq,
                  const std::string& what) {
  const int32_t n = p.n;
  int bad = 0;
  for (int32_t t = 0; t < p.tokens; ++t) {
    for (int32_t r = 0; r < n; ++r) {
      double mag;
      const double y = p.Ref(t, r, &mag);
      const int64_t i = int64_t{t} * n + r;
      const double want = x0[i] + y + (bias != nullptr ? bias[r] : 0.f);
      if (!(std::abs(x1[i] - want) <= 4e-3 * mag + Ulp16(y, p.bf16) + 1e-5) && bad++ < 3) {
        ADD_FAILURE() << what << " t=" << t << " row=" << r << " got " << x1[i] << " want " << want;
      }
    }
    for (int32_t tile = 0; tile < n / 16; ++tile) {  // from the kernel's own new residual
      double s = 0;
      for (int32_t r = 0; r < 16; ++r)
        s += double(x1[int64_t{t} * n + tile * 16 + r]) * x1[int64_t{t} * n + tile * 16 + r];
      const float g = sum_sq[tile * 8 + t];
      if (!(std::abs(g - s) <= 1e-5 * s + 1e-6) && bad++ < 3) {
        ADD_FAILURE() << what << " sum_sq tile " << tile << " t=" << t << " got " << g << " want "
                      << s;
      }
    }
  }
  return bad;
}

class GemvTest : public ::testing::TestWithParam<GemvCase> {
 protected:
  bool bf16() const { return GetParam().bf16; }
  int32_t K(int32_t k) const { return KFor(GetParam(), k); }
  std::mt19937 rng_{::pkv::testing::TestSeed()};
};

TEST_P(GemvTest, StoreMatchesReference) {
  struct Shape {
    int32_t n, k;
  };
  int32_t tokens = 1;
  for (const Shape& sh : std::vector<Shape>{{37, 64}, {300, 1024}, {1000, 4096}, {64, 2048}}) {
    for (bool rms : {false, true}) {
      // {64, 1, 48 KB}, {66, 1, 48 KB}: x staged over all of k (grid 64 of 3 parts) or over a
      // part (grid 66), with several items per CTA; {3, 1}: never staged.
      for (const gpu::GemvDevice& dev :
           {RealDevice(GetParam()), gpu::GemvDevice{3, 1}, gpu::GemvDevice{64, 1, 48 << 10},
            gpu::GemvDevice{66, 1, 48 << 10}}) {
        const Problem p = MakeProblem(GetParam(), sh.n, K(sh.k), tokens, rms, &rng_);
        DeviceProblem d = Stage(p, 16, dev);
        const bool f32 = (tokens + sh.n) % 2 == 0;
        const int64_t out_bytes = int64_t{p.tokens} * p.n * (f32 ? 4 : 2);
        DeviceBuffer y = Poisoned(out_bytes + 64);
        d.args.y = y.get();
        d.args.y_f32 = f32;
        const std::string what = What(p, d.args, "store");
        ASSERT_TRUE(gpu::LaunchGemv(d.args, nullptr).ok()) << what;
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
        const std::vector<uint8_t> got = Download<uint8_t>(y, out_bytes + 64);
        for (int i = 0; i < 64; ++i) ASSERT_EQ(got[out_bytes + i], 0xff) << what << ": overrun";
        const int bad = CheckStore(p, got, f32, what);
        EXPECT_EQ(bad, 0) << what;
        tokens = tokens % gpu::kGemvMaxTokens + 1;
      }
    }
  }
}

TEST_P(GemvTest, ResidualAddAndSumsOfSquares) {
  int32_t tokens = 2;
  for (int32_t n : {64, 512, 4096}) {
    // 64 "SMs" of one CTA: split-K plans for the two smaller n (4 parts).
    for (const gpu::GemvDevice& dev : {RealDevice(GetParam()), gpu::GemvDevice{64, 1}}) {
      const Problem p = MakeProblem(GetParam(), n, K(2048), tokens, /*rmsnorm=*/false, &rng_);
      DeviceProblem d = Stage(p, 16, dev);
      std::uniform_real_distribution<float> u(-2.f, 2.f);
      std::vector<float> x0(int64_t{tokens} * n), bias(n);
      for (float& v : x0) v = u(rng_);
      for (float& v : bias) v = u(rng_);
      DeviceBuffer res = Upload(x0), db = Upload(bias);
      DeviceBuffer ss = Poisoned(int64_t{n / 16} * 8 * 4);
      d.args.epilogue = gpu::GemvEpilogue::kResidual;
      d.args.residual = static_cast<float*>(res.get());
      d.args.bias = (n / 64) % 2 == 0 ? static_cast<const float*>(db.get()) : nullptr;
      d.args.sum_sq_out = static_cast<float*>(ss.get());
      const std::string what = What(p, d.args, "residual");
      ASSERT_TRUE(gpu::LaunchGemv(d.args, nullptr).ok()) << what;
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
      const std::vector<float> x1 = Download<float>(res, x0.size());
      const std::vector<float> got_ss = Download<float>(ss, int64_t{n / 16} * 8);
      EXPECT_EQ(
          CheckResidual(p, x0, d.args.bias != nullptr ? bias.data() : nullptr, x1, got_ss, what), 0)
          << what;
      tokens = tokens % gpu::kGemvMaxTokens + 1;
    }
  }
}

// q/k/v rows of H_q + 2 H_kv heads; RoPE on q and k; K/V into shuffled slots; one padding token.
TEST_P(GemvTest, RopeAndKvPageWrite) {
  struct Shape {
    int32_t hq, hkv, d, k;
  };
  constexpr int32_t kPage = 16, kPages = 8;
  int32_t tokens = 1;
  for (const Shape& sh : std::vector<Shape>{{4, 2, 16, 64}, {4, 2, 64, 1024}, {8, 2, 128, 512}}) {
    for (bool with_bias : {false, true}) {
      const int32_t n = (sh.hq + 2 * sh.hkv) * sh.d;
      const Problem p = MakeProblem(GetParam(), n, K(sh.k), tokens, /*rmsnorm=*/true, &rng_);
      DeviceProblem d = Stage(p, sh.d, with_bias ? gpu::GemvDevice{64, 1} : RealDevice(GetParam()));
      std::uniform_real_distribution<float> u(-0.5f, 0.5f);
      std::vector<float> bias(n);
      for (float& v : bias) v = u(rng_);
      std::vector<int32_t> positions(tokens), slots(tokens);
      std::vector<int32_t> perm(kPage * kPages);
      for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int32_t>(i);
      std::shuffle(perm.begin(), perm.end(), rng_);
      for (int32_t t = 0; t < tokens; ++t) {
        positions[t] = static_cast<int32_t>(rng_() % 100000);
        slots[t] = t == tokens - 1 && tokens > 1 ? -1 : perm[t];  // the last token: padding
      }
      std::vector<double> inv_freq(sh.d / 2);
      for (int32_t i = 0; i < sh.d / 2; ++i) inv_freq[i] = std::pow(10000.0, -2.0 * i / sh.d);
      const int64_t cache_elems = int64_t{kPages} * sh.hkv * kPage * sh.d;
      DeviceBuffer db = Upload(bias), dpos = Upload(positions), dslot = Upload(slots),
                   dfreq = Upload(inv_freq);
      DeviceBuffer q = Poisoned(int64_t{tokens} * sh.hq * sh.d * 2);
      DeviceBuffer kc = Poisoned(cache_elems * 2), vc = Poisoned(cache_elems * 2);
      gpu::GemvArgs& a = d.args;
      a.epilogue = gpu::GemvEpilogue::kRopeKv;
      a.bias = with_bias ? static_cast<const float*>(db.get()) : nullptr;
      a.positions = static_cast<const int32_t*>(dpos.get());
      a.kv_slots = static_cast<const int32_t*>(dslot.get());
      a.inv_freq = static_cast<const double*>(dfreq.get());
      a.num_q_heads = sh.hq;
      a.num_kv_heads = sh.hkv;
      a.head_dim = sh.d;
      a.page_size = kPage;
      a.q_out = q.get();
      a.k_cache = kc.get();
      a.v_cache = vc.get();
      const std::string what = What(p, a, "rope");
      ASSERT_TRUE(gpu::LaunchGemv(a, nullptr).ok()) << what;
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
      const std::vector<uint16_t> gq = Download<uint16_t>(q, int64_t{tokens} * sh.hq * sh.d);
      const std::vector<uint16_t> gk = Download<uint16_t>(kc, cache_elems);
      const std::vector<uint16_t> gv = Download<uint16_t>(vc, cache_elems);
      std::vector<bool> written(cache_elems, false);
      int bad = 0;
      const int32_t half = sh.d / 2;
      for (int32_t t = 0; t < tokens; ++t) {
        for (int32_t h = 0; h < sh.hq + 2 * sh.hkv; ++h) {
          const bool is_q = h < sh.hq, is_k = !is_q && h < sh.hq + sh.hkv;
          if (!is_q && slots[t] < 0) continue;
          for (int32_t i = 0; i < half; ++i) {
            double m1, m2;
            const int32_t r1 = h * sh.d + i, r2 = r1 + half;
            double y1 = p.Ref(t, r1, &m1) + (with_bias ? bias[r1] : 0.f);
            double y2 = p.Ref(t, r2, &m2) + (with_bias ? bias[r2] : 0.f);
            if (is_q || is_k) {
              const double ang = double(positions[t]) * inv_freq[i];
              const double c = std::cos(ang), s = std::sin(ang), o1 = y1 * c - y2 * s;
              y2 = y2 * c + y1 * s;
              y1 = o1;
            }
            int64_t base;
            const std::vector<uint16_t>* dst;
            if (is_q) {
              base = (int64_t{t} * sh.hq + h) * sh.d;
              dst = &gq;
            } else {
              const int64_t kvh = is_k ? h - sh.hq : h - sh.hq - sh.hkv;
              base = ((int64_t{slots[t] / kPage} * sh.hkv + kvh) * kPage + slots[t] % kPage) * sh.d;
              dst = is_k ? &gk : &gv;
              if (is_k) written[base + i] = written[base + i + half] = true;
            }
            const double tol = 4e-3 * (m1 + m2) + Ulp16(std::abs(y1) + std::abs(y2), bf16());
            const float g1 = From16((*dst)[base + i], bf16()),
                        g2 = From16((*dst)[base + i + half], bf16());
            if (!(std::abs(g1 - y1) <= tol && std::abs(g2 - y2) <= tol) && bad++ < 3) {
              ADD_FAILURE() << what << " t=" << t << " head " << h << " i=" << i << " got " << g1
                            << ", " << g2 << " want " << y1 << ", " << y2;
            }
          }
        }
      }
      for (int64_t e = 0; e < cache_elems; ++e) {  // nothing else in the cache was touched
        if (!written[e] && gk[e] != 0xffff && bad++ < 3) ADD_FAILURE() << what << " stray K write";
      }
      EXPECT_EQ(bad, 0) << what;
      tokens = tokens % gpu::kGemvMaxTokens + 1;
    }
  }
}

TEST_P(GemvTest, SiluMulOfGateAndUp) {
  int32_t tokens = 3;
  for (int32_t inter : {64, 384, 1024}) {
    for (const gpu::GemvDevice& dev : {RealDevice(GetParam()), gpu::GemvDevice{16, 1}}) {
      const Problem p =
          MakeProblem(GetParam(), 2 * inter, K(1024), tokens, /*rmsnorm=*/true, &rng_);
      DeviceProblem d = Stage(p, 2 * inter, dev);
      DeviceBuffer act = Poisoned(int64_t{tokens} * inter * 2);
      d.args.epilogue = gpu::GemvEpilogue::kSiluMul;
      d.args.act = act.get();
      const std::string what = What(p, d.args, "silu");
      ASSERT_TRUE(gpu::LaunchGemv(d.args, nullptr).ok()) << what;
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
      const std::vector<uint16_t> got = Download<uint16_t>(act, int64_t{tokens} * inter);
      EXPECT_EQ(CheckSiluMul(p, got, inter, what), 0) << what;
      tokens = tokens % gpu::kGemvMaxTokens + 1;
    }
  }
}

// o-style residual GEMV, then a gate/up-style GEMV normalising the new residual from the first
// one's sums of squares, twice, back to back on one stream with PDL where usable: the contract
// between the kernels (sum_sq_out -> sum_sq_parts), the launch ordering, and that a kernel
// started early sees the previous kernel's writes.
TEST_P(GemvTest, ChainedLaunchesUnderPdl) {
  absl::StatusOr<bool> pdl = gpu::PdlUsable(0);
  ASSERT_TRUE(pdl.ok()) << pdl.status();
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  const gpu::GemvDevice dev = RealDevice(GetParam());
  for (int32_t tokens : {1, 5, 8}) {
    constexpr int32_t kHidden = 1024, kIn = 512, kOut = 768;
    const Problem first = MakeProblem(GetParam(), kHidden, K(kIn), tokens, false, &rng_);
    DeviceProblem a = Stage(first, 16, dev);
    std::vector<float> x0(int64_t{tokens} * kHidden);
    std::uniform_real_distribution<float> u(-2.f, 2.f);
    for (float& v : x0) v = u(rng_);
    DeviceBuffer res = Upload(x0), ss = Poisoned(int64_t{kHidden / 16} * 8 * 4);
    a.args.epilogue = gpu::GemvEpilogue::kResidual;
    a.args.residual = static_cast<float*>(res.get());
    a.args.sum_sq_out = static_cast<float*>(ss.get());
    a.args.pdl = *pdl;
    // The second projection's weights and norm weight (its input is the first one's output).
    Problem second = MakeProblem(GetParam(), kOut, K(kHidden), tokens, true, &rng_);
    DeviceProblem b = Stage(second, 16, dev);
    b.args.x = res.get();
    b.args.sum_sq_parts = static_cast<const float*>(ss.get());
    DeviceBuffer y = Poisoned(int64_t{tokens} * kOut * 4);
    b.args.y = y.get();
    b.args.y_f32 = true;
    b.args.pdl = *pdl;
    b.args.prefetch_steps = 4;
    // A, B, A, B: the second B reads the residual the second A rewrote, on SMs whose caches the
    // first B filled with its old values, and its sums of squares; both must be the new ones.
    for (int round = 0; round < 2; ++round) {
      ASSERT_TRUE(gpu::LaunchGemv(a.args, stream).ok());
      ASSERT_TRUE(gpu::LaunchGemv(b.args, stream).ok());
    }
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    const std::vector<float> x1 = Download<float>(res, x0.size());
    const std::vector<float> got = Download<float>(y, int64_t{tokens} * kOut);
    second.residual = x1;  // the reference normalises what the last A wrote
    for (int32_t t = 0; t < tokens; ++t) {
      double total = 0;
      for (int32_t i = 0; i < kHidden; ++i)
        total += double(x1[int64_t{t} * kHidden + i]) * x1[int64_t{t} * kHidden + i];
      const float inv = static_cast<float>(1.0 / std::sqrt(total / kHidden + 1e-5));
      for (int32_t i = 0; i < kHidden; ++i) {
        const int64_t j = int64_t{t} * kHidden + i;
        second.xin[j] = Round16(x1[j] * inv * second.norm_w[i], bf16());
      }
    }
    int bad = 0;
    for (int32_t t = 0; t < tokens; ++t) {
      for (int32_t r = 0; r < kOut; ++r) {
        double mag;
        const double ref = second.Ref(t, r, &mag);
        const float v = got[int64_t{t} * kOut + r];
        if (!(std::abs(v - ref) <= 4e-3 * mag + 1e-5) && bad++ < 3) {
          ADD_FAILURE() << "chained T=" << tokens << " pdl=" << *pdl << " t=" << t << " row=" << r
                        << " got " << v << " ref " << ref;
        }
      }
    }
    EXPECT_EQ(bad, 0) << "T=" << tokens;
  }
  cudaStreamDestroy(stream);
}

// GemvArgs::bulk (gemv_bulk.cuh): one-token dense launches through the bulk-copy kernel, against
// the same references: stores (plain and normalized input, a masked last tile, several tiles a
// CTA), the SiLU pair epilogue, and the residual with its sums of squares; two tokens and a k
// that is not whole 2 KB chunks fall back to the register-batch kernel with the same results.
TEST_P(GemvTest, BulkOneTokenMatchesReference) {
  if (GetParam().format != gpu::GemvWeightFormat::kDense) GTEST_SKIP() << "dense weights only";
  absl::StatusOr<bool> pdl = gpu::PdlUsable(0);
  ASSERT_TRUE(pdl.ok()) << pdl.status();
  if (!*pdl) GTEST_SKIP() << "bulk copies need sm_90 code";
  const gpu::GemvDevice dev = RealDevice(GetParam());
  struct Shape {
    int32_t n, k, tokens;
  };
  for (const Shape& sh : std::vector<Shape>{{1000, 4096, 1},
                                            {28672, 4096, 1},
                                            {300, 14336, 1},
                                            {4096, 1024, 1},
                                            {1024, 2048, 1},
                                            {512, 1024, 2},
                                            {96, 1536, 1}}) {
    for (bool rms : {false, true}) {
      const Problem p = MakeProblem(GetParam(), sh.n, K(sh.k), sh.tokens, rms, &rng_);
      DeviceProblem d = Stage(p, 16, dev);
      d.args.bulk = true;
      d.args.pdl = *pdl;
      const int64_t out_bytes = int64_t{p.tokens} * p.n * 2;
      DeviceBuffer y = Poisoned(out_bytes + 64);
      d.args.y = y.get();
      const std::string what = What(p, d.args, "bulk store");
      ASSERT_TRUE(gpu::LaunchGemv(d.args, nullptr).ok()) << what;
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
      const std::vector<uint8_t> got = Download<uint8_t>(y, out_bytes + 64);
      for (int i = 0; i < 64; ++i) ASSERT_EQ(got[out_bytes + i], 0xff) << what << ": overrun";
      EXPECT_EQ(CheckStore(p, got, /*f32=*/false, what), 0) << what;
    }
  }
  // SiLU pairs: gate row j and up row inter + j in one warp (the 8B-like and llama-wide shapes)
  for (const auto& [inter, k] :
       std::vector<std::pair<int32_t, int32_t>>{{1536, 2048}, {2048, 1024}}) {
    const Problem p = MakeProblem(GetParam(), 2 * inter, K(k), 1, /*rmsnorm=*/true, &rng_);
    DeviceProblem d = Stage(p, 2 * inter, dev);
    DeviceBuffer act = Poisoned(int64_t{inter} * 2);
    d.args.epilogue = gpu::GemvEpilogue::kSiluMul;
    d.args.act = act.get();
    d.args.bulk = true;
    const std::string what = What(p, d.args, "bulk silu");
    ASSERT_TRUE(gpu::LaunchGemv(d.args, nullptr).ok()) << what;
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
    const std::vector<uint16_t> got = Download<uint16_t>(act, inter);
    EXPECT_EQ(CheckSiluMul(p, got, inter, what), 0) << what;
  }
  // residual += y, and each tile's sum of squares of the new residual (8B down, llama-wide down)
  for (const auto& [n, k] : std::vector<std::pair<int32_t, int32_t>>{{4096, 14336}, {1024, 2048}}) {
    const Problem p = MakeProblem(GetParam(), n, K(k), 1, /*rmsnorm=*/false, &rng_);
    DeviceProblem d = Stage(p, 16, dev);
    std::uniform_real_distribution<float> u(-2.f, 2.f);
    std::vector<float> x0(n);
    for (float& v : x0) v = u(rng_);
    DeviceBuffer res = Upload(x0), ss = Poisoned(int64_t{n / 16} * 8 * 4);
    d.args.epilogue = gpu::GemvEpilogue::kResidual;
    d.args.residual = static_cast<float*>(res.get());
    d.args.sum_sq_out = static_cast<float*>(ss.get());
    d.args.bulk = true;
    const std::string what = What(p, d.args, "bulk residual");
    ASSERT_TRUE(gpu::LaunchGemv(d.args, nullptr).ok()) << what;
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
    const std::vector<float> x1 = Download<float>(res, n);
    const std::vector<float> got_ss = Download<float>(ss, int64_t{n / 16} * 8);
    EXPECT_EQ(CheckResidual(p, x0, nullptr, x1, got_ss, what), 0) << what;
  }
}

TEST_P(GemvTest, RejectsBadArguments) {
  const Problem p = MakeProblem(GetParam(), 64, K(64), 1, false, &rng_);
  DeviceProblem d = Stage(p, 16, gpu::GemvDevice{4, 1});
  DeviceBuffer y = Poisoned(64 * 4);
  d.args.y = y.get();
  ASSERT_TRUE(gpu::LaunchGemv(d.args, nullptr).ok());
  gpu::GemvArgs a = d.args;
  a.tokens = 9;
  EXPECT_EQ(gpu::LaunchGemv(a, nullptr).code(), absl::StatusCode::kInvalidArgument);
  a = d.args;
  a.y = nullptr;
  EXPECT_EQ(gpu::LaunchGemv(a, nullptr).code(), absl::StatusCode::kInvalidArgument);
  a = d.args;
  a.x = static_cast<const uint8_t*>(a.x) + 2;  // misaligned
  EXPECT_EQ(gpu::LaunchGemv(a, nullptr).code(), absl::StatusCode::kInvalidArgument);
  a = d.args;
  a.epilogue = gpu::GemvEpilogue::kRopeKv;  // (plain, rope) has no kernel, and no RoPE args
  EXPECT_EQ(gpu::LaunchGemv(a, nullptr).code(), absl::StatusCode::kInvalidArgument);
  a = d.args;
  a.plan.grid = a.plan.items + 1;
  EXPECT_EQ(gpu::LaunchGemv(a, nullptr).code(), absl::StatusCode::kInvalidArgument);
  a = d.args;
  a.input = gpu::GemvInput::kRmsNorm;  // no norm weight / sums of squares
  EXPECT_EQ(gpu::LaunchGemv(a, nullptr).code(), absl::StatusCode::kInvalidArgument);
  if (GetParam().format != gpu::GemvWeightFormat::kDense) {
    a = d.args;
    a.w_scales = nullptr;  // quantized weights without their scales
    EXPECT_EQ(gpu::LaunchGemv(a, nullptr).code(), absl::StatusCode::kInvalidArgument);
    a = d.args;
    a.plan.format = gpu::GemvWeightFormat::kDense;  // plan and packing disagree
    EXPECT_EQ(gpu::LaunchGemv(a, nullptr).code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

INSTANTIATE_TEST_SUITE_P(Formats, GemvTest, ::testing::ValuesIn(AllCases()),
                         [](const ::testing::TestParamInfo<GemvCase>& i) {
                           return CaseName(i.param);
                         });

}  // namespace
}  // namespace pkv::gemv_test
