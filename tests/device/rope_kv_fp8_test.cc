// The RoPE + KV write kernel (kernels/model/rope_kv_kernels.cu) into FP8 pages: V codes bit for
// bit QuantizeFp8 of the same fp32 values (every code's value, the ties between neighbouring
// codes, subnormals, saturation, infinities, NaN, signed zero and random magnitudes, at a unit
// and a non-power-of-two scale), rotated K codes within one code step of the host's rotation, and
// graph-padding tokens (slot -1) writing nothing. Label: device.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/attention/fp8_kv.h"
#include "kernels/common/fp8.h"
#include "kernels/model/model_kernels.h"
#include "worker/cuda_backend/device_buffer.h"

namespace pkv {
namespace {

using cuda_backend::DeviceBuffer;

constexpr int kTokens = 24, kHq = 2, kHkv = 2, kD = 64, kPageSize = 16, kPages = 3;
constexpr int kRow = (kHq + 2 * kHkv) * kD;
constexpr int64_t kPoolElems = int64_t{kPages} * kHkv * kPageSize * kD;

// Values in code units (before the scale): every finite code, the midpoints of neighbours (ties
// round to the even code), just past them, and the edge cases; then random magnitudes.
std::vector<float> CodeSpaceValues(Fp8Format f, std::mt19937& rng, size_t n) {
  std::vector<float> v;
  std::vector<float> finite;
  for (int c = 0; c < 128; ++c) {
    const float x = Fp8ToFloat(static_cast<uint8_t>(c), f);
    if (std::isfinite(x)) finite.push_back(x);
  }
  for (size_t i = 0; i < finite.size(); ++i) {
    v.push_back(finite[i]);
    v.push_back(-finite[i]);
    if (i + 1 < finite.size()) {
      const float mid = 0.5f * (finite[i] + finite[i + 1]);
      v.push_back(mid);
      v.push_back(-mid);
      v.push_back(std::nextafter(mid, 1e30f));
      v.push_back(std::nextafter(mid, 0.f));
    }
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (float x : {0.f, -0.f, inf, -inf, std::numeric_limits<float>::quiet_NaN(), 1e30f, -1e30f,
                  Fp8MaxFinite(f) * 1.07f, 1e-30f, -1e-42f}) {
    v.push_back(x);
  }
  std::uniform_real_distribution<float> e(-12.f, 10.f);
  std::bernoulli_distribution neg(0.5);
  while (v.size() < n) v.push_back((neg(rng) ? -1.f : 1.f) * std::exp2(e(rng)));
  std::shuffle(v.begin(), v.end(), rng);
  v.resize(n);
  return v;
}

struct Written {
  std::vector<uint8_t> k, v;
};

Written RunKernel(const std::vector<float>& qkv, const std::vector<int32_t>& positions,
                  const std::vector<int32_t>& slots, const std::vector<double>& inv_freq,
                  KvCacheDtype kv, Fp8KvScales scales) {
  auto upload = [](const void* src, int64_t bytes) {
    DeviceBuffer b = *DeviceBuffer::Allocate(bytes);
    EXPECT_EQ(cudaMemcpy(b.get(), src, bytes, cudaMemcpyHostToDevice), cudaSuccess);
    return b;
  };
  DeviceBuffer dqkv = upload(qkv.data(), qkv.size() * 4);
  DeviceBuffer dpos = upload(positions.data(), kTokens * 4),
               dslot = upload(slots.data(), kTokens * 4);
  DeviceBuffer dfreq = upload(inv_freq.data(), inv_freq.size() * 8);
  DeviceBuffer dq = *DeviceBuffer::Allocate(int64_t{kTokens} * kHq * kD * 2);
  DeviceBuffer dk = *DeviceBuffer::Allocate(kPoolElems), dv = *DeviceBuffer::Allocate(kPoolElems);
  EXPECT_EQ(cudaMemset(dk.get(), 0xaa, kPoolElems), cudaSuccess);  // "never written" sentinel
  EXPECT_EQ(cudaMemset(dv.get(), 0xaa, kPoolElems), cudaSuccess);
  gpu::QkvRopeArgs a;
  a.dtype = gpu::DType::kBFloat16;
  a.qkv = static_cast<const float*>(dqkv.get());
  a.positions = static_cast<const int32_t*>(dpos.get());
  a.kv_slots = static_cast<const int32_t*>(dslot.get());
  a.inv_freq = static_cast<const double*>(dfreq.get());
  a.num_tokens = kTokens;
  a.num_q_heads = kHq;
  a.num_kv_heads = kHkv;
  a.head_dim = kD;
  a.page_size = kPageSize;
  a.q_out = dq.get();
  a.k_cache = dk.get();
  a.v_cache = dv.get();
  a.kv_dtype = kv;
  a.kv_scales = scales;
  const absl::Status st = gpu::LaunchQkvRopeKvWrite(a, nullptr);
  EXPECT_TRUE(st.ok()) << st;
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  Written w{std::vector<uint8_t>(kPoolElems), std::vector<uint8_t>(kPoolElems)};
  EXPECT_EQ(cudaMemcpy(w.k.data(), dk.get(), kPoolElems, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(w.v.data(), dv.get(), kPoolElems, cudaMemcpyDeviceToHost), cudaSuccess);
  return w;
}

TEST(RopeKvFp8WriteTest, CodesMatchHostQuantization) {
  std::mt19937 rng(1234);
  std::vector<double> inv_freq(kD / 2);
  for (int i = 0; i < kD / 2; ++i) inv_freq[i] = std::pow(10000.0, -2.0 * i / kD);
  std::vector<int32_t> positions(kTokens), slots(kTokens);
  std::vector<int32_t> perm(kPages * kPageSize);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  for (int t = 0; t < kTokens; ++t) {
    positions[t] = static_cast<int32_t>(rng() % 5000);
    slots[t] = t == 5 ? -1 : perm[t];  // token 5: graph padding
  }
  for (KvCacheDtype kv : {KvCacheDtype::kFp8E4M3, KvCacheDtype::kFp8E5M2}) {
    const Fp8Format f = Fp8FormatOf(kv);
    for (Fp8KvScales scales : {Fp8KvScales{1.f, 1.f}, Fp8KvScales{0.37f, 2.5f}}) {
      SCOPED_TRACE(absl::StrCat(KvCacheDtypeName(kv), " scales k=", scales.k, " v=", scales.v));
      const std::vector<float> vals = CodeSpaceValues(f, rng, size_t{kTokens} * kHkv * kD);
      std::uniform_real_distribution<float> u(-1.f, 1.f);
      std::vector<float> qkv(size_t{kTokens} * kRow);
      for (int t = 0; t < kTokens; ++t) {
        for (int i = 0; i < (kHq + kHkv) * kD; ++i) qkv[t * kRow + i] = 100.f * u(rng) * scales.k;
        for (int i = 0; i < kHkv * kD; ++i) {
          qkv[t * kRow + (kHq + kHkv) * kD + i] = vals[t * kHkv * kD + i] * scales.v;
        }
      }
      const Written w = RunKernel(qkv, positions, slots, inv_freq, kv, scales);
      const float inv_k = 1.f / scales.k, inv_v = 1.f / scales.v;
      int64_t bad_v = 0, bad_k = 0, written = 0;
      for (int t = 0; t < kTokens; ++t) {
        if (slots[t] < 0) continue;
        const int64_t page = slots[t] / kPageSize, off = slots[t] % kPageSize;
        for (int h = 0; h < kHkv; ++h) {
          const int64_t base = ((page * kHkv + h) * kPageSize + off) * kD;
          const float* vsrc = &qkv[t * kRow + (kHq + kHkv + h) * kD];
          const float* ksrc = &qkv[t * kRow + (kHq + h) * kD];
          for (int i = 0; i < kD; ++i) {
            // The kernel adds the (absent) bias as +0, which turns -0 into +0: the same here.
            const uint8_t want = FloatToFp8((vsrc[i] + 0.f) * inv_v, f);
            if (w.v[base + i] != want && bad_v++ < 5) {
              ADD_FAILURE() << "V token " << t << " head " << h << " dim " << i << ": x " << vsrc[i]
                            << " code " << int{w.v[base + i]} << " want " << int{want};
            }
          }
          for (int i = 0; i < kD / 2; ++i) {
            const double ang = static_cast<double>(positions[t]) * inv_freq[i];
            const float c = static_cast<float>(std::cos(ang)),
                        s = static_cast<float>(std::sin(ang));
            const float x1 = ksrc[i], x2 = ksrc[i + kD / 2];
            const float r[2] = {x1 * c - x2 * s, x2 * c + x1 * s};
            for (int j = 0; j < 2; ++j) {
              const int64_t at = base + i + j * (kD / 2);
              const float got = Fp8ToFloat(w.k[at], f);
              const float want = Fp8ToFloat(FloatToFp8(r[j] * inv_k, f), f);
              // One code step: the rotation's float rounding (FMA on the device) may move a
              // value across a rounding boundary.
              const float step = std::abs(want) * (f == Fp8Format::kE4M3 ? 0.125f : 0.25f) + 0.002f;
              if (!(std::abs(got - want) <= step) && bad_k++ < 5) {
                ADD_FAILURE() << "K token " << t << " dim " << i + j * (kD / 2) << ": " << got
                              << " want " << want;
              }
            }
          }
          written += kD;
        }
      }
      EXPECT_EQ(written, int64_t{kTokens - 1} * kHkv * kD);
      // Slots never named keep the sentinel: the padding token wrote nothing.
      std::vector<bool> named(kPages * kPageSize, false);
      for (int32_t s : slots) {
        if (s >= 0) named[s] = true;
      }
      for (int s = 0; s < kPages * kPageSize; ++s) {
        if (named[s]) continue;
        const int64_t page = s / kPageSize, off = s % kPageSize;
        for (int h = 0; h < kHkv; ++h) {
          const int64_t base = ((page * kHkv + h) * kPageSize + off) * kD;
          for (int i = 0; i < kD; ++i) {
            ASSERT_EQ(w.k[base + i], 0xaa) << "slot " << s;
            ASSERT_EQ(w.v[base + i], 0xaa) << "slot " << s;
          }
        }
      }
    }
  }
}

TEST(RopeKvFp8WriteTest, RejectsNonPositiveScales) {
  gpu::QkvRopeArgs a;
  a.head_dim = kD;
  a.kv_dtype = KvCacheDtype::kFp8E4M3;
  a.kv_scales = Fp8KvScales{0.f, 1.f};
  EXPECT_EQ(gpu::LaunchQkvRopeKvWrite(a, nullptr).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pkv
