// The tiny tokenizer builder and the BPE trainer behind it.
#include "worker/tokenizer/tiny_tokenizer.h"

#include <cstdio>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/json.h"
#include "gtest/gtest.h"
#include "tests/unit/tokenizer/test_util.h"
#include "worker/tokenizer/bpe_trainer.h"
#include "worker/tokenizer/tokenizer.h"

namespace pkv {
namespace {

std::unique_ptr<Tokenizer> Load(int vocab_size) {
  auto json = BuildTinyTokenizerJson(vocab_size);
  EXPECT_TRUE(json.ok()) << json.status();
  auto t = Tokenizer::FromJson(*json);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

TEST(BpeTrainerTest, MostFrequentPairFirstTiesByBytes) {
  // Pair counts: (c,d) 3, (a,b) 2, (b,a) 1 -> c+d first; then a+b; then ab+ab (1) vs ...
  const std::vector<std::string> words = {"cd", "cd", "cd", "abab"};
  const BpeTrainingResult r = TrainByteLevelBpe(words, 256 + 3, 1);
  ASSERT_EQ(r.merges.size(), 3u);
  EXPECT_EQ(r.merges[0], std::make_pair(int32_t{'c'}, int32_t{'d'}));
  EXPECT_EQ(r.merges[1], std::make_pair(int32_t{'a'}, int32_t{'b'}));
  EXPECT_EQ(r.tokens[256], "cd");
  EXPECT_EQ(r.tokens[257], "ab");
  EXPECT_EQ(r.tokens[258], "abab");  // the only pair left: (ab, ab)

  // A tie between (x,y) and (a,b) (2 each): the smaller bytes win.
  const BpeTrainingResult tie = TrainByteLevelBpe({"xy", "ab", "xy", "ab"}, 257, 1);
  ASSERT_EQ(tie.merges.size(), 1u);
  EXPECT_EQ(tie.tokens[256], "ab");

  // min_pair_count stops training; pairs never cross words.
  const BpeTrainingResult none = TrainByteLevelBpe({"a", "b", "ab"}, 1000, 2);
  EXPECT_TRUE(none.merges.empty());
  EXPECT_EQ(none.tokens.size(), 256u);
}

TEST(TinyTokenizerTest, DeterministicAndSizedAsAsked) {
  for (int vocab : {258, 300, 512, 2048}) {
    auto a = BuildTinyTokenizerJson(vocab);
    auto b = BuildTinyTokenizerJson(vocab);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(*a, *b);
    auto t = Load(vocab);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->vocab_size(), vocab);
    EXPECT_EQ(t->bos_id(), vocab - 2);
    EXPECT_EQ(t->eos_id(), vocab - 1);
    EXPECT_EQ(t->TokenToId("<|begin_of_text|>"), vocab - 2);
    EXPECT_EQ(t->TokenToId("<|end_of_text|>"), vocab - 1);
    EXPECT_TRUE(t->IsSpecial(vocab - 1));
    for (int b = 0; b < 256; ++b) ASSERT_EQ(t->TokenBytes(b), std::string(1, static_cast<char>(b)));
    // Every id has bytes and they are distinct.
    std::set<std::string> seen;
    for (int id = 0; id < vocab; ++id) {
      ASSERT_FALSE(t->TokenBytes(id).empty()) << id;
      ASSERT_TRUE(seen.insert(std::string(t->TokenBytes(id))).second) << id;
    }
  }
  EXPECT_NE(*BuildTinyTokenizerJson(512), *BuildTinyTokenizerJson(513));
  EXPECT_FALSE(BuildTinyTokenizerJson(257).ok());
  EXPECT_FALSE(BuildTinyTokenizerJson(262145).ok());
}

TEST(TinyTokenizerTest, IsPlainHuggingFaceJson) {
  auto json = BuildTinyTokenizerJson(512);
  ASSERT_TRUE(json.ok());
  auto root = ParseJson(*json);
  ASSERT_TRUE(root.ok());
  const JsonValue* model = root->Find("model");
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->Find("type")->str(), "BPE");
  EXPECT_EQ(model->Find("vocab")->members().size(), 510u);
  EXPECT_GE(model->Find("merges")->items().size(), 510u - 256u);  // a merge may re-make a token
  EXPECT_EQ(root->Find("added_tokens")->items().size(), 2u);
  EXPECT_EQ(root->Find("decoder")->Find("type")->str(), "ByteLevel");
}

TEST(TinyTokenizerTest, LargeVocabularyFillsWithReservedSpecials) {
  auto t = Load(65536);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->vocab_size(), 65536);
  EXPECT_TRUE(t->TokenToId("<|reserved_special_token_0|>").has_value());
  EXPECT_EQ(*t->Encode("<|reserved_special_token_0|>"),
            std::vector<int32_t>{*t->TokenToId("<|reserved_special_token_0|>")});
}

TEST(TinyTokenizerTest, MergesCompressCorpusLikeText) {
  auto t = Load(512);
  ASSERT_NE(t, nullptr);
  const std::string text = "The keeper climbed the stairs and wrote in the log.";
  auto ids = t->Encode(text, /*add_special_tokens=*/true);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids->front(), 510);  // BOS
  EXPECT_LT(ids->size(), text.size() * 2 / 3);
}

TEST(TinyTokenizerTest, DecodeEncodeRoundTripsRandomText) {
  std::mt19937 rng(17);
  for (int vocab : {258, 512, 4096}) {
    auto t = Load(vocab);
    ASSERT_NE(t, nullptr);
    for (int iter = 0; iter < 400; ++iter) {
      const std::string text = testing::RandomText(rng, 60);
      auto ids = t->Encode(text);
      ASSERT_TRUE(ids.ok()) << ids.status();
      auto decoded = t->Decode(*ids);
      ASSERT_TRUE(decoded.ok());
      ASSERT_EQ(*decoded, text) << testing::JsonQuote(text);
      // Re-encoding the decoded text is stable.
      ASSERT_EQ(*t->Encode(*decoded), *ids);
      // Encoding is compositional over added tokens: BOS+text+EOS spelled out in the text.
      auto with_specials = t->Encode("<|begin_of_text|>" + text + "<|end_of_text|>");
      ASSERT_TRUE(with_specials.ok());
      ASSERT_EQ(with_specials->front(), vocab - 2);
      ASSERT_EQ(with_specials->back(), vocab - 1);
    }
  }
}

TEST(TinyTokenizerTest, ConcurrentEncodeMatchesSequential) {
  auto t = Load(1024);
  ASSERT_NE(t, nullptr);
  std::mt19937 rng(23);
  std::vector<std::string> texts;
  for (int i = 0; i < 200; ++i) texts.push_back(testing::RandomText(rng, 80));
  std::vector<std::vector<int32_t>> want;
  for (const std::string& text : texts) want.push_back(*t->Encode(text));
  // Fresh tokenizer: the threads race to fill the shared word cache.
  auto shared = Load(1024);
  ASSERT_NE(shared, nullptr);
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      for (int round = 0; round < 5; ++round) {
        for (size_t i = 0; i < texts.size(); ++i) {
          const size_t j = (i * 7 + k * 13 + round) % texts.size();
          auto ids = shared->Encode(texts[j]);
          if (!ids.ok() || *ids != want[j]) ++mismatches[k];
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

TEST(TinyTokenizerTest, FromFileLoadsWhatWasWritten) {
  auto json = BuildTinyTokenizerJson(700);
  ASSERT_TRUE(json.ok());
  const std::string path = ::testing::TempDir() + "/tiny_tokenizer_test.json";
  {
    std::ofstream out(path, std::ios::binary);
    out << *json;
  }
  auto t = Tokenizer::FromFile(path);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->vocab_size(), 700);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace pkv
