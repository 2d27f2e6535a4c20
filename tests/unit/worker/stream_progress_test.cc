// StreamProgressTable: what GetProgress answers about a stream, by request id.
#include "worker/service/stream_progress.h"

#include "gtest/gtest.h"

namespace pkv {
namespace {

TEST(StreamProgressTableTest, CountsTokensAndTheEnd) {
  StreamProgressTable table;
  EXPECT_FALSE(table.Lookup("r1").has_value());
  auto progress = std::make_shared<StreamProgress>();
  table.Add("r1", progress);
  ASSERT_TRUE(table.Lookup("r1").has_value());
  EXPECT_EQ(table.Lookup("r1")->tokens_produced, 0u);
  EXPECT_FALSE(table.Lookup("r1")->finished);
  progress->tokens_produced.fetch_add(7);
  progress->finished_at_ns.store(absl::ToUnixNanos(absl::Now()));
  EXPECT_EQ(table.Lookup("r1")->tokens_produced, 7u);
  EXPECT_TRUE(table.Lookup("r1")->finished);
}

TEST(StreamProgressTableTest, ANewStreamWithTheSameIdReplacesTheOld) {
  StreamProgressTable table;
  auto first = std::make_shared<StreamProgress>();
  first->tokens_produced.store(5);
  table.Add("r", first);
  table.Add("r", std::make_shared<StreamProgress>());
  EXPECT_EQ(table.Lookup("r")->tokens_produced, 0u);
}

TEST(StreamProgressTableTest, FinishedStreamsAreForgottenAfterTheRetention) {
  StreamProgressTable table;
  auto old = std::make_shared<StreamProgress>();
  old->finished_at_ns.store(
      absl::ToUnixNanos(absl::Now() - StreamProgressTable::kRetention - absl::Seconds(1)));
  table.Add("old", old);
  auto live = std::make_shared<StreamProgress>();
  table.Add("live", live);
  EXPECT_FALSE(table.Lookup("old").has_value());
  EXPECT_TRUE(table.Lookup("live").has_value());
  // Pruning is amortised over Adds: enough of them drop the old entry from memory too.
  for (int i = 0; i < 300; ++i) {
    auto done = std::make_shared<StreamProgress>();
    done->finished_at_ns.store(old->finished_at_ns.load());
    table.Add("done-" + std::to_string(i), done);
  }
  EXPECT_LT(table.size(), 300u);
  EXPECT_TRUE(table.Lookup("live").has_value());
}

}  // namespace
}  // namespace pkv
