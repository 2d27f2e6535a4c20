// The CUDA backend's host-side step builder (no GPU): graph buckets, the staging layout, token
// order, block tables, sampling slots, graph padding and validation identical to the CPU backend.
#include "worker/cuda_backend/step_builder.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "worker/model/cpu_backend.h"
#include "worker/model/llama_weights.h"

namespace pkv::cuda_backend {
namespace {

TEST(GraphBucketsTest, SmallestBucketThatFits) {
  EXPECT_EQ(GraphBucketFor(0, 256), 0);
  EXPECT_EQ(GraphBucketFor(1, 256), 1);
  EXPECT_EQ(GraphBucketFor(3, 256), 4);
  EXPECT_EQ(GraphBucketFor(64, 256), 64);
  EXPECT_EQ(GraphBucketFor(65, 256), 128);
  EXPECT_EQ(GraphBucketFor(256, 256), 256);
  EXPECT_EQ(GraphBucketFor(257, 256), 0);
  EXPECT_EQ(GraphBucketFor(50, 48), 0);
  EXPECT_EQ(GraphBucketFor(40, 48), 48);  // max_rows is the last bucket
  EXPECT_EQ(GraphBucketFor(300, 512), 512);
  EXPECT_EQ(GraphBuckets(48), (std::vector<int32_t>{1, 2, 4, 8, 16, 32, 48}));
  EXPECT_EQ(GraphBuckets(64), (std::vector<int32_t>{1, 2, 4, 8, 16, 32, 64}));
  // Every row count has a bucket, and the bucket is the smallest listed one that holds it.
  for (int32_t max_rows : {1, 7, 64, 100, 256, 300}) {
    const std::vector<int32_t> b = GraphBuckets(max_rows);
    for (int32_t n = 1; n <= max_rows; ++n) {
      const int32_t got = GraphBucketFor(n, max_rows);
      ASSERT_GE(got, n);
      EXPECT_EQ(got, *std::lower_bound(b.begin(), b.end(), n)) << n << " of " << max_rows;
    }
  }
}

TEST(StagingLayoutTest, RegionsAlignedDisjointAndPageIdsLast) {
  std::mt19937 rng(5);
  for (int i = 0; i < 200; ++i) {
    StagingCaps c{static_cast<int32_t>(rng() % 5000), static_cast<int32_t>(rng() % 300),
                  static_cast<int32_t>(rng() % 100), static_cast<int64_t>(rng() % 100000)};
    const StagingLayout l = LayoutStaging(c);
    const int64_t starts[] = {l.header,        l.token_ids,       l.positions,
                              l.kv_slots,      l.token_page_base, l.sample_token,
                              l.sample_params, l.prefill_tiles,   l.page_ids};
    const int64_t sizes[] = {kHeaderInts * 4,
                             c.tokens * 4,
                             c.tokens * 4,
                             c.tokens * 4,
                             c.tokens * 4,
                             c.sampled * 4,
                             c.sampled * int64_t{sizeof(gpu::SampleRowParams)},
                             c.tiles * int64_t{sizeof(prefill::PrefillTile)},
                             c.page_ids * 4};
    for (int r = 0; r < 9; ++r) {
      EXPECT_EQ(starts[r] % 16, 0);
      if (r > 0) {
        EXPECT_GE(starts[r], starts[r - 1] + sizes[r - 1]);
      }
    }
    EXPECT_GE(l.total_bytes, l.page_ids + c.page_ids * 4);
    EXPECT_EQ(l.UsedBytes(c.page_ids), l.page_ids + c.page_ids * 4);
    // Growing only the page-id capacity moves no offset (graph layouts rely on it).
    StagingCaps more = c;
    more.page_ids += 1000;
    EXPECT_EQ(LayoutStaging(more).page_ids, l.page_ids);
  }
}

struct Seq {
  std::vector<int32_t> tokens;
  std::vector<int32_t> pages;
};

class StepBuilderTest : public ::testing::Test {
 protected:
  StepBuilderTest() : builder_(Shape(), Limits()) {}
  static StepShape Shape() {
    StepShape s;
    s.vocab_size = 100;
    s.max_position = 1000;
    s.page_size = 4;
    s.num_kv_pages = 64;
    s.plan_prefill_tiles = true;
    return s;
  }
  static StepLimits Limits() { return StepLimits{200, 8, 1000}; }
  BatchRow Row(const Seq& s, int32_t start, int32_t n, bool sample, const SamplingParams* p) {
    BatchRow r;
    r.tokens = s.tokens.data() + start;
    r.num_tokens = n;
    r.start_pos = start;
    r.pages = s.pages.data();
    r.num_pages = static_cast<int32_t>(s.pages.size());
    r.sample = sample;
    r.params = p;
    r.sample_index = start;
    return r;
  }
  Seq MakeSeq(int32_t len, std::mt19937* rng) {
    Seq s;
    for (int32_t i = 0; i < len; ++i) s.tokens.push_back(static_cast<int32_t>((*rng)() % 100));
    std::vector<int32_t> all(64);
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), *rng);
    s.pages.assign(all.begin(), all.begin() + (len + 3) / 4);
    return s;
  }
  StepBuilder builder_;
};

TEST_F(StepBuilderTest, DecodeRowsFirstAndEveryArrayConsistent) {
  std::mt19937 rng(11);
  SamplingParams p;
  p.temperature = 0.5f;
  p.logprobs = true;
  p.top_logprobs = 3;
  Seq a = MakeSeq(30, &rng), b = MakeSeq(9, &rng), c = MakeSeq(70, &rng), d = MakeSeq(5, &rng);
  // Batch order: prefill, decode, prefill (not sampled), decode.
  const std::vector<BatchRow> rows = {Row(a, 10, 20, true, &p), Row(b, 8, 1, true, &p),
                                      Row(c, 0, 70, false, &p), Row(d, 4, 1, true, nullptr)};
  StepHost h;
  ASSERT_FALSE(builder_.Build(rows, true, &h).ok());  // row 3 samples without params
  ASSERT_TRUE(builder_.Build(rows, false, &h).ok());
  EXPECT_EQ(h.num_decode_rows, 2);
  EXPECT_EQ(h.num_tokens, 2 + 20 + 70);
  EXPECT_FALSE(h.decode_only);
  // Token order: b's token, d's token, then a's 20, then c's 70.
  const std::vector<std::pair<const BatchRow*, int32_t>> order = {
      {&rows[1], 0}, {&rows[3], 1}, {&rows[0], 2}, {&rows[2], 22}};
  for (auto [row, begin] : order) {
    for (int32_t i = 0; i < row->num_tokens; ++i) {
      const int32_t t = begin + i, pos = row->start_pos + i;
      EXPECT_EQ(h.token_ids[t], row->tokens[i]);
      EXPECT_EQ(h.positions[t], pos);
      EXPECT_EQ(h.kv_slots[t], row->pages[pos / 4] * 4 + pos % 4);
      // The token's block table in page_ids is its row's, from page_base on.
      EXPECT_EQ(h.page_ids[h.token_page_base[t] + pos / 4], row->pages[pos / 4]);
    }
  }
  EXPECT_EQ(h.decode_lengths, (std::vector<int32_t>{9, 5}));
  EXPECT_EQ(h.decode_page_indptr, (std::vector<int32_t>{0, 3, 5}));
  // Sampled rows in batch order: a (its last token), b, d.
  EXPECT_EQ(h.sample_token, (std::vector<int32_t>{21, 0, 1}));
  ASSERT_EQ(h.prefill_rows.size(), 2u);
  EXPECT_EQ(h.prefill_rows[0].q_begin, 2);
  EXPECT_EQ(h.prefill_rows[1].q_begin, 22);
  // Tiles cover every prefill query once.
  int64_t covered = 0;
  for (const prefill::PrefillTile& t : h.tiles) {
    covered += std::min(t.num_tokens - t.m_begin, prefill::kPrefillBlockM);
  }
  EXPECT_EQ(covered, 90);
}

// Step pipelining: a feedback row's token is a sample of the previous step, still on the device;
// it is staged as FeedbackTokenId(k) (negative, never a vocabulary id) in its row's token place,
// its token pointer is not read, and a feedback row feeding more than one token is refused.
TEST_F(StepBuilderTest, FeedbackRowsStageTheirSampleNumber) {
  std::mt19937 rng(3);
  SamplingParams p;
  Seq a = MakeSeq(12, &rng), b = MakeSeq(7, &rng);
  BatchRow fed = Row(a, 11, 1, true, &p);
  fed.tokens = nullptr;
  fed.feedback = 2;
  const std::vector<BatchRow> rows = {Row(b, 0, 7, true, &p), fed};
  StepHost h;
  const absl::Status st = builder_.Build(rows, true, &h);
  ASSERT_TRUE(st.ok()) << st;
  // Decode rows first: the feedback row's one token, then b's prompt.
  EXPECT_EQ(h.token_ids[0], FeedbackTokenId(2));
  EXPECT_LT(h.token_ids[0], 0);
  EXPECT_EQ(h.positions[0], 11);
  EXPECT_EQ(h.token_ids[1], b.tokens[0]);
  EXPECT_EQ(h.decode_lengths, (std::vector<int32_t>{12}));
  BatchRow wide = Row(a, 10, 2, true, &p);
  wide.feedback = 0;
  const absl::Status refused = builder_.Build({&wide, 1}, true, &h);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("feeds a sample of the previous step and more"),
            std::string::npos)
      << refused;
}

TEST_F(StepBuilderTest, GraphPaddingAndStagingRoundTrip) {
  std::mt19937 rng(3);
  SamplingParams p;
  p.temperature = 0.9f;
  p.top_k = 7;
  p.seed = 42;
  std::vector<Seq> seqs;
  std::vector<BatchRow> rows;
  for (int i = 0; i < 3; ++i) seqs.push_back(MakeSeq(10 + 7 * i, &rng));
  for (const Seq& s : seqs) {
    rows.push_back(Row(s, static_cast<int32_t>(s.tokens.size()) - 1, 1, true, &p));
  }
  StepHost h;
  ASSERT_TRUE(builder_.Build(rows, true, &h).ok());
  EXPECT_TRUE(h.decode_only);
  StepBuilder::PadForGraph(4, &h);
  EXPECT_EQ(h.padded_tokens, 4);
  EXPECT_EQ(h.num_tokens, 3);
  EXPECT_EQ(h.kv_slots[3], -1);
  EXPECT_EQ(h.token_page_base[3], -1);
  EXPECT_EQ(h.sample_token.size(), 4u);
  EXPECT_EQ(h.num_sampled, 3);
  const StagingLayout l = LayoutStaging({4, 4, 0, 500});
  std::vector<uint8_t> image(l.total_bytes, 0xAB);
  const int64_t used = StepBuilder::FillStaging(h, l, image.data());
  EXPECT_EQ(used, l.page_ids + static_cast<int64_t>(h.page_ids.size()) * 4);
  int32_t header[kHeaderInts];
  std::memcpy(header, image.data() + l.header, sizeof(header));
  EXPECT_EQ(header[0], 3);
  EXPECT_EQ(header[1], 3);
  EXPECT_EQ(header[2], 3);
  gpu::SampleRowParams sp;
  std::memcpy(&sp, image.data() + l.sample_params + sizeof(sp), sizeof(sp));
  EXPECT_EQ(sp.top_k, 7);
  EXPECT_EQ(sp.seed, 42u);
  EXPECT_EQ(sp.sample_index, rows[1].sample_index);
  int32_t pid;
  std::memcpy(&pid, image.data() + l.page_ids + 4 * h.decode_page_indptr[2], 4);
  EXPECT_EQ(pid, seqs[2].pages[0]);
}

// Uniform attention (deterministic mode): decode rows get one-query tiles ahead of the prefill
// rows' tiles, each reading its row's whole KV, and a graph step one padding tile per padding row.
TEST_F(StepBuilderTest, TilesForEveryRowCoverDecodeRowsAndGraphPadding) {
  std::mt19937 rng(17);
  Seq a = MakeSeq(30, &rng), b = MakeSeq(9, &rng), c = MakeSeq(70, &rng);
  const std::vector<BatchRow> mixed = {Row(a, 10, 20, true, nullptr), Row(b, 8, 1, true, nullptr),
                                       Row(c, 69, 1, true, nullptr)};
  builder_.set_tiles_for_every_row(true);
  StepHost h;
  ASSERT_TRUE(builder_.Build(mixed, false, &h).ok());
  ASSERT_EQ(h.num_decode_rows, 2);
  // Every query of every row is covered once, and a decode row's tile sees its whole KV.
  std::vector<int32_t> covered(h.num_tokens, 0);
  for (const prefill::PrefillTile& t : h.tiles) {
    const int32_t m = std::min(t.num_tokens - t.m_begin, prefill::kPrefillBlockM);
    for (int32_t i = 0; i < m; ++i) {
      const int32_t token = t.q_begin + t.m_begin + i;
      ++covered[token];
      EXPECT_EQ(t.start_pos + t.m_begin + i, h.positions[token]);
      EXPECT_EQ(t.page_base, h.token_page_base[token]);
    }
  }
  EXPECT_EQ(covered, std::vector<int32_t>(h.num_tokens, 1));
  EXPECT_EQ(h.tiles.size(), 3u);  // two decode rows, one 20-query tile

  const std::vector<BatchRow> decode = {Row(b, 8, 1, true, nullptr), Row(c, 69, 1, true, nullptr),
                                        Row(a, 29, 1, true, nullptr)};
  ASSERT_TRUE(builder_.Build(decode, false, &h).ok());
  ASSERT_TRUE(h.decode_only);
  ASSERT_EQ(h.tiles.size(), 3u);
  StepBuilder::PadForGraph(4, &h);
  ASSERT_EQ(h.tiles.size(), 4u);  // the captured launch's grid is the bucket
  const prefill::PrefillTile& pad = h.tiles[3];
  EXPECT_EQ(pad.q_begin, 3);
  EXPECT_EQ(pad.num_tokens, 1);
  EXPECT_EQ(pad.start_pos, 0);
  EXPECT_EQ(pad.page_base, 0);  // a real block-table entry: the kernel reads key 0 through it

  // Off again: decode rows get no tiles, and a decode-only step pads none.
  builder_.set_tiles_for_every_row(false);
  ASSERT_TRUE(builder_.Build(decode, false, &h).ok());
  EXPECT_TRUE(h.tiles.empty());
  StepBuilder::PadForGraph(4, &h);
  EXPECT_TRUE(h.tiles.empty());
}

// Split tiles (the deterministic mode's default): a mixed step's tiles in windows covering every
// query's splits once; a decode-only step in the fixed per-row layout, which graph padding
// extends by a padding row's slots (one real tile at position 0, the rest empty).
TEST_F(StepBuilderTest, SplitTilesCoverEveryQueryAndPadPerRow) {
  std::mt19937 rng(23);
  Seq a = MakeSeq(200, &rng), b = MakeSeq(9, &rng), c = MakeSeq(70, &rng);
  StepShape shape = Shape();
  shape.tiles_for_every_row = shape.split_tiles = true;
  shape.split_rule = {64, 4};  // small splits, so rows here have several (C doubles past 256)
  StepBuilder builder(shape, Limits());
  const prefill::PrefillSplitRule rule = shape.split_rule;
  StepHost h;
  const std::vector<BatchRow> mixed = {Row(a, 10, 190, true, nullptr), Row(b, 8, 1, true, nullptr),
                                       Row(c, 69, 1, true, nullptr)};
  const absl::Status built = builder.Build(mixed, false, &h);
  ASSERT_TRUE(built.ok()) << built;
  EXPECT_FALSE(h.split_slots);
  ASSERT_EQ(h.split_windows.size(), 1u);  // 192 tokens, windows of 256
  std::vector<int32_t> splits_seen(h.num_tokens, 0);
  for (const prefill::PrefillSplitWindow& w : h.split_windows) {
    for (int32_t i = w.tile_begin; i < w.tile_begin + w.num_tiles; ++i) {
      const prefill::PrefillTile& t = h.tiles[i];
      for (int32_t r = 0; r < t.m_rows; ++r) {
        const int32_t token = t.q_begin + t.m_begin + r;
        ASSERT_GE(token, w.token_begin);
        ASSERT_LT(token, w.token_begin + w.num_tokens);
        EXPECT_EQ(t.start_pos + t.m_begin + r, h.positions[token]);
        EXPECT_EQ(t.page_base, h.token_page_base[token]);
        if (h.positions[token] >= t.split * t.split_tokens) ++splits_seen[token];
      }
    }
  }
  for (int32_t token = 0; token < h.num_tokens; ++token) {
    EXPECT_EQ(splits_seen[token], prefill::PrefillSplitCount(
                                      h.positions[token], rule.min_split_tokens, rule.max_splits))
        << token;
  }

  const std::vector<BatchRow> decode = {Row(b, 8, 1, true, nullptr), Row(a, 199, 1, true, nullptr),
                                        Row(c, 69, 1, true, nullptr)};
  ASSERT_TRUE(builder.Build(decode, false, &h).ok());
  ASSERT_TRUE(h.split_slots);
  ASSERT_EQ(h.tiles.size(), 3u * rule.max_splits);
  EXPECT_EQ(h.tiles[rule.max_splits].start_pos, 199);  // 200 keys: C 64, splits 0..3
  EXPECT_EQ(h.tiles[rule.max_splits + 3].m_rows, 1);
  EXPECT_EQ(h.tiles[3].m_rows, 0);  // position 8: one split
  StepBuilder::PadForGraph(4, &h);
  ASSERT_EQ(h.tiles.size(), 4u * rule.max_splits);  // the bucket's fixed layout
  ASSERT_EQ(h.split_windows.size(), 1u);
  EXPECT_EQ(h.split_windows[0].num_tokens, 4);
  EXPECT_EQ(h.split_windows[0].num_tiles, 4 * rule.max_splits);
  const prefill::PrefillTile& pad = h.tiles[3 * rule.max_splits];
  EXPECT_EQ(pad.q_begin, 3);
  EXPECT_EQ(pad.start_pos, 0);
  EXPECT_EQ(pad.page_base, 0);
  EXPECT_EQ(pad.m_rows, 1);
  EXPECT_EQ(h.tiles[3 * rule.max_splits + 1].m_rows, 0);
  EXPECT_EQ(h.positions[3], 0);  // the merge reads the padding row's one split
}

// The same invalid batches the CPU backend rejects, with the same messages.
TEST_F(StepBuilderTest, RejectsWhatTheCpuBackendRejects) {
  std::mt19937 rng(9);
  Seq s = MakeSeq(12, &rng);
  SamplingParams good;
  struct Bad {
    BatchRow row;
    const char* what;
  };
  std::vector<Bad> bad;
  BatchRow r = Row(s, 0, 12, true, &good);
  r.num_tokens = 0;
  bad.push_back({r, "feeds no tokens"});
  r = Row(s, 0, 12, true, &good);
  r.start_pos = -1;
  bad.push_back({r, "negative start_pos"});
  r = Row(s, 0, 12, true, &good);
  r.num_pages = 2;
  bad.push_back({r, "pages"});
  Seq s2 = s;
  s2.pages[1] = 64;
  bad.push_back({Row(s2, 0, 12, true, &good), "out of range"});
  Seq s3 = s;
  s3.tokens[5] = 100;
  bad.push_back({Row(s3, 0, 12, true, &good), "outside the vocabulary"});
  SamplingParams bad_top_p;
  bad_top_p.top_p = 0.f;
  bad.push_back({Row(s, 0, 12, true, &bad_top_p), "top_p"});
  SamplingParams bad_top_n;
  bad_top_n.logprobs = true;
  bad_top_n.top_logprobs = gpu::kMaxTopLogprobs + 1;
  bad.push_back({Row(s, 0, 12, true, &bad_top_n), "top_logprobs"});
  StepHost h;
  for (const Bad& b : bad) {
    const absl::Status st = builder_.Build({&b.row, 1}, true, &h);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << b.what;
    EXPECT_NE(std::string(st.message()).find(b.what), std::string::npos) << st.message();
  }
  // Limits: rows, tokens, block-table entries.
  std::vector<BatchRow> many(9, Row(s, 11, 1, false, nullptr));
  EXPECT_EQ(builder_.Build(many, false, &h).code(), absl::StatusCode::kInvalidArgument);
  Seq long_seq = MakeSeq(250, &rng);
  long_seq.pages.resize(63);
  EXPECT_EQ(builder_.Build({Row(long_seq, 0, 201, false, nullptr)}, false, &h).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pkv::cuda_backend
