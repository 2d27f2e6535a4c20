// KvPoolPages (kv_attention.h): how many KV pages the CUDA backend's pool takes from the free
// memory, a GPU memory limit and an explicit page count; host-only (no GPU needed).
#include <gtest/gtest.h>

#include "worker/cuda_backend/kv_attention.h"

namespace pkv::cuda_backend {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;
constexpr int64_t kPage = 2 * 1024 * 1024;  // bytes of one page over all layers, K and V

TEST(KvPoolPagesTest, FractionOfTheFreeMemoryWithoutALimit) {
  EXPECT_EQ(*KvPoolPages(0, 0.5, 10 * kGiB, std::nullopt, kPage), 5 * kGiB / kPage);
  EXPECT_EQ(*KvPoolPages(0, 1.0, 3 * kPage + 1, std::nullopt, kPage), 3);
}

// An 8B 4-bit model on an H200 limited like a 12 GB card: the pool is sized from what the limit
// leaves, not from the ~130 GiB the device has free.
TEST(KvPoolPagesTest, TheLimitCapsThePool) {
  const int64_t free_bytes = 130 * kGiB;
  const int64_t left = 12 * kGiB - 6 * kGiB;  // weights and buffers took 6 GiB of 12
  EXPECT_EQ(*KvPoolPages(0, 0.9, free_bytes, left, kPage),
            static_cast<int64_t>(0.9 * static_cast<double>(left)) / kPage);
  // A limit above the free memory changes nothing.
  EXPECT_EQ(*KvPoolPages(0, 0.9, 4 * kGiB, 100 * kGiB, kPage),
            *KvPoolPages(0, 0.9, 4 * kGiB, std::nullopt, kPage));
}

TEST(KvPoolPagesTest, ExplicitPagesMustFitTheLimit) {
  EXPECT_EQ(*KvPoolPages(100, 0.9, 130 * kGiB, std::nullopt, kPage), 100);
  EXPECT_EQ(*KvPoolPages(100, 0.9, 130 * kGiB, 100 * kPage, kPage), 100);
  absl::StatusOr<int64_t> over = KvPoolPages(101, 0.9, 130 * kGiB, 100 * kPage, kPage);
  ASSERT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(over.status().message().find("limit leaves"), std::string::npos) << over.status();
}

TEST(KvPoolPagesTest, NotOnePageSaysWhy) {
  absl::StatusOr<int64_t> spent = KvPoolPages(0, 0.9, 130 * kGiB, -3 * kGiB, kPage);
  ASSERT_EQ(spent.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(spent.status().message().find("limit"), std::string::npos) << spent.status();
  absl::StatusOr<int64_t> full = KvPoolPages(0, 0.9, kPage / 2, std::nullopt, kPage);
  ASSERT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(full.status().message().find("no GPU memory left"), std::string::npos) << full.status();
}

}  // namespace
}  // namespace pkv::cuda_backend
