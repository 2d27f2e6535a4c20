#include "router/api_key_auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <fstream>
#include <iterator>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace pkv::router {
namespace {

constexpr char kMetadataKey[] = "authorization";
constexpr char kHowTo[] = "send the metadata 'authorization: Bearer <api key>'";

// Why `key` cannot be an API key, or empty when it can. Never includes the key itself.
std::string KeyProblem(absl::string_view key) {
  for (const char c : key) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f) return "a key must be printable ASCII without spaces";
  }
  return "";
}

}  // namespace

ApiKeyAuthenticator::Digest ApiKeyAuthenticator::Sha256(absl::string_view bytes) {
  Digest digest{};
  unsigned int size = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest.data(), &size, EVP_sha256(), nullptr);
  return digest;
}

absl::StatusOr<std::unique_ptr<ApiKeyAuthenticator>> ApiKeyAuthenticator::FromKeys(
    const std::vector<std::string>& keys) {
  std::vector<Digest> digests;
  for (size_t i = 0; i < keys.size(); ++i) {
    const std::string problem = keys[i].empty() ? "a key must not be empty" : KeyProblem(keys[i]);
    if (!problem.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("API key #", i + 1, ": ", problem));
    }
    digests.push_back(Sha256(keys[i]));
  }
  if (digests.empty()) return absl::InvalidArgumentError("no API key given");
  return std::unique_ptr<ApiKeyAuthenticator>(new ApiKeyAuthenticator(std::move(digests)));
}

absl::StatusOr<std::unique_ptr<ApiKeyAuthenticator>> ApiKeyAuthenticator::FromFile(
    const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("--api_keys_file ", path, ": cannot open the file"));
  }
  std::vector<Digest> digests;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const absl::string_view key = absl::StripAsciiWhitespace(line);
    if (key.empty() || key.front() == '#') continue;
    const std::string problem = KeyProblem(key);
    if (!problem.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--api_keys_file ", path, " line ", number, ": ", problem));
    }
    digests.push_back(Sha256(key));
  }
  if (digests.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--api_keys_file ", path, " holds no key (one per line; '#' starts a comment)"));
  }
  return std::unique_ptr<ApiKeyAuthenticator>(new ApiKeyAuthenticator(std::move(digests)));
}

bool ApiKeyAuthenticator::IsValidKey(absl::string_view key) const {
  const Digest presented = Sha256(key);
  // No early exit: every digest is compared, and the results are combined without branching.
  int matches = 0;
  for (const Digest& digest : digests_) {
    matches |= CRYPTO_memcmp(presented.data(), digest.data(), digest.size()) == 0;
  }
  return matches != 0;
}

grpc::Status ApiKeyAuthenticator::Authenticate(const grpc::ServerContextBase& ctx) const {
  const auto& metadata = ctx.client_metadata();
  const auto range = metadata.equal_range(kMetadataKey);
  if (range.first == range.second) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        absl::StrCat("missing API key: ", kHowTo));
  }
  if (std::next(range.first) != range.second) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "more than one authorization metadata entry; send exactly one");
  }
  const grpc::string_ref value = range.first->second;
  const absl::string_view token = BearerToken(absl::string_view(value.data(), value.size()));
  if (token.empty()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        absl::StrCat("the authorization metadata is not a bearer token: ", kHowTo));
  }
  if (!IsValidKey(token)) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "invalid API key");
  }
  return grpc::Status::OK;
}

absl::string_view BearerToken(absl::string_view authorization) {
  constexpr absl::string_view kScheme = "bearer";
  if (authorization.size() <= kScheme.size() ||
      !absl::EqualsIgnoreCase(authorization.substr(0, kScheme.size()), kScheme) ||
      authorization[kScheme.size()] != ' ') {
    return {};
  }
  return absl::StripAsciiWhitespace(authorization.substr(kScheme.size()));
}

}  // namespace pkv::router
