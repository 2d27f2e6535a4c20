#include "worker/model/safetensors.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/common/float16.h"
#include "tests/harness/test_seed.h"
#include "worker/model/checkpoint.h"
#include "worker/model/llama_weights.h"

namespace pkv {
namespace {

// Builds safetensors bytes by hand (independently of the tool's writer).
std::string MakeFile(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

absl::StatusOr<SafetensorsHeader> Parse(const std::string& bytes) {
  return ParseSafetensorsHeader(
      absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
}

std::string Entry(const std::string& name, const std::string& dtype, const std::string& shape,
                  uint64_t begin, uint64_t end) {
  return absl::StrCat("\"", name, "\": {\"dtype\": \"", dtype, "\", \"shape\": ", shape,
                      ", \"data_offsets\": [", begin, ", ", end, "]}");
}

class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = std::filesystem::path(::testing::TempDir()) /
            absl::StrCat("safetensors_test_", ::getpid(), "_", counter++);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string Write(const std::string& name, const std::string& bytes) const {
    std::ofstream(path_ / name, std::ios::binary) << bytes;
    return (path_ / name).string();
  }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

struct RandomTensors {
  std::vector<float> f32;   // [3][5]
  std::vector<float> f16;   // [7] values exactly representable in fp16
  std::vector<float> bf16;  // [2][2][3] values exactly representable in bf16
  std::string header;
  std::string data;
};

RandomTensors MakeRandomTensors(uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  RandomTensors t;
  for (int i = 0; i < 15; ++i) t.f32.push_back(dist(rng));
  for (int i = 0; i < 7; ++i) t.f16.push_back(std::round(dist(rng) * 256.0f) / 256.0f);
  for (int i = 0; i < 12; ++i) {
    t.bf16.push_back(FloatFromBits(BitsFromFloat(dist(rng)) & 0xffff0000u));
  }
  t.data.append(reinterpret_cast<const char*>(t.f32.data()), 60);
  for (float v : t.f16) {
    const uint16_t bits = ToHalf(v).bits;
    t.data.append(reinterpret_cast<const char*>(&bits), 2);
  }
  for (float v : t.bf16) {
    const uint16_t bits = static_cast<uint16_t>(BitsFromFloat(v) >> 16);
    t.data.append(reinterpret_cast<const char*>(&bits), 2);
  }
  t.header = absl::StrCat(
      "{", Entry("a.f32", "F32", "[3, 5]", 0, 60), ", ", Entry("b.f16", "F16", "[7]", 60, 74), ", ",
      Entry("c.bf16", "BF16", "[2, 2, 3]", 74, 98), R"(, "__metadata__": {"format": "pt"}})");
  return t;
}

std::vector<float> ToFloats(const TensorView& v) {
  std::vector<float> out(v.numel());
  ConvertToFloat32(v, out.data());
  return out;
}

TEST(SafetensorsTest, RoundTripOfHandWrittenFile) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    RandomTensors t = MakeRandomTensors(seed);
    TempDir dir;
    dir.Write("model.safetensors", MakeFile(t.header + "   ", t.data));  // trailing pad is legal
    absl::StatusOr<std::unique_ptr<SafetensorsFile>> file =
        SafetensorsFile::Open(dir.path() + "/model.safetensors");
    ASSERT_TRUE(file.ok()) << file.status();
    ASSERT_EQ((*file)->header().tensors.size(), 3u);
    ASSERT_EQ((*file)->header().metadata.size(), 1u);
    EXPECT_EQ((*file)->header().metadata[0].second, "pt");
    const SafetensorsTensorInfo* c = (*file)->Find("c.bf16");
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->shape, (std::vector<int64_t>{2, 2, 3}));
    EXPECT_EQ(c->dtype, DType::kBF16);
    EXPECT_EQ(c->numel, 12);
    EXPECT_EQ((*file)->Find("missing"), nullptr);

    absl::StatusOr<std::unique_ptr<Checkpoint>> ckpt = Checkpoint::Open(dir.path());
    ASSERT_TRUE(ckpt.ok()) << ckpt.status();
    EXPECT_EQ((*ckpt)->TensorNames(), (std::vector<std::string>{"a.f32", "b.f16", "c.bf16"}));
    EXPECT_EQ(ToFloats(*(*ckpt)->Get("a.f32")), t.f32);
    EXPECT_EQ(ToFloats(*(*ckpt)->Get("b.f16")), t.f16);
    EXPECT_EQ(ToFloats(*(*ckpt)->Get("c.bf16")), t.bf16);
    EXPECT_EQ((*ckpt)->Get("nope").status().code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(SafetensorsTest, ShardedCheckpoint) {
  RandomTensors t = MakeRandomTensors(7);
  TempDir dir;
  // Shard 1 holds a.f32; shard 2 holds b.f16 and c.bf16 (offsets rebased).
  std::string data2 = t.data.substr(60);
  dir.Write("s1.safetensors",
            MakeFile("{" + Entry("a.f32", "F32", "[3, 5]", 0, 60) + "}", t.data.substr(0, 60)));
  dir.Write("s2.safetensors", MakeFile("{" + Entry("b.f16", "F16", "[7]", 0, 14) + ", " +
                                           Entry("c.bf16", "BF16", "[2, 2, 3]", 14, 38) + "}",
                                       data2));
  dir.Write("model.safetensors.index.json",
            R"({"metadata": {"total_size": 98}, "weight_map": {"a.f32": "s1.safetensors",
                "b.f16": "s2.safetensors", "c.bf16": "s2.safetensors"}})");
  absl::StatusOr<std::unique_ptr<Checkpoint>> ckpt = Checkpoint::Open(dir.path());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_EQ((*ckpt)->num_files(), 2);
  EXPECT_EQ(ToFloats(*(*ckpt)->Get("a.f32")), t.f32);
  EXPECT_EQ(ToFloats(*(*ckpt)->Get("b.f16")), t.f16);
  EXPECT_EQ(ToFloats(*(*ckpt)->Get("c.bf16")), t.bf16);

  dir.Write("model.safetensors.index.json", R"({"weight_map": {"a.f32": "s2.safetensors"}})");
  absl::StatusOr<std::unique_ptr<Checkpoint>> bad = Checkpoint::Open(dir.path());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(bad.status().message()).find("a.f32"), std::string::npos);
  dir.Write("model.safetensors.index.json", R"({"weight_map": {"a.f32": "../s1.safetensors"}})");
  EXPECT_EQ(Checkpoint::Open(dir.path()).status().code(), absl::StatusCode::kInvalidArgument);
  dir.Write("model.safetensors.index.json", R"({"weight_map": {"a.f32": "gone.safetensors"}})");
  EXPECT_EQ(Checkpoint::Open(dir.path()).status().code(), absl::StatusCode::kNotFound);
  dir.Write("model.safetensors.index.json", R"({"weight_map": [)");
  EXPECT_EQ(Checkpoint::Open(dir.path()).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SafetensorsTest, MissingFilesAreNotFound) {
  TempDir dir;
  EXPECT_EQ(Checkpoint::Open(dir.path()).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(SafetensorsFile::Open(dir.path() + "/x.safetensors").status().code(),
            absl::StatusCode::kNotFound);
}

struct Malformed {
  std::string label;
  std::string bytes;
  std::string expect;  // substring of the message
};

std::vector<Malformed> MalformedCases() {
  const std::string data(64, '\x11');
  auto one = [&](const std::string& entry) { return MakeFile("{" + entry + "}", data); };
  std::vector<Malformed> c;
  c.push_back({"empty", "", "too short"});
  c.push_back({"truncated length", std::string(5, '\0'), "too short"});
  std::string past = MakeFile("{}", "");
  past[0] = 50;
  c.push_back({"length past EOF", past, "exceeds the file"});
  std::string huge = MakeFile("{}", "");
  for (int i = 0; i < 8; ++i) huge[i] = '\xff';
  c.push_back({"length 2^64-1", huge, "exceeds the file"});
  c.push_back({"bad JSON", MakeFile("{\"a\": {", data), "malformed JSON"});
  c.push_back({"not an object", MakeFile("[1, 2]", data), "JSON object"});
  c.push_back({"entry not object", one("\"w\": 3"), "'w'"});
  c.push_back({"unknown dtype", one(Entry("w", "I64", "[2]", 0, 16)), "'w': dtype 'I64'"});
  c.push_back({"dtype not string",
               one(R"("w": {"dtype": 4, "shape": [1], "data_offsets": [0, 4]})"), "'w'"});
  c.push_back({"missing shape", one(R"("w": {"dtype": "F32", "data_offsets": [0, 4]})"), "shape"});
  c.push_back({"negative dim", one(Entry("w", "F32", "[-1, 4]", 0, 16)), "non-negative"});
  c.push_back({"fractional dim", one(Entry("w", "F32", "[1.5]", 0, 4)), "non-negative"});
  c.push_back(
      {"huge shape", one(Entry("w", "F32", "[4294967296, 4294967296]", 0, 16)), "overflows"});
  c.push_back({"huge bytes", one(Entry("w", "F32", "[4611686018427387904]", 0, 16)), "overflows"});
  c.push_back({"offsets past data", one(Entry("w", "F32", "[20]", 0, 80)), "past the data"});
  c.push_back({"offsets reversed", one(Entry("w", "F32", "[0]", 8, 4)), "end < begin"});
  c.push_back({"wrong size", one(Entry("w", "F32", "[3]", 0, 16)), "need 12"});
  c.push_back({"offsets missing",
               one(R"("w": {"dtype": "F32", "shape": [1], "data_offsets": [0]})"), "data_offsets"});
  c.push_back({"negative offset",
               one(Entry("w", "F32", "[1]", 0, 4)
                       .replace(Entry("w", "F32", "[1]", 0, 4).find("[0,"), 3, "[-4,")),
               "data_offsets"});
  c.push_back({"overlap",
               one(Entry("a", "F32", "[4]", 0, 16) + ", " + Entry("b", "F32", "[4]", 8, 24)),
               "overlap"});
  c.push_back({"duplicate name",
               one(Entry("a", "F32", "[1]", 0, 4) + ", " + Entry("a", "F32", "[1]", 4, 8)),
               "duplicate"});
  c.push_back({"metadata not string", one(R"("__metadata__": {"k": 1})"), "__metadata__"});
  return c;
}

TEST(SafetensorsTest, MalformedHeadersGiveClearErrors) {
  for (const Malformed& m : MalformedCases()) {
    absl::StatusOr<SafetensorsHeader> h = Parse(m.bytes);
    ASSERT_FALSE(h.ok()) << m.label;
    EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument) << m.label;
    EXPECT_NE(std::string(h.status().message()).find(m.expect), std::string::npos)
        << m.label << ": " << h.status();
  }
}

TEST(SafetensorsTest, EmptyTensorsAndNoTensorsAreValid) {
  absl::StatusOr<SafetensorsHeader> h = Parse(MakeFile(
      "{" + Entry("e", "BF16", "[0, 5]", 4, 4) + ", " + Entry("s", "F32", "[]", 0, 4) + "}",
      std::string(4, '\0')));
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->tensors[0].numel, 0);
  EXPECT_EQ(h->tensors[1].numel, 1);  // a scalar
  EXPECT_TRUE(Parse(MakeFile("{}", "")).ok());
}

// Random byte flips, truncations and length edits of a valid file must never crash, and a parse
// that succeeds must describe tensors inside the buffer.
TEST(SafetensorsTest, MutatedFilesNeverCrash) {
  RandomTensors t = MakeRandomTensors(11);
  const std::string valid = MakeFile(t.header, t.data);
  std::mt19937 rng(::pkv::testing::TestSeed());
  int ok_count = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string bytes = valid;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      switch (rng() % 3) {
        case 0:
          bytes[rng() % bytes.size()] = static_cast<char>(rng());
          break;
        case 1:
          bytes.resize(rng() % (bytes.size() + 1));
          break;
        default:
          if (bytes.size() > 8)
            bytes[8 + rng() % (bytes.size() - 8)] = "{}[]\",:0123456789-e"[rng() % 19];
      }
      if (bytes.empty()) break;
    }
    absl::StatusOr<SafetensorsHeader> h = Parse(bytes);
    if (!h.ok()) {
      EXPECT_FALSE(h.status().message().empty());
      continue;
    }
    ++ok_count;
    for (const auto& info : h->tensors) {
      EXPECT_LE(h->data_offset + info.data_end, bytes.size());
      EXPECT_EQ(info.data_end - info.data_begin,
                static_cast<uint64_t>(info.numel) * DTypeSize(info.dtype));
    }
  }
  EXPECT_LT(ok_count, 3000);
}

}  // namespace
}  // namespace pkv
