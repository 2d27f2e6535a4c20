// Policy files (kernels/policy/policy_file.h): a fitted file round-trips through JSON (same
// fields, same choices on random batches), malformed files are INVALID_ARGUMENT naming the
// problem, a missing file is NOT_FOUND, and file names follow the device name and SM count.
#include "kernels/policy/policy_file.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>

#include "tests/unit/policy/fixtures.h"

namespace pkv::policy {
namespace {

using decode::Route;

PolicyFile Fitted() {
  PolicyFile f;
  f.gpu_name = "NVIDIA H200";
  f.num_sms = 132;
  f.ctas_per_sm = 2;
  f.source = "tests \"fixture\" calibration_132sm.tsv";
  const std::vector<CellTimes> cal = testing::LoadFixture("calibration_132sm.tsv");
  f.cells = static_cast<int32_t>(cal.size());
  f.threshold = *FitThresholdRules(cal, {});
  f.has_threshold = true;
  f.learned = *FitCostModel(cal, {}, &f.learned_report);
  f.has_learned = true;
  return f;
}

TEST(PolicyFileTest, RoundTripKeepsFieldsAndChoices) {
  const PolicyFile f = Fitted();
  ASSERT_EQ(f.cells, 42);
  const std::string json = PolicyFileToJson(f);
  absl::StatusOr<PolicyFile> g = ParsePolicyFile(json);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->kind, "learned");
  EXPECT_EQ(g->gpu_name, f.gpu_name);
  EXPECT_EQ(g->num_sms, 132);
  EXPECT_EQ(g->ctas_per_sm, 2);
  EXPECT_EQ(g->source, f.source);
  EXPECT_EQ(g->threshold.batch_edges, f.threshold.batch_edges);
  EXPECT_EQ(g->threshold.long_context_tokens, f.threshold.long_context_tokens);
  EXPECT_EQ(g->threshold.short_routes, f.threshold.short_routes);
  EXPECT_EQ(g->threshold.long_routes, f.threshold.long_routes);
  for (int r = 0; r < decode::kNumRoutes; ++r) {
    EXPECT_EQ(g->learned.routes[r].inputs, f.learned.routes[r].inputs);
    EXPECT_EQ(g->learned.routes[r].coef, f.learned.routes[r].coef);  // %.17g: exact
  }
  EXPECT_EQ(g->learned.input_lo, f.learned.input_lo);
  EXPECT_EQ(g->learned.input_hi, f.learned.input_hi);
  EXPECT_EQ(PolicyFileToJson(*g), json);
  for (const char* kind : {"learned", "threshold"}) {
    auto a = MakePolicy(f, kind);
    auto b = MakePolicy(*g, kind);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ((*b)->kind(), kind);
    std::mt19937 rng(17);
    for (int i = 0; i < 300; ++i) {
      const BatchFeatures batch = testing::RandomBatch(rng);
      EXPECT_EQ((*a)->Choose(batch).route, (*b)->Choose(batch).route);
    }
  }
}

TEST(PolicyFileTest, WriteThenReadFromDisk) {
  const PolicyFile f = Fitted();
  const std::string path = ::testing::TempDir() + "/" + PolicyFileName(f.gpu_name, f.num_sms);
  ASSERT_TRUE(WritePolicyFile(path, f).ok());
  absl::StatusOr<PolicyFile> g = ReadPolicyFile(path);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(PolicyFileToJson(*g), PolicyFileToJson(f));
  std::remove(path.c_str());
  EXPECT_EQ(ReadPolicyFile(path).status().code(), absl::StatusCode::kNotFound);
}

// Replaces the first occurrence of `from` in the fitted file's JSON.
std::string Mutate(const std::string& json, const std::string& from, const std::string& to) {
  std::string s = json;
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

TEST(PolicyFileTest, MalformedFilesAreRejectedWithAReason) {
  const std::string json = PolicyFileToJson(Fitted());
  const struct {
    std::string text;
    std::string reason;  // a substring the error must contain
  } cases[] = {
      {"", "policy file"},
      {"[1, 2]", "JSON object"},
      {"{\"format\": \"x\"", "policy file"},
      {Mutate(json, "pkv-decode-policy", "other"), "format"},
      {Mutate(json, "\"version\": 1", "\"version\": 3"), "version 3"},
      {Mutate(json, "\"version\": 1", "\"version\": 0"), "version 0"},
      {Mutate(json, "\"ridge\": ", "\"margin\": 0.02, \"ridge\": "), "needs version 2"},
      {Mutate(json, "\"kind\": \"learned\"", "\"kind\": \"oracle\""), "oracle"},
      {Mutate(json, "\"num_sms\": 132", "\"num_sms\": 0"), "num_sms"},
      {Mutate(json, "\"num_sms\": 132", "\"num_sms\": \"many\""), "num_sms"},
      {Mutate(json, "\"head_dim\": 128", "\"head_dim\": 96"), "head_dim"},
      {Mutate(json, "\"workqueue\": {", "\"bogus\": {"), "bogus"},
      {Mutate(json, "\"log_bytes_per_slot\": ", "\"log_bytes\": "), "log_bytes"},
      {Mutate(json, "\"threshold\": {\"batch_edges\"", "\"threshold\": {\"edges\""), "batch_edges"},
      {Mutate(json, "\"short_routes\": [\"", "\"short_routes\": [\"bucketed-exact\", \""),
       "short_routes"},
      {Mutate(json, "\"learned\": {", "\"learned_off\": {"), "no \"learned\" section"},
  };
  for (const auto& c : cases) {
    absl::StatusOr<PolicyFile> f = ParsePolicyFile(c.text);
    ASSERT_FALSE(f.ok()) << c.reason;
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument) << c.reason;
    EXPECT_NE(std::string(f.status().message()).find(c.reason), std::string::npos)
        << f.status() << " (expected '" << c.reason << "')";
  }
}

TEST(PolicyFileTest, KindSelectsThePolicy) {
  PolicyFile f = Fitted();
  f.kind = "threshold";
  absl::StatusOr<PolicyFile> g = ParsePolicyFile(PolicyFileToJson(f));
  ASSERT_TRUE(g.ok());
  auto p = MakePolicy(*g);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)->kind(), "threshold");
  f.has_learned = false;
  f.kind = "learned";
  EXPECT_FALSE(ParsePolicyFile(PolicyFileToJson(f)).ok());
  EXPECT_FALSE(MakePolicy(f, "learned").ok());
  EXPECT_FALSE(MakePolicy(f, "fancy").ok());
}

TEST(PolicyFileTest, FileNamesFollowDeviceAndSmCount) {
  EXPECT_EQ(PolicyFileName("NVIDIA H200", 132), "nvidia-h200-132sm.json");
  EXPECT_EQ(PolicyFileName("NVIDIA GeForce RTX 3060", 28), "nvidia-geforce-rtx-3060-28sm.json");
  EXPECT_EQ(PolicyFileName("  A100-SXM4-80GB  ", 108), "a100-sxm4-80gb-108sm.json");
  EXPECT_EQ(PolicyFileName("", 66), "gpu-66sm.json");
  EXPECT_EQ(PolicyFileName("../../etc/passwd", 1), "etc-passwd-1sm.json");
  EXPECT_EQ(PolicyFileName("NVIDIA H200", 132, 1), "nvidia-h200-132sm-fp8.json");
  EXPECT_EQ(PolicyCacheFileName("NVIDIA H200", 132, KvShape{32, 8, 128, 16}),
            "nvidia-h200-132sm-q32-kv8-d128-p16.json");
  EXPECT_EQ(PolicyCacheFileName("NVIDIA H200", 66, KvShape{32, 8, 64, 16, 1}),
            "nvidia-h200-66sm-fp8-q32-kv8-d64-p16.json");
}

// FP8 pages' policies record their element size; files without one are 16-bit policies.
TEST(PolicyFileTest, KvElementSizeRoundTrips) {
  PolicyFile f = Fitted();
  const std::string sixteen = PolicyFileToJson(f);
  EXPECT_EQ(sixteen.find("kv_elem_bytes"), std::string::npos);  // older readers see no change
  ASSERT_TRUE(ParsePolicyFile(sixteen).ok());
  EXPECT_EQ(ParsePolicyFile(sixteen)->shape.kv_elem_bytes, 2);
  f.shape.kv_elem_bytes = 1;
  absl::StatusOr<PolicyFile> fp8 = ParsePolicyFile(PolicyFileToJson(f));
  ASSERT_TRUE(fp8.ok()) << fp8.status();
  EXPECT_EQ(fp8->shape.kv_elem_bytes, 1);
}

}  // namespace
}  // namespace pkv::policy
