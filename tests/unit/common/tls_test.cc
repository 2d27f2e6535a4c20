// LoadTlsMaterial / MakeServerCredentials / MakeChannelCredentials on real PEM files made by
// `openssl` at test time: good material loads; every kind of bad file fails at load time with a
// message naming the flag and the file, never the file's contents.
#include "common/tls.h"

#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/harness/test_pki.h"

namespace pkv {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<testing::TestPki> pki = testing::MakeTestPki();
    ASSERT_TRUE(pki.ok()) << pki.status();
    pki_ = new testing::TestPki(*pki);
  }
  static void TearDownTestSuite() { delete pki_; }
  void SetUp() override { ASSERT_NE(pki_, nullptr); }

  static std::string Write(const std::string& name, const std::string& text) {
    const std::string path = pki_->dir + "/" + name;
    std::ofstream(path) << text;
    return path;
  }

  static testing::TestPki* pki_;
};

testing::TestPki* TlsTest::pki_ = nullptr;

TEST_F(TlsTest, GoodMaterialLoads) {
  absl::StatusOr<TlsMaterial> m =
      LoadTlsMaterial({pki_->router.cert, pki_->router.key, pki_->ca}, "tls");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(m->cert_pem, HasSubstr("BEGIN CERTIFICATE"));
  EXPECT_THAT(m->key_pem, HasSubstr("PRIVATE KEY"));
  EXPECT_TRUE(MakeServerCredentials({pki_->worker.cert, pki_->worker.key, pki_->ca},
                                    ClientCertPolicy::kRequireAndVerify, "tls")
                  .ok());
  EXPECT_TRUE(MakeChannelCredentials({"", "", pki_->ca}, "tls").ok());  // verify-only client
  EXPECT_TRUE(MakeChannelCredentials({}, "tls").ok());                  // system roots
}

TEST_F(TlsTest, BadFilesFailNamingFlagAndFile) {
  const std::string garbage = Write("garbage.pem", "not a pem file\n");
  const std::string empty = Write("empty.pem", "");
  struct Case {
    const char* what;
    TlsFiles files;
    absl::StatusCode code;
    std::string message;
  };
  const Case cases[] = {
      {"missing cert",
       {pki_->dir + "/none.pem", pki_->router.key, ""},
       absl::StatusCode::kNotFound,
       "--worker_tls_cert " + pki_->dir + "/none.pem: cannot open"},
      {"empty cert",
       {empty, pki_->router.key, ""},
       absl::StatusCode::kInvalidArgument,
       "the file is empty"},
      {"garbage cert",
       {garbage, pki_->router.key, ""},
       absl::StatusCode::kInvalidArgument,
       "--worker_tls_cert " + garbage + ": no PEM certificate"},
      {"garbage key",
       {pki_->router.cert, garbage, ""},
       absl::StatusCode::kInvalidArgument,
       "--worker_tls_key " + garbage + ": no unencrypted PEM private key"},
      {"key of another certificate",
       {pki_->router.cert, pki_->worker.key, ""},
       absl::StatusCode::kInvalidArgument,
       "is not the private key of the certificate"},
      {"expired certificate",
       {pki_->expired.cert, pki_->expired.key, ""},
       absl::StatusCode::kInvalidArgument,
       "the certificate has expired"},
      {"garbage CA",
       {pki_->router.cert, pki_->router.key, garbage},
       absl::StatusCode::kInvalidArgument,
       "--worker_tls_ca " + garbage + ": no PEM certificate"},
      {"cert without key",
       {pki_->router.cert, "", ""},
       absl::StatusCode::kInvalidArgument,
       "--worker_tls_cert and --worker_tls_key must be given together"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const absl::Status s = LoadTlsMaterial(c.files, "worker_tls").status();
    EXPECT_EQ(s.code(), c.code) << s;
    EXPECT_THAT(s.message(), HasSubstr(c.message));
    EXPECT_THAT(s.message(), Not(HasSubstr("BEGIN")));
    EXPECT_THAT(s.message(), Not(HasSubstr("not a pem file")));
  }
}

TEST_F(TlsTest, ServerCredentialsNeedWhatThePolicyNeeds) {
  EXPECT_THAT(
      MakeServerCredentials({"", "", pki_->ca}, ClientCertPolicy::kNone, "tls").status().message(),
      HasSubstr("TLS needs --tls_cert and --tls_key"));
  for (ClientCertPolicy p :
       {ClientCertPolicy::kVerifyIfPresented, ClientCertPolicy::kRequireAndVerify}) {
    EXPECT_THAT(MakeServerCredentials({pki_->router.cert, pki_->router.key, ""}, p, "tls")
                    .status()
                    .message(),
                HasSubstr("client certificates need --tls_ca"));
  }
  EXPECT_TRUE(MakeServerCredentials({pki_->router.cert, pki_->router.key, ""},
                                    ClientCertPolicy::kNone, "tls")
                  .ok());
}

}  // namespace
}  // namespace pkv
