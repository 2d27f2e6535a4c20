// ModelBackend's default Launch/Finish (model_backend.h): Step() run at Launch, samples handed
// back oldest first, feedback rows fed the previous batch's samples, and the misuse a caller can
// make refused with a message.
#include <vector>

#include "gtest/gtest.h"
#include "tests/unit/engine/fake_backend.h"

namespace pkv {
namespace {

using testing::FakeBackend;

BatchRow Row(uint64_t seq, const int32_t* tokens, int32_t n, int32_t start, int32_t sample_index,
             const SamplingParams* params) {
  BatchRow r;
  r.tokens = tokens;
  r.num_tokens = n;
  r.start_pos = start;
  r.sample = true;
  r.params = params;
  r.sample_index = sample_index;
  r.sequence_id = seq;
  return r;
}

TEST(BackendLaunchTest, FeedbackRowsFeedThePreviousBatchsSamplesInRowOrder) {
  FakeBackend backend('a', {});
  SamplingParams p;
  const int32_t prompt[3] = {7, 8, 9};
  StepStats stats;
  // Two sequences: samples 'a' + 0 and 'a' + 5.
  const BatchRow first[2] = {Row(1, prompt, 3, 0, 0, &p), Row(2, prompt, 2, 0, 5, &p)};
  ASSERT_TRUE(backend.Launch(first, &stats).ok());
  // The next batch, launched before the first is finished, swaps them: row 0 feeds sample 1.
  BatchRow second[2] = {Row(2, nullptr, 1, 2, 6, &p), Row(1, nullptr, 1, 3, 1, &p)};
  second[0].feedback = 1;
  second[1].feedback = 0;
  ASSERT_TRUE(backend.Launch(second, &stats).ok());
  std::vector<SampleResult> samples;
  ASSERT_TRUE(backend.Finish(&samples).ok());
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[0].token_id, 'a');
  EXPECT_EQ(samples[1].token_id, 'a' + 5);
  ASSERT_TRUE(backend.Finish(&samples).ok());
  EXPECT_EQ(samples.size(), 4u);
  ASSERT_EQ(backend.steps.size(), 2u);
  EXPECT_EQ(backend.steps[1][0].first_token, 'a' + 5);
  EXPECT_EQ(backend.steps[1][1].first_token, 'a');
  EXPECT_EQ(backend.Finish(&samples).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(BackendLaunchTest, BadFeedbackAndTooManyLaunchesAreRefused) {
  FakeBackend backend('a', {});
  SamplingParams p;
  const int32_t prompt[2] = {7, 8};
  StepStats stats;
  BatchRow row = Row(1, nullptr, 1, 2, 0, &p);
  row.feedback = 0;  // no batch launched before: nothing to feed
  absl::Status st = backend.Launch({&row, 1}, &stats);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("feeds sample 0 of the previous batch, which sampled 0"),
            std::string::npos)
      << st;
  const BatchRow first = Row(1, prompt, 2, 0, 0, &p);
  ASSERT_TRUE(backend.Launch({&first, 1}, &stats).ok());
  BatchRow wide = Row(1, prompt, 2, 2, 1, &p);
  wide.feedback = 0;
  st = backend.Launch({&wide, 1}, &stats);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("a feedback row feeds 2 tokens"), std::string::npos) << st;
  ASSERT_TRUE(backend.Launch({&first, 1}, &stats).ok());
  EXPECT_EQ(backend.Launch({&first, 1}, &stats).code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace pkv
