#include "worker/engine/fault_injecting_backend.h"

#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "tests/unit/engine/fake_backend.h"
#include "worker/engine/test_faults.h"

namespace pkv {
namespace {

using testing::FakeBackend;

BatchRow Row(uint64_t sequence_id, const std::vector<int32_t>& tokens) {
  BatchRow r;
  r.tokens = tokens.data();
  r.num_tokens = static_cast<int32_t>(tokens.size());
  r.sample = true;
  r.sequence_id = sequence_id;
  return r;
}

struct Wrapped {
  explicit Wrapped(TestFaults faults) {
    auto fake = std::make_unique<FakeBackend>(65, std::vector<int32_t>{});
    inner = fake.get();
    backend = std::make_unique<FaultInjectingBackend>(std::move(fake), faults);
  }
  absl::Status Step(std::vector<BatchRow> rows) {
    std::vector<SampleResult> samples;
    StepStats stats;
    return backend->Step(rows, &samples, &stats);
  }
  FakeBackend* inner;
  std::unique_ptr<FaultInjectingBackend> backend;
};

const std::vector<int32_t> kTokens = {1, 2, 3};

TEST(FaultInjectingBackendTest, WithoutFaultsEveryStepReachesTheBackend) {
  Wrapped w(TestFaults{});
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(w.Step({Row(i, kTokens), Row(100, kTokens)}).ok());
  EXPECT_EQ(w.inner->steps.size(), 5u);
  EXPECT_EQ(w.backend->page_size(), 4);
  EXPECT_EQ(w.backend->num_kv_pages(), 64);
  EXPECT_EQ(w.backend->backend_name(), "fake");
}

TEST(FaultInjectingBackendTest, FailForwardAfterFailsTheStepAfterNSuccessfulOnes) {
  TestFaults faults;
  faults.fail_forward_after = 2;
  Wrapped w(faults);
  EXPECT_TRUE(w.Step({Row(1, kTokens)}).ok());
  EXPECT_TRUE(w.Step({Row(1, kTokens)}).ok());
  const absl::Status third = w.Step({Row(1, kTokens)});
  EXPECT_EQ(third.code(), absl::StatusCode::kInternal);
  EXPECT_NE(third.message().find("forward pass failed"), absl::string_view::npos);
  EXPECT_EQ(w.inner->steps.size(), 3u);  // the failed step ran (its K/V is unspecified)
}

TEST(FaultInjectingBackendTest, FailKvAllocAfterRefusesTheStepBringingSequenceNPlusOne) {
  TestFaults faults;
  faults.fail_kv_alloc_after = 2;
  Wrapped w(faults);
  EXPECT_TRUE(w.Step({Row(7, kTokens)}).ok());
  EXPECT_TRUE(w.Step({Row(7, kTokens), Row(9, kTokens)}).ok());
  EXPECT_TRUE(w.Step({Row(9, kTokens), Row(7, kTokens)}).ok());  // known ones go on
  const absl::Status st = w.Step({Row(7, kTokens), Row(11, kTokens)});
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(st.message().find("KV page allocation failed"), absl::string_view::npos);
  EXPECT_EQ(w.inner->steps.size(), 3u);  // refused before the backend ran
}

TEST(FaultInjectingBackendTest, ZeroMeansTheFirstOccasion) {
  TestFaults kv;
  kv.fail_kv_alloc_after = 0;
  EXPECT_EQ(Wrapped(kv).Step({Row(1, kTokens)}).code(), absl::StatusCode::kResourceExhausted);
  TestFaults forward;
  forward.fail_forward_after = 0;
  EXPECT_EQ(Wrapped(forward).Step({Row(1, kTokens)}).code(), absl::StatusCode::kInternal);
}

TEST(TestFaultsTest, ParsesTheKnownFaults) {
  absl::StatusOr<TestFaults> f = ParseTestFaults(
      "slow_step_ms:20,fail_forward_after:10,hang_step_after:3,fail_kv_alloc_after:0");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->slow_step_ms, 20);
  EXPECT_EQ(f->fail_forward_after, 10);
  EXPECT_EQ(f->hang_step_after, 3);
  EXPECT_EQ(f->fail_kv_alloc_after, 0);
  EXPECT_TRUE(f->any());
  absl::StatusOr<TestFaults> none = ParseTestFaults("");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->any());
}

TEST(TestFaultsTest, RefusesUnknownNamesAndBadNumbers) {
  for (const char* bad : {"fail_forward_after", "fail_forward_after:-1", "slow_step_ms:x",
                          "explode_after:3", "slow_step_ms:1:2"}) {
    absl::StatusOr<TestFaults> f = ParseTestFaults(bad);
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace pkv
