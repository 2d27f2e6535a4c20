#include "tests/device/gemv_test_util.h"

#include <cmath>
#include <cstring>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/common/float16.h"
#include "kernels/model/gemv_quant.h"

namespace pkv::gemv_test {
namespace {

using gpu::GemvWeightFormat;

void SetOracle(Problem* p, const std::vector<uint16_t>& w16) {
  p->wf.resize(w16.size());
  for (size_t i = 0; i < w16.size(); ++i) p->wf[i] = From16(w16[i], p->bf16);
}

// Asymmetric 4-bit groups: random nibbles and zero points, scales representable in the dtype;
// groups of 256 when 3 divides n (the repack repeats their word per 128 k), else 128.
void MakeInt4(Problem* p, std::mt19937* rng) {
  const int64_t n = p->n, k = p->k;
  const int32_t group = (k % 256 == 0 && n % 3 == 0) ? 256 : 128;
  std::vector<uint32_t> q(n * k / 8);
  for (uint32_t& v : q) v = (*rng)();
  std::vector<uint8_t> zero(n * k / group);
  std::vector<float> scale(zero.size());
  std::uniform_real_distribution<float> s(0.02f, 0.17f);
  for (size_t i = 0; i < zero.size(); ++i) {
    zero[i] = static_cast<uint8_t>((*rng)() % 16);
    scale[i] = Round16(s(*rng), p->bf16);
  }
  const decode::DType dt = p->bf16 ? decode::DType::kBFloat16 : decode::DType::kFloat16;
  absl::StatusOr<gpu::GemvInt4Weights> packed =
      gpu::RepackInt4ForGemv(n, k, group, q.data(), scale.data(), zero.data(), dt);
  ASSERT_TRUE(packed.ok()) << packed.status();
  p->packed = Bytes(packed->q);
  p->packed_scales = Bytes(packed->scales);
  SetOracle(p, gpu::DequantizeInt4ToDtype(n, k, group, q.data(), scale.data(), zero.data(), dt));
}

// Random e4m3 codes over the whole range (subnormals too, NaN codes excluded); per-tensor scale
// when 3 divides n, else per row.
void MakeFp8(Problem* p, std::mt19937* rng) {
  const int64_t n = p->n, k = p->k;
  std::vector<uint8_t> q(n * k);
  for (uint8_t& v : q) {
    do {
      v = static_cast<uint8_t>((*rng)());
    } while ((v & 0x7f) == 0x7f);
  }
  p->scale_count = n % 3 == 0 ? 1 : static_cast<int32_t>(n);
  std::vector<float> scale(p->scale_count);
  std::uniform_real_distribution<float> s(1e-3f, 4e-3f);
  for (float& v : scale) v = s(*rng);
  absl::StatusOr<gpu::GemvFp8Weights> packed =
      gpu::RepackFp8ForGemv(n, k, q.data(), scale.data(), p->scale_count);
  ASSERT_TRUE(packed.ok()) << packed.status();
  p->packed = packed->q;
  p->packed_scales = Bytes(packed->scales);
  const decode::DType dt = p->bf16 ? decode::DType::kBFloat16 : decode::DType::kFloat16;
  SetOracle(p, gpu::DequantizeFp8ToDtype(n, k, q.data(), scale.data(), p->scale_count, dt));
}

}  // namespace

std::string CaseName(const GemvCase& c) {
  const char* f = c.format == GemvWeightFormat::kInt4  ? "int4"
                  : c.format == GemvWeightFormat::kFp8 ? "fp8"
                                                       : "dense";
  return absl::StrCat(f, "_", c.bf16 ? "bf16" : "fp16");
}

std::vector<GemvCase> AllCases() {
  std::vector<GemvCase> all;
  for (GemvWeightFormat f :
       {GemvWeightFormat::kDense, GemvWeightFormat::kInt4, GemvWeightFormat::kFp8}) {
    for (bool bf16 : {true, false}) all.push_back({bf16, f});
  }
  return all;
}

uint16_t To16(float v, bool bf16) { return bf16 ? ToBFloat16(v).bits : ToHalf(v).bits; }
float From16(uint16_t b, bool bf16) { return bf16 ? ToFloat(BFloat16{b}) : ToFloat(Half{b}); }
float Round16(float v, bool bf16) { return From16(To16(v, bf16), bf16); }
double Ulp16(double v, bool bf16) { return std::abs(v) * (bf16 ? 1.0 / 128 : 1.0 / 1024) + 1e-6; }

DeviceBuffer Poisoned(int64_t bytes) {
  DeviceBuffer b = *DeviceBuffer::Allocate(bytes);
  cudaMemset(b.get(), 0xff, bytes);
  return b;
}

gpu::GemvDevice RealDevice(const GemvCase& c) {
  absl::StatusOr<gpu::GemvDevice> d =
      gpu::QueryGemvDevice(0, c.bf16 ? gpu::DType::kBFloat16 : gpu::DType::kFloat16, c.format);
  EXPECT_TRUE(d.ok()) << d.status();
  if (!d.ok()) return gpu::GemvDevice{1, 1};
  // x staged in every build (QueryGemvDevice budgets none with -DPKV_GEMV_X_STAGE=OFF): the
  // hand-made devices of the tests, budget 0, cover the per-step loads.
  if (d->x_stage_max_bytes == 0) d->x_stage_max_bytes = 64 << 10;
  return *d;
}

int32_t KFor(const GemvCase& c, int32_t k) {
  const int32_t m = gpu::GemvKMultiple(c.format);
  return (k + m - 1) / m * m;
}

double Problem::Ref(int32_t t, int32_t row, double* mag) const {
  double s = 0, m = 0;
  const float* x = &xin[int64_t{t} * k];
  const float* w = &wf[int64_t{row} * k];
  for (int32_t i = 0; i < k; ++i) {
    const double p = double(x[i]) * w[i];
    s += p;
    m += std::abs(p);
  }
  *mag = m;
  return s;
}

Problem MakeProblem(const GemvCase& cs, int32_t n, int32_t k, int32_t tokens, bool rmsnorm,
                    std::mt19937* rng) {
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  Problem p;
  p.cs = cs;
  p.bf16 = cs.bf16;
  p.n = n;
  p.k = k;
  p.tokens = tokens;
  if (cs.format == GemvWeightFormat::kInt4) {
    MakeInt4(&p, rng);
  } else if (cs.format == GemvWeightFormat::kFp8) {
    MakeFp8(&p, rng);
  } else {
    std::vector<uint16_t> w(int64_t{n} * k);
    for (uint16_t& v : w) v = To16(u(*rng), p.bf16);
    p.packed = Bytes(w);
    SetOracle(&p, w);
  }
  p.xin.resize(int64_t{tokens} * k);
  if (!rmsnorm) {
    p.x16.resize(p.xin.size());
    for (size_t i = 0; i < p.xin.size(); ++i) {
      p.x16[i] = To16(u(*rng), p.bf16);
      p.xin[i] = From16(p.x16[i], p.bf16);
    }
    return p;
  }
  p.residual.resize(p.xin.size());
  for (float& v : p.residual) v = 3.f * u(*rng);
  p.norm_w.resize(k);
  for (float& v : p.norm_w) v = 1.f + 0.5f * u(*rng);
  p.sum_sq.assign(int64_t{k / 16} * 8, 0.f);
  for (int32_t t = 0; t < tokens; ++t) {
    double total = 0;
    for (int32_t i = 0; i < k; ++i) {
      const float x = p.residual[int64_t{t} * k + i];
      p.sum_sq[(i / 16) * 8 + t] += x * x;
      total += double(x) * x;
    }
    const float inv = static_cast<float>(1.0 / std::sqrt(total / k + 1e-5));
    for (int32_t i = 0; i < k; ++i) {
      const int64_t j = int64_t{t} * k + i;
      p.xin[j] = Round16(p.residual[j] * inv * p.norm_w[i], p.bf16);
    }
  }
  return p;
}

DeviceProblem Stage(const Problem& p, int32_t group, const gpu::GemvDevice& dev) {
  DeviceProblem d;
  d.w = Upload(p.packed);
  const bool rms = !p.residual.empty();
  d.x = rms ? Upload(p.residual) : Upload(p.x16);
  gpu::GemvArgs& a = d.args;
  a.dtype = p.bf16 ? gpu::DType::kBFloat16 : gpu::DType::kFloat16;
  absl::StatusOr<gpu::GemvPlan> plan = gpu::PlanGemv(p.n, p.k, group, dev, p.cs.format);
  EXPECT_TRUE(plan.ok()) << plan.status();
  a.plan = *plan;
  a.tokens = p.tokens;
  // Staged whenever the device's budget fits (not only where ChooseGemvStageX says it pays), so
  // both x paths run every input and epilogue; devices with budget 0 cover the per-step loads.
  a.stage_x = gpu::GemvStageX::kAlways;
  a.w = d.w.get();
  if (!p.packed_scales.empty()) {
    d.w_scales = Upload(p.packed_scales);
    a.w_scales = d.w_scales.get();
    a.w_scale_count = p.scale_count;
  }
  a.x = d.x.get();
  a.eps = 1e-5f;
  if (rms) {
    d.norm_w = Upload(p.norm_w);
    d.sum_sq = Upload(p.sum_sq);
    a.input = gpu::GemvInput::kRmsNorm;
    a.norm_weight = static_cast<const float*>(d.norm_w.get());
    a.sum_sq_parts = static_cast<const float*>(d.sum_sq.get());
    a.num_sum_sq_parts = p.k / 16;
  }
  d.partials = Poisoned(a.plan.partial_floats() * 4 + 16);
  d.tickets = *DeviceBuffer::Allocate(int64_t{a.plan.num_tickets()} * 4 + 16);
  cudaMemset(d.tickets.get(), 0, int64_t{a.plan.num_tickets()} * 4 + 16);
  a.partials = static_cast<float*>(d.partials.get());
  a.tickets = static_cast<int32_t*>(d.tickets.get());
  return d;
}

std::string What(const Problem& p, const gpu::GemvArgs& a, const char* mode) {
  return absl::StrCat(mode, " n=", p.n, " k=", p.k, " T=", p.tokens, " parts=", a.plan.parts,
                      " grid=", a.plan.grid, " ", CaseName(p.cs),
                      p.residual.empty() ? " plain" : " rmsnorm");
}

int CheckRows(const Problem& p, const std::vector<uint8_t>& got, bool f32,
              const std::vector<int32_t>& rows, const std::string& what) {
  int bad = 0;
  for (int32_t t = 0; t < p.tokens; ++t) {
    for (int32_t r : rows) {
      double mag;
      const double ref = p.Ref(t, r, &mag);
      const int64_t i = int64_t{t} * p.n + r;
      float v;
      if (f32) {
        std::memcpy(&v, &got[4 * i], 4);
      } else {
        uint16_t b;
        std::memcpy(&b, &got[2 * i], 2);
        v = From16(b, p.bf16);
      }
      const double tol = 4e-3 * mag + (f32 ? 1e-5 : Ulp16(ref, p.bf16));
      if (!(std::abs(v - ref) <= tol) && bad++ < 3) {
        ADD_FAILURE() << what << " t=" << t << " row=" << r << " got " << v << " ref " << ref;
      }
    }
  }
  return bad;
}

int CheckStore(const Problem& p, const std::vector<uint8_t>& got, bool f32,
               const std::string& what) {
  std::vector<int32_t> rows(p.n);
  std::iota(rows.begin(), rows.end(), 0);
  return CheckRows(p, got, f32, rows, what);
}

}  // namespace pkv::gemv_test
