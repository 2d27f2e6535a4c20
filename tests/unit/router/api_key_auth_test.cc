// ApiKeyAuthenticator: key file parsing, exact (case-sensitive) matching over SHA-256 digests, and
// the bearer-token syntax. The gRPC path (metadata -> UNAUTHENTICATED) is exercised on every
// method by tests/integration/security_test.cc.
#include "router/api_key_auth.h"

#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pkv::router {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Hex(const ApiKeyAuthenticator::Digest& d) {
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(d.data()), d.size()));
}

std::string RandomKey(std::mt19937_64& rng, size_t length) {
  static constexpr char kAlphabet[] =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~+/=";
  std::string key;
  for (size_t i = 0; i < length; ++i) key += kAlphabet[rng() % (sizeof(kAlphabet) - 1)];
  return key;
}

std::string WriteFile(const std::string& text) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/keys-", std::random_device{}());
  std::ofstream(path) << text;
  return path;
}

// FIPS 180-2 test vectors: the digest is SHA-256 and not something weaker.
TEST(ApiKeyAuthTest, DigestIsSha256) {
  EXPECT_EQ(Hex(ApiKeyAuthenticator::Sha256("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Hex(ApiKeyAuthenticator::Sha256("")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(ApiKeyAuthTest, AcceptsExactlyTheConfiguredKeys) {
  std::mt19937_64 rng(std::random_device{}());
  for (int round = 0; round < 20; ++round) {
    std::vector<std::string> keys;
    for (int i = 0; i < 1 + static_cast<int>(rng() % 5); ++i) {
      keys.push_back(RandomKey(rng, 1 + rng() % 80));
    }
    auto auth = ApiKeyAuthenticator::FromKeys(keys);
    ASSERT_TRUE(auth.ok()) << auth.status();
    for (const std::string& key : keys) {
      EXPECT_TRUE((*auth)->IsValidKey(key));
      EXPECT_FALSE((*auth)->IsValidKey(key + "x"));
      EXPECT_FALSE((*auth)->IsValidKey(key.substr(0, key.size() - 1)));
      const std::string upper = absl::AsciiStrToUpper(key), lower = absl::AsciiStrToLower(key);
      if (upper != key) {
        EXPECT_FALSE((*auth)->IsValidKey(upper)) << "case variant accepted";
      }
      if (lower != key) {
        EXPECT_FALSE((*auth)->IsValidKey(lower)) << "case variant accepted";
      }
    }
    EXPECT_FALSE((*auth)->IsValidKey(""));
    EXPECT_FALSE((*auth)->IsValidKey(RandomKey(rng, 40)));
  }
}

// Keys of any length are compared as 32-byte digests (CRYPTO_memcmp over all keys, no early
// exit), so a 1-byte and a 10 000-byte key work alike.
TEST(ApiKeyAuthTest, KeyLengthDoesNotMatter) {
  std::mt19937_64 rng(7);
  const std::vector<std::string> keys = {"k", RandomKey(rng, 10000)};
  auto auth = ApiKeyAuthenticator::FromKeys(keys);
  ASSERT_TRUE(auth.ok());
  EXPECT_TRUE((*auth)->IsValidKey("k"));
  EXPECT_TRUE((*auth)->IsValidKey(keys[1]));
  EXPECT_FALSE((*auth)->IsValidKey(keys[1].substr(0, 9999)));
}

TEST(ApiKeyAuthTest, FileSkipsCommentsBlankLinesAndSurroundingSpace) {
  const std::string path =
      WriteFile("# production keys\n\n  alpha-1  \n\tbeta_2\r\n# old: gamma\n");
  auto auth = ApiKeyAuthenticator::FromFile(path);
  ASSERT_TRUE(auth.ok()) << auth.status();
  EXPECT_EQ((*auth)->num_keys(), 2u);
  EXPECT_TRUE((*auth)->IsValidKey("alpha-1"));
  EXPECT_TRUE((*auth)->IsValidKey("beta_2"));
  EXPECT_FALSE((*auth)->IsValidKey("gamma"));
  EXPECT_FALSE((*auth)->IsValidKey("# old: gamma"));
}

TEST(ApiKeyAuthTest, BadFilesFailWithoutQuotingKeys) {
  auto missing = ApiKeyAuthenticator::FromFile("/nonexistent/keys");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  auto empty = ApiKeyAuthenticator::FromFile(WriteFile("# nothing\n\n"));
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(empty.status().message(), HasSubstr("holds no key"));
  auto spaced = ApiKeyAuthenticator::FromFile(WriteFile("good-key\nsecret part2\n"));
  EXPECT_EQ(spaced.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(spaced.status().message(), HasSubstr("line 2"));
  EXPECT_THAT(spaced.status().message(), Not(HasSubstr("secret")));
  auto binary = ApiKeyAuthenticator::FromKeys({"ok", "bad\x01key"});
  EXPECT_EQ(binary.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(binary.status().message(), Not(HasSubstr("bad")));
  EXPECT_FALSE(ApiKeyAuthenticator::FromKeys({}).ok());
  EXPECT_FALSE(ApiKeyAuthenticator::FromKeys({""}).ok());
}

TEST(ApiKeyAuthTest, BearerTokenSyntax) {
  EXPECT_EQ(BearerToken("Bearer abc"), "abc");
  EXPECT_EQ(BearerToken("bearer abc"), "abc");
  EXPECT_EQ(BearerToken("BEARER   abc  "), "abc");
  EXPECT_EQ(BearerToken("Bearer"), "");
  EXPECT_EQ(BearerToken("Bearer "), "");
  EXPECT_EQ(BearerToken("Bearerabc"), "");
  EXPECT_EQ(BearerToken("Basic abc"), "");
  EXPECT_EQ(BearerToken("abc"), "");
  EXPECT_EQ(BearerToken(""), "");
}

}  // namespace
}  // namespace pkv::router
