// ResponseQueue: one write in flight, chunk coalescing preserves order and content, the Complete
// goes out with OK, an error status follows the queued chunks, a client that left drops them.
#include "router/response_queue.h"

#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pkv::router {
namespace {

using Kind = ResponseQueue::Action::Kind;

pkv::v1::Chunk MakeChunk(const std::vector<uint32_t>& ids) {
  pkv::v1::Chunk chunk;
  for (uint32_t id : ids) {
    chunk.add_token_ids(id);
    chunk.mutable_text()->append("<" + std::to_string(id) + ">");
    auto* lp = chunk.add_logprobs();
    lp->set_token_id(id);
    lp->set_logprob(-static_cast<float>(id) / 100);
  }
  return chunk;
}

TEST(ResponseQueueTest, RandomInterleavingDeliversEveryTokenInOrder) {
  std::mt19937 rng(21);
  for (int trial = 0; trial < 50; ++trial) {
    ResponseQueue q;
    std::vector<uint32_t> sent, received;
    std::string text_received;
    int writes = 0;
    bool finished = false;
    const int total_chunks = 1 + rng() % 30;
    int pushed = 0;
    while (!finished) {
      // Randomly push more, or complete a write.
      if (pushed < total_chunks && rng() % 2 == 0) {
        std::vector<uint32_t> ids(1 + rng() % 3);
        for (auto& id : ids) id = rng() % 1000;
        sent.insert(sent.end(), ids.begin(), ids.end());
        q.PushChunk(MakeChunk(ids));
        if (++pushed == total_chunks) {
          pkv::v1::Complete complete;
          complete.set_completion_tokens(static_cast<uint32_t>(sent.size()));
          q.PushComplete(complete);
        }
      }
      ResponseQueue::Action a = q.Next();
      ASSERT_EQ(q.Next().kind, Kind::kNone) << "a second action while one is outstanding";
      if (a.kind == Kind::kWrite || a.kind == Kind::kWriteAndFinish) {
        ++writes;
        if (a.message->has_chunk()) {
          const auto& c = a.message->chunk();
          ASSERT_EQ(c.logprobs_size(), c.token_ids_size());
          for (int i = 0; i < c.token_ids_size(); ++i) {
            received.push_back(c.token_ids(i));
            EXPECT_EQ(c.logprobs(i).token_id(), c.token_ids(i));
            text_received += "<" + std::to_string(c.token_ids(i)) + ">";
          }
          EXPECT_EQ(a.kind, Kind::kWrite);
        } else {
          ASSERT_TRUE(a.message->has_complete());
          EXPECT_EQ(a.kind, Kind::kWriteAndFinish);
          EXPECT_TRUE(a.status.ok());
          finished = true;
        }
        if (a.kind == Kind::kWrite) q.WriteDone();
      } else {
        EXPECT_NE(a.kind, Kind::kFinish) << "finished without the Complete";
      }
    }
    EXPECT_EQ(received, sent);
    EXPECT_LE(writes, total_chunks + 1);
    EXPECT_EQ(q.tokens_queued(), sent.size());
  }
}

TEST(ResponseQueueTest, ErrorStatusFollowsQueuedChunks) {
  ResponseQueue q;
  q.PushChunk(MakeChunk({1, 2}));
  auto first = q.Next();
  ASSERT_EQ(first.kind, Kind::kWrite);
  q.PushChunk(MakeChunk({3}));
  q.SetFinal(grpc::Status(grpc::StatusCode::ABORTED, "lost"));
  q.SetFinal(grpc::Status(grpc::StatusCode::INTERNAL, "second final is ignored"));
  EXPECT_EQ(q.Next().kind, Kind::kNone);  // write in flight
  q.WriteDone();
  auto second = q.Next();
  ASSERT_EQ(second.kind, Kind::kWrite);
  EXPECT_EQ(second.message->chunk().token_ids_size(), 1);
  q.WriteDone();
  auto last = q.Next();
  ASSERT_EQ(last.kind, Kind::kFinish);
  EXPECT_EQ(last.status.error_code(), grpc::StatusCode::ABORTED);
  EXPECT_EQ(q.Next().kind, Kind::kNone);
  EXPECT_EQ(q.tokens_queued(), 3u);
}

TEST(ResponseQueueTest, ClientGoneDropsPendingAndTheUnsentFinal) {
  ResponseQueue q;
  q.PushChunk(MakeChunk({1}));
  ASSERT_EQ(q.Next().kind, Kind::kWrite);
  q.PushChunk(MakeChunk({2}));
  q.PushComplete(pkv::v1::Complete());
  q.DropPending();
  EXPECT_FALSE(q.has_final());
  q.SetFinal(grpc::Status(grpc::StatusCode::CANCELLED, "client"));
  q.WriteDone();
  auto a = q.Next();
  ASSERT_EQ(a.kind, Kind::kFinish);
  EXPECT_EQ(a.status.error_code(), grpc::StatusCode::CANCELLED);
  q.PushChunk(MakeChunk({9}));  // ignored after the finish
  EXPECT_EQ(q.Next().kind, Kind::kNone);
}

}  // namespace
}  // namespace pkv::router
