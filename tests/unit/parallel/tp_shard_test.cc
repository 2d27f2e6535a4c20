// Sharded loading: every rank's slices, read straight from a checkpoint written by
// pkv-make-model's writer (bf16 and f32, one file and several shards), equal the same slices cut
// by hand from the fully loaded tensors; the slices of all ranks tile each split tensor; malformed
// TP configurations give clear errors.
#include "worker/model/tp_shard.h"

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/unit/parallel/tp_test_util.h"
#include "worker/model/checkpoint.h"
#include "worker/tools/model_shapes.h"
#include "worker/tools/random_model.h"

namespace pkv {
namespace {

using ::pkv::testing::ScratchDir;
using ::pkv::testing::WideConfig;

struct Slice {
  int dim = -1;  // -1 whole tensor
  int64_t begin = 0, end = 0;
};

// The slice rank r owns, written from the Megatron layout by tensor name (independently of
// TensorShardSpecs, which infers it from shapes).
Slice ExpectedSlice(const std::string& name, const ModelConfig& c, int tp, int r) {
  const int64_t d = c.head_dim;
  const int64_t q = c.num_q_heads / tp * d, kv = c.num_kv_heads / tp * d;
  const int64_t inter = c.intermediate_size / tp;
  const int64_t vchunk = (c.vocab_size + tp - 1) / tp;
  auto has = [&](const char* s) { return absl::StrContains(name, s); };
  if (has("embed_tokens") || has("lm_head")) {
    return {0, r * vchunk, std::min<int64_t>(c.vocab_size, (r + 1) * vchunk)};
  }
  if (has("q_proj")) return {0, r * q, (r + 1) * q};
  if (has("k_proj") || has("v_proj")) return {0, r * kv, (r + 1) * kv};
  if (has("gate_proj") || has("up_proj")) return {0, r * inter, (r + 1) * inter};
  if (has("o_proj.weight")) return {1, r * q, (r + 1) * q};
  if (has("down_proj")) return {1, r * inter, (r + 1) * inter};
  return {};  // norms, q/k norms, o_proj bias: replicated
}

std::vector<float> CutSlice(const std::vector<float>& full, const std::vector<int64_t>& shape,
                            const Slice& s) {
  if (s.dim < 0) return full;
  const int64_t cols = shape.size() > 1 ? shape[1] : 1;
  std::vector<float> out;
  if (s.dim == 0) {
    out.assign(full.begin() + s.begin * cols, full.begin() + s.end * cols);
  } else {
    for (int64_t row = 0; row < shape[0]; ++row) {
      out.insert(out.end(), full.begin() + row * cols + s.begin, full.begin() + row * cols + s.end);
    }
  }
  return out;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void CheckShardsOfCheckpoint(const ModelConfig& config, const std::string& dir,
                             std::vector<int> tps) {
  auto ckpt = Checkpoint::Open(dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  auto full = LoadLlamaWeightsF32(config, **ckpt);
  ASSERT_TRUE(full.ok()) << full.status();
  std::vector<LlamaTensorSlot> full_slots = LlamaTensorSlots(&*full);
  for (int tp : tps) {
    for (int r = 0; r < tp; ++r) {
      auto shard = LoadLlamaShardF32(config, **ckpt, tp, r);
      ASSERT_TRUE(shard.ok()) << shard.status();
      EXPECT_TRUE(CheckLlamaWeightSizes(*shard).ok());
      std::vector<LlamaTensorSlot> shard_slots = LlamaTensorSlots(&*shard);
      ASSERT_EQ(shard_slots.size(), full_slots.size());
      for (size_t i = 0; i < full_slots.size(); ++i) {
        const std::string& name = full_slots[i].spec.name;
        ASSERT_EQ(shard_slots[i].spec.name, name);
        const std::vector<float> want = CutSlice(*full_slots[i].dst, full_slots[i].spec.shape,
                                                 ExpectedSlice(name, config, tp, r));
        EXPECT_TRUE(SameBits(*shard_slots[i].dst, want))
            << "tp " << tp << " rank " << r << " tensor " << name;
      }
      // Cutting the loaded full model gives the same shard as reading the slices from disk.
      auto cut = ShardLlamaWeights(*full, tp, r);
      ASSERT_TRUE(cut.ok()) << cut.status();
      std::vector<LlamaTensorSlot> cut_slots = LlamaTensorSlots(&*cut);
      for (size_t i = 0; i < cut_slots.size(); ++i) {
        EXPECT_TRUE(SameBits(*cut_slots[i].dst, *shard_slots[i].dst))
            << "tp " << tp << " rank " << r << " " << cut_slots[i].spec.name;
      }
    }
  }
}

TEST(TpShardTest, TinyModelFromPkvMakeModelWriterSplitsTwoWays) {
  ScratchDir dir("tp_shard_tiny");
  RandomModelOptions opt;
  opt.out_dir = dir.path();
  auto config = ModelShapeConfig("tiny");
  ASSERT_TRUE(config.ok());
  opt.config = *config;
  opt.seed = 11;
  opt.max_shard_bytes = 40000;  // several safetensors shards + index, as real checkpoints
  auto written = WriteRandomModel(opt);
  ASSERT_TRUE(written.ok()) << written.status();
  ASSERT_GT(written->num_shards, 1);
  auto loaded_config = LoadModelConfig(dir.path());
  ASSERT_TRUE(loaded_config.ok());
  CheckShardsOfCheckpoint(*loaded_config, dir.path(), {1, 2});
}

TEST(TpShardTest, WideModelSplitsOneTwoAndFourWaysInEveryDtype) {
  for (DType dtype : {DType::kBF16, DType::kF16, DType::kF32}) {
    ScratchDir dir("tp_shard_wide");
    RandomModelOptions opt;
    opt.out_dir = dir.path();
    opt.config = WideConfig();
    opt.dtype = dtype;
    opt.seed = 5;
    ASSERT_TRUE(WriteRandomModel(opt).ok());
    auto loaded_config = LoadModelConfig(dir.path());
    ASSERT_TRUE(loaded_config.ok()) << loaded_config.status();
    CheckShardsOfCheckpoint(*loaded_config, dir.path(), {1, 2, 4});
  }
}

TEST(TpShardTest, SlicesOfAllRanksTileEverySplitTensor) {
  const ModelConfig c = WideConfig();
  for (int tp : {2, 4}) {
    std::vector<std::vector<TensorShardSpec>> per_rank;
    for (int r = 0; r < tp; ++r) per_rank.push_back(TensorShardSpecs(c, tp, r));
    for (size_t i = 0; i < per_rank[0].size(); ++i) {
      int64_t next = 0;
      for (int r = 0; r < tp; ++r) {
        const TensorShardSpec& s = per_rank[r][i];
        const Slice want = ExpectedSlice(s.name, c, tp, r);
        ASSERT_EQ(s.split_dim, want.dim) << s.name;
        if (s.split_dim < 0) continue;
        EXPECT_EQ(s.begin, want.begin) << s.name;
        EXPECT_EQ(s.end, want.end) << s.name;
        EXPECT_EQ(s.begin, next) << s.name << " rank " << r << " leaves a gap or overlaps";
        next = s.end;
      }
      if (per_rank[0][i].split_dim >= 0) {
        EXPECT_EQ(next, per_rank[0][i].full_shape[per_rank[0][i].split_dim]) << per_rank[0][i].name;
      }
    }
  }
}

TEST(TpShardTest, VocabShardsTileTheVocabulary) {
  for (int32_t vocab : {5, 97, 1001, 128256}) {
    for (int tp : {1, 2, 3, 4}) {
      // A split that leaves the last rank nothing (5 over 4: 2, 2, 1, 0) is refused by
      // ValidateTensorParallel (MalformedTpConfigsGiveClearErrors).
      if ((tp - 1) * ((vocab + tp - 1) / tp) >= vocab) continue;
      int32_t next = 0;
      for (int r = 0; r < tp; ++r) {
        const VocabShard v = VocabShardOf(vocab, tp, r);
        EXPECT_EQ(v.begin, next);
        EXPECT_GT(v.end, v.begin);
        EXPECT_LE(v.end - v.begin, v.chunk);
        EXPECT_EQ(v.chunk, (vocab + tp - 1) / tp);
        next = v.end;
      }
      EXPECT_EQ(next, vocab);
    }
  }
}

void ExpectInvalid(const ModelConfig& c, int tp, const std::vector<std::string>& needles) {
  const absl::Status s = ValidateTensorParallel(c, tp);
  ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << "tp " << tp;
  for (const std::string& n : needles) {
    EXPECT_TRUE(absl::StrContains(s.message(), n)) << s.message() << " lacks '" << n << "'";
  }
}

TEST(TpShardTest, MalformedTpConfigsGiveClearErrors) {
  ModelConfig c = WideConfig();  // H_kv 4, I 160, V 1001
  EXPECT_TRUE(ValidateTensorParallel(c, 1).ok());
  EXPECT_TRUE(ValidateTensorParallel(c, 2).ok());
  EXPECT_TRUE(ValidateTensorParallel(c, 4).ok());
  ExpectInvalid(c, 0, {"--tp must be in [1, 64], got 0"});
  ExpectInvalid(c, -2, {"got -2"});
  ExpectInvalid(c, 65, {"got 65"});
  ExpectInvalid(c, 3, {"--tp 3 does not divide num_key_value_heads 4", "valid --tp", "1, 2, 4"});
  ExpectInvalid(c, 8, {"num_key_value_heads 4"});
  c.intermediate_size = 150;  // 150 / 4 is not whole
  ExpectInvalid(c, 4,
                {"--tp 4 does not divide intermediate_size 150",
                 "valid --tp for this "
                 "model: 1, 2"});
  c = WideConfig();
  c.vocab_size = 3;  // four ranks of ceil(3/4) = 1 row: the last gets none
  ExpectInvalid(c, 4, {"leaves the last rank without vocabulary rows"});
  // The shard functions refuse what validation refuses, and ranks outside the group.
  const LlamaWeights none;
  EXPECT_EQ(ShardLlamaWeights(none, 2, 0).status().code(), absl::StatusCode::kInvalidArgument);
  ModelConfig one_kv_head = WideConfig();
  one_kv_head.num_kv_heads = 1;
  one_kv_head.num_q_heads = 8;
  ExpectInvalid(one_kv_head, 2, {"num_key_value_heads 1", "valid --tp for this model: 1"});
}

}  // namespace
}  // namespace pkv
