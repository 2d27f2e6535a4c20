// RouterOptions' TLS rules and LoadRouterCredentials with real PEM files (made by `openssl` at test
// time, tests/harness/test_pki.h).
#include "router/router_tls.h"

#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/harness/test_pki.h"

namespace pkv::router {
namespace {

using ::testing::HasSubstr;

RouterOptions Base() {
  RouterOptions o;
  o.workers = {"127.0.0.1:1"};
  return o;
}

TEST(RouterTlsTest, OptionCombinationsAreChecked) {
  struct Case {
    const char* what;
    void (*edit)(RouterOptions&);
    const char* message;  // empty: valid
  };
  const Case cases[] = {
      {"plaintext", [](RouterOptions&) {}, ""},
      {"cert without key", [](RouterOptions& o) { o.client_tls.cert_file = "c"; },
       "--tls_cert and --tls_key must be given together"},
      {"ca without cert", [](RouterOptions& o) { o.client_tls.ca_file = "ca"; },
       "--tls_ca (verify client certificates) needs --tls_cert and --tls_key"},
      {"required client cert without ca",
       [](RouterOptions& o) {
         o.client_tls = {"c", "k", ""};
         o.require_client_cert = true;
       },
       "--tls_require_client_cert needs --tls_ca"},
      {"worker cert only", [](RouterOptions& o) { o.worker_tls.cert_file = "c"; },
       "mutual TLS to workers needs all of"},
      {"worker server name without worker tls",
       [](RouterOptions& o) { o.worker_tls_server_name = "pkv-worker"; },
       "--worker_tls_server_name needs --worker_tls_*"},
      {"everything",
       [](RouterOptions& o) {
         o.client_tls = {"c", "k", "ca"};
         o.require_client_cert = true;
         o.worker_tls = {"c", "k", "ca"};
         o.worker_tls_server_name = "pkv-worker";
       },
       ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    RouterOptions o = Base();
    c.edit(o);
    const absl::Status s = ValidateRouterOptions(o);
    if (*c.message == '\0') {
      EXPECT_TRUE(s.ok()) << s;
    } else {
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
      EXPECT_THAT(s.message(), HasSubstr(c.message));
    }
  }
}

TEST(RouterTlsTest, LoadsCredentialsAndKeysFromFiles) {
  absl::StatusOr<testing::TestPki> pki = testing::MakeTestPki();
  ASSERT_TRUE(pki.ok()) << pki.status();
  RouterOptions o = Base();
  o.client_tls = {pki->router.cert, pki->router.key, pki->ca};
  o.worker_tls = {pki->router.cert, pki->router.key, pki->ca};
  o.api_keys_file = pki->dir + "/keys";
  std::ofstream(o.api_keys_file) << "k1\nk2\n";
  absl::StatusOr<RouterCredentials> c = LoadRouterCredentials(o);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_NE(c->client_port, nullptr);
  EXPECT_NE(c->worker_channel, nullptr);
  ASSERT_NE(c->api_keys, nullptr);
  EXPECT_EQ(c->api_keys->num_keys(), 2u);
  EXPECT_THAT(SecuritySummary(o), HasSubstr("client certificates verified if shown"));

  o.worker_tls.cert_file = pki->expired.cert;
  o.worker_tls.key_file = pki->expired.key;
  EXPECT_THAT(
      LoadRouterCredentials(o).status().message(),
      HasSubstr("--worker_tls_cert " + pki->expired.cert + ": the certificate has expired"));
}

TEST(RouterTlsTest, PlaintextNeedsNoFiles) {
  absl::StatusOr<RouterCredentials> c = LoadRouterCredentials(Base());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->api_keys, nullptr);
  EXPECT_THAT(SecuritySummary(Base()), HasSubstr("client port PLAINTEXT, workers PLAINTEXT"));
}

}  // namespace
}  // namespace pkv::router
