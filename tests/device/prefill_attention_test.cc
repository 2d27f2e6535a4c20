// The paged causal prefill-attention kernels (mma.sync, and the generic fallback) against the CPU
// reference (kernels/attention/reference.h): every output element, fresh random Q/K/V, outputs
// poisoned with NaN first, shuffled pages, awkward shapes (1 query, tile size +- 1, chunked rows
// with cached prefixes, page sizes 1, 5, 16, 128, groups 1, 4, 7).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/attention/reference.h"
#include "kernels/common/float16.h"
#include "kernels/model/model_kernels.h"
#include "kernels/prefill/prefill_launch.h"
#include "tests/harness/test_seed.h"
#include "worker/cuda_backend/device_buffer.h"

namespace pkv {
namespace {

using cuda_backend::DeviceBuffer;

struct PrefillCase {
  int32_t head_dim;
  bool bf16;
  int32_t num_q_heads;
  int32_t num_kv_heads;
  int32_t page_size;
  bool generic;  // run the generic kernel instead of the mma.sync one
};

std::string Name(const ::testing::TestParamInfo<PrefillCase>& i) {
  const PrefillCase& c = i.param;
  return absl::StrCat(c.generic ? "generic" : "mma", "_d", c.head_dim, c.bf16 ? "_bf16" : "_fp16",
                      "_h", c.num_q_heads, "x", c.num_kv_heads, "_ps", c.page_size);
}

// (start_pos, num_tokens) per row: single queries, tile size +- 1, chunks after cached prefixes.
const std::vector<std::pair<int32_t, int32_t>> kRows = {
    {0, 1}, {0, 63}, {0, 64}, {0, 65}, {100, 37}, {17, 200}, {130, 64}, {0, 129}, {5, 1}};

template <typename T>
uint16_t Bits(T v) {
  return v.bits;
}

template <typename T>
void RunCase(const PrefillCase& c, std::mt19937* rng) {
  const KvShape shape{c.num_q_heads, c.num_kv_heads, c.head_dim, c.page_size};
  std::vector<int32_t> qo_indptr{0}, lengths, page_indptr{0}, page_ids;
  std::vector<prefill::PrefillRow> rows;
  int32_t pages_needed = 0;
  for (auto [start, n] : kRows) pages_needed += (start + n + c.page_size - 1) / c.page_size;
  const int32_t pool = pages_needed + 7;
  std::vector<int32_t> perm(pool);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), *rng);
  int32_t next_page = 0;
  for (auto [start, n] : kRows) {
    const int32_t len = start + n, np = (len + c.page_size - 1) / c.page_size;
    rows.push_back({qo_indptr.back(), n, start, page_indptr.back()});
    for (int32_t p = 0; p < np; ++p) page_ids.push_back(perm[next_page++]);
    qo_indptr.push_back(qo_indptr.back() + n);
    page_indptr.push_back(static_cast<int32_t>(page_ids.size()));
    lengths.push_back(len);
  }
  const int64_t tokens = qo_indptr.back();
  const int64_t q_elems = tokens * c.num_q_heads * c.head_dim;
  const int64_t kv_elems = int64_t{pool} * shape.page_elems();
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  auto make = [&](float x) {
    if constexpr (std::is_same_v<T, BFloat16>)
      return ToBFloat16(x);
    else
      return ToHalf(x);
  };
  std::vector<T> q(q_elems), k(kv_elems), v(kv_elems);
  for (T& x : q) x = make(3.f * u(*rng));  // peaky softmax: a wrong key shows
  for (T& x : k) x = make(u(*rng));
  for (T& x : v) x = make(u(*rng));

  PagedKvView<const T> kv{k.data(), v.data(), pool, shape};
  BlockTableView table{page_indptr.data(), page_ids.data(), lengths.data(),
                       static_cast<int32_t>(lengths.size())};
  const float scale = 1.f / std::sqrt(static_cast<float>(c.head_dim));
  std::vector<float> ref(q_elems);
  ReferencePrefillAttention<T>(q.data(), qo_indptr.data(), kv, table, scale, ref.data());

  auto dev = [](int64_t bytes) { return *DeviceBuffer::Allocate(bytes); };
  DeviceBuffer dq = dev(q_elems * 2), dk = dev(kv_elems * 2), dv = dev(kv_elems * 2),
               dout = dev(q_elems * 2), dpages = dev(page_ids.size() * 4);
  ASSERT_EQ(cudaMemcpy(dq.get(), q.data(), q_elems * 2, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dk.get(), k.data(), kv_elems * 2, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dv.get(), v.data(), kv_elems * 2, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dpages.get(), page_ids.data(), page_ids.size() * 4, cudaMemcpyHostToDevice),
            cudaSuccess);
  ASSERT_EQ(cudaMemset(dout.get(), 0xff, q_elems * 2), cudaSuccess);  // NaN poison
  const prefill::DType dtype = c.bf16 ? prefill::DType::kBFloat16 : prefill::DType::kFloat16;
  if (c.generic) {
    std::vector<int32_t> positions, page_base;
    for (size_t r = 0; r < rows.size(); ++r) {
      for (int32_t i = 0; i < rows[r].num_tokens; ++i) {
        positions.push_back(rows[r].start_pos + i);
        page_base.push_back(rows[r].page_base);
      }
    }
    DeviceBuffer dpos = dev(tokens * 4), dbase = dev(tokens * 4);
    cudaMemcpy(dpos.get(), positions.data(), tokens * 4, cudaMemcpyHostToDevice);
    cudaMemcpy(dbase.get(), page_base.data(), tokens * 4, cudaMemcpyHostToDevice);
    gpu::GenericAttentionArgs a;
    a.dtype = dtype;
    a.q = dq.get();
    a.k_cache = dk.get();
    a.v_cache = dv.get();
    a.page_ids = static_cast<const int32_t*>(dpages.get());
    a.positions = static_cast<const int32_t*>(dpos.get());
    a.page_base = static_cast<const int32_t*>(dbase.get());
    a.num_tokens = static_cast<int32_t>(tokens);
    a.num_q_heads = c.num_q_heads;
    a.num_kv_heads = c.num_kv_heads;
    a.head_dim = c.head_dim;
    a.page_size = c.page_size;
    a.scale = scale;
    a.out = dout.get();
    ASSERT_TRUE(gpu::LaunchGenericAttention(a, nullptr).ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  } else {
    std::vector<prefill::PrefillTile> tiles;
    ASSERT_TRUE(prefill::PlanPrefillTiles(rows, &tiles).ok());
    DeviceBuffer dtiles = dev(tiles.size() * sizeof(prefill::PrefillTile));
    cudaMemcpy(dtiles.get(), tiles.data(), tiles.size() * sizeof(prefill::PrefillTile),
               cudaMemcpyHostToDevice);
    prefill::PrefillArgs a;
    a.dtype = dtype;
    a.q = dq.get();
    a.k_cache = dk.get();
    a.v_cache = dv.get();
    a.page_ids = static_cast<const int32_t*>(dpages.get());
    a.tiles = static_cast<const prefill::PrefillTile*>(dtiles.get());
    a.num_tiles = static_cast<int32_t>(tiles.size());
    a.num_q_heads = c.num_q_heads;
    a.num_kv_heads = c.num_kv_heads;
    a.head_dim = c.head_dim;
    a.page_size = c.page_size;
    a.scale = scale;
    a.out = dout.get();
    ASSERT_TRUE(prefill::ConfigurePrefillKernels().ok());
    const absl::Status st = prefill::LaunchPrefillAttention(a, nullptr);
    ASSERT_TRUE(st.ok()) << st;
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  std::vector<T> out(q_elems);
  ASSERT_EQ(cudaMemcpy(out.data(), dout.get(), q_elems * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  int64_t bad = 0;
  double max_err = 0;
  std::string first_bad;
  const double tol = c.bf16 ? 1.6e-2 : 4e-3;  // P is rounded to the 16-bit type for the PV MMA
  for (int64_t i = 0; i < q_elems; ++i) {
    const double g = ToFloat(out[i]), r = ref[i];
    const double err = std::abs(g - r);
    if (!(err <= tol + tol * std::abs(r))) {
      if (bad++ == 0) {
        const int64_t tok = i / (c.num_q_heads * c.head_dim);
        first_bad = absl::StrCat("token ", tok, " elem ", i, ": gpu ", g, " ref ", r);
      }
    }
    if (std::isfinite(err)) max_err = std::max(max_err, err);
  }
  EXPECT_EQ(bad, 0) << first_bad << " (max err " << max_err << ")";
}

class PrefillAttentionTest : public ::testing::TestWithParam<PrefillCase> {};

TEST_P(PrefillAttentionTest, MatchesReference) {
  std::mt19937 rng(::pkv::testing::TestSeed() + GetParam().head_dim * 131 + GetParam().page_size);
  for (int rep = 0; rep < 2; ++rep) {  // fresh inputs each repetition
    if (GetParam().bf16) {
      RunCase<BFloat16>(GetParam(), &rng);
    } else {
      RunCase<Half>(GetParam(), &rng);
    }
  }
}

// Split tiles (prefill_plan.h, the deterministic mode's split-KV): one row of `n` queries from
// position 0 planned three ways (whole, in chunks of 300 after cached prefixes, every query as a
// one-token row), each against the CPU reference, and the three outputs equal bit for bit.
template <typename T>
void RunSplitCase(int32_t head_dim, int32_t hq, int32_t hkv, int32_t page_size,
                  prefill::PrefillSplitRule rule, int32_t n, std::mt19937* rng) {
  rule.group = hq / hkv;  // the tiles pack a KV head's q heads
  const KvShape shape{hq, hkv, head_dim, page_size};
  const int32_t np = (n + page_size - 1) / page_size, pool = np + 3;
  std::vector<int32_t> perm(pool);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), *rng);
  std::vector<int32_t> page_ids(perm.begin(), perm.begin() + np);
  const int64_t q_elems = int64_t{n} * hq * head_dim, kv_elems = int64_t{pool} * shape.page_elems();
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  auto make = [&](float x) {
    if constexpr (std::is_same_v<T, BFloat16>)
      return ToBFloat16(x);
    else
      return ToHalf(x);
  };
  std::vector<T> q(q_elems), k(kv_elems), v(kv_elems);
  for (T& x : q) x = make(3.f * u(*rng));
  for (T& x : k) x = make(u(*rng));
  for (T& x : v) x = make(u(*rng));
  std::vector<int32_t> qo_indptr{0, n}, page_indptr{0, np}, lengths{n};
  PagedKvView<const T> kv{k.data(), v.data(), pool, shape};
  BlockTableView table{page_indptr.data(), page_ids.data(), lengths.data(), 1};
  const float scale = 1.f / std::sqrt(static_cast<float>(head_dim));
  std::vector<float> ref(q_elems);
  ReferencePrefillAttention<T>(q.data(), qo_indptr.data(), kv, table, scale, ref.data());

  auto dev = [](int64_t bytes) { return *DeviceBuffer::Allocate(bytes); };
  DeviceBuffer dq = dev(q_elems * 2), dk = dev(kv_elems * 2), dv = dev(kv_elems * 2),
               dout = dev(q_elems * 2), dpages = dev(page_ids.size() * 4), dpos = dev(n * 4),
               dpart = dev(prefill::PrefillSplitPartialBytes(n, hq, head_dim, rule));
  std::vector<int32_t> positions(n);
  std::iota(positions.begin(), positions.end(), 0);
  cudaMemcpy(dq.get(), q.data(), q_elems * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(dk.get(), k.data(), kv_elems * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(dv.get(), v.data(), kv_elems * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(dpages.get(), page_ids.data(), page_ids.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dpos.get(), positions.data(), n * 4, cudaMemcpyHostToDevice);
  ASSERT_TRUE(prefill::ConfigurePrefillKernels().ok());

  std::vector<std::vector<prefill::PrefillRow>> plans(3);
  plans[0] = {{0, n, 0, 0}};
  for (int32_t s = 0; s < n; s += 300) plans[1].push_back({s, std::min(300, n - s), s, 0});
  for (int32_t pos = 0; pos < n; ++pos) plans[2].push_back({pos, 1, pos, 0});
  std::vector<std::vector<T>> outs;
  for (const auto& rows : plans) {
    std::vector<prefill::PrefillTile> tiles;
    ASSERT_TRUE(prefill::PlanSplitPrefillTiles(rows, rule, &tiles).ok());
    DeviceBuffer dtiles = dev(tiles.size() * sizeof(prefill::PrefillTile));
    cudaMemcpy(dtiles.get(), tiles.data(), tiles.size() * sizeof(prefill::PrefillTile),
               cudaMemcpyHostToDevice);
    ASSERT_EQ(cudaMemset(dout.get(), 0xff, q_elems * 2), cudaSuccess);  // NaN poison
    ASSERT_EQ(cudaMemset(dpart.get(), 0xff, dpart.bytes()), cudaSuccess);
    prefill::PrefillArgs a;
    a.dtype = std::is_same_v<T, BFloat16> ? prefill::DType::kBFloat16 : prefill::DType::kFloat16;
    a.q = dq.get();
    a.k_cache = dk.get();
    a.v_cache = dv.get();
    a.page_ids = static_cast<const int32_t*>(dpages.get());
    a.tiles = static_cast<const prefill::PrefillTile*>(dtiles.get());
    a.num_tiles = static_cast<int32_t>(tiles.size());
    a.num_q_heads = hq;
    a.num_kv_heads = hkv;
    a.head_dim = head_dim;
    a.page_size = page_size;
    a.scale = scale;
    a.out = dout.get();
    a.split_partials = dpart.get();
    a.split_rule = rule;
    a.positions = static_cast<const int32_t*>(dpos.get());
    a.num_tokens = n;
    const absl::Status st = prefill::LaunchPrefillAttention(a, nullptr);
    ASSERT_TRUE(st.ok()) << st;
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    outs.emplace_back(q_elems);
    cudaMemcpy(outs.back().data(), dout.get(), q_elems * 2, cudaMemcpyDeviceToHost);
  }
  const double tol = std::is_same_v<T, BFloat16> ? 1.6e-2 : 4e-3;
  for (size_t p = 0; p < outs.size(); ++p) {
    int64_t bad = 0, differ = 0;
    std::string first_bad;
    for (int64_t i = 0; i < q_elems; ++i) {
      const double g = ToFloat(outs[p][i]), r = ref[i];
      if (!(std::abs(g - r) <= tol + tol * std::abs(r)) && bad++ == 0) {
        first_bad = absl::StrCat("plan ", p, " token ", i / (hq * head_dim), " elem ", i, ": gpu ",
                                 g, " ref ", r);
      }
      differ += Bits(outs[p][i]) != Bits(outs[0][i]);
    }
    EXPECT_EQ(bad, 0) << first_bad;
    EXPECT_EQ(differ, 0) << "plan " << p << " differs from the whole row's bits";
  }
}

TEST(PrefillSplitAttentionTest, MatchesReferenceAndIsBitwiseTheSameWhateverTheChunking) {
  std::mt19937 rng(::pkv::testing::TestSeed() + 77);
  RunSplitCase<BFloat16>(128, 8, 2, 16, {64, 4}, 1100, &rng);  // C doubles at 256 and 512
  RunSplitCase<Half>(128, 4, 1, 5, {64, 4}, 700, &rng);
  RunSplitCase<BFloat16>(64, 4, 2, 16, {256, 16}, 1500, &rng);
  RunSplitCase<Half>(64, 7, 7, 1, {128, 2}, 513, &rng);
}

INSTANTIATE_TEST_SUITE_P(Kernels, PrefillAttentionTest,
                         ::testing::Values(PrefillCase{64, true, 4, 2, 16, false},
                                           PrefillCase{64, false, 4, 2, 16, false},
                                           PrefillCase{128, true, 8, 2, 16, false},
                                           PrefillCase{128, false, 32, 8, 16, false},
                                           PrefillCase{128, true, 7, 1, 5, false},
                                           PrefillCase{64, true, 2, 2, 1, false},
                                           PrefillCase{128, true, 4, 1, 128, false},
                                           PrefillCase{16, true, 4, 2, 16, true},
                                           PrefillCase{64, false, 6, 2, 7, true},
                                           PrefillCase{128, true, 4, 4, 16, true}),
                         Name);

}  // namespace
}  // namespace pkv
