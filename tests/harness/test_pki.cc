#include "tests/harness/test_pki.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/harness/process.h"

namespace pkv::testing {
namespace {

std::string FindOpenssl() {
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path ? path : "/usr/bin", ':')) {
    const std::string candidate = absl::StrCat(dir, "/openssl");
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

class OpensslRunner {
 public:
  OpensslRunner(std::string binary, std::string dir) : binary_(binary), dir_(dir) {}

  absl::Status Run(const std::vector<std::string>& args) {
    const std::string log = absl::StrCat(dir_, "/openssl-", ++runs_, ".log");
    auto p = Process::Spawn(binary_, args, log);
    if (!p.ok()) return p.status();
    const std::optional<int> code = (*p)->Wait(absl::Seconds(30));
    if (code != 0) {
      return absl::InternalError(absl::StrCat("openssl ", args[0], " failed: ", (*p)->LogTail()));
    }
    return absl::OkStatus();
  }

  // A self-signed CA.
  absl::Status MakeCa(const std::string& name) {
    return Run({"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                "-nodes", "-keyout", Path(name + ".key"), "-out", Path(name + ".pem"), "-days", "2",
                "-subj", "/CN=" + name});
  }

  // A leaf certificate for `cn` (SAN: DNS cn, localhost, 127.0.0.1), signed by `ca`, valid `days`
  // (negative: already expired).
  absl::StatusOr<CertKey> MakeLeaf(const std::string& name, const std::string& cn,
                                   const std::string& ca, int days) {
    absl::Status st =
        Run({"req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", Path(name + ".key"), "-out", Path(name + ".csr"), "-subj", "/CN=" + cn,
             "-addext", absl::StrCat("subjectAltName=DNS:", cn, ",DNS:localhost,IP:127.0.0.1")});
    if (!st.ok()) return st;
    st = Run({"x509", "-req", "-in", Path(name + ".csr"), "-CA", Path(ca + ".pem"), "-CAkey",
              Path(ca + ".key"), "-CAcreateserial", "-copy_extensions", "copyall", "-out",
              Path(name + ".pem"), "-days", absl::StrCat(days)});
    if (!st.ok()) return st;
    return CertKey{Path(name + ".pem"), Path(name + ".key")};
  }

  std::string Path(const std::string& file) const { return absl::StrCat(dir_, "/", file); }

 private:
  std::string binary_;
  std::string dir_;
  int runs_ = 0;
};

}  // namespace

absl::StatusOr<TestPki> MakeTestPki() {
  const std::string openssl = FindOpenssl();
  if (openssl.empty()) return absl::NotFoundError("the openssl command is not on PATH");
  TestPki pki;
  pki.dir = MakeTempDir("pkv-pki");
  OpensslRunner r(openssl, pki.dir);
  absl::Status st = r.MakeCa("ca");
  if (st.ok()) st = r.MakeCa("wrong-ca");
  if (!st.ok()) return st;
  pki.ca = r.Path("ca.pem");
  pki.wrong_ca = r.Path("wrong-ca.pem");
  const struct {
    CertKey* out;
    const char* name;
    const char* cn;
    const char* ca;
    int days;
  } leaves[] = {
      {&pki.router, "router", "pkv-router", "ca", 2},
      {&pki.worker, "worker", "pkv-worker", "ca", 2},
      {&pki.client, "client", "pkv-client", "ca", 2},
      {&pki.intruder, "intruder", "pkv-intruder", "ca", 2},
      {&pki.wrong, "wrong", "pkv-router", "wrong-ca", 2},
      {&pki.expired, "expired", "pkv-router", "ca", -1},
  };
  for (const auto& leaf : leaves) {
    absl::StatusOr<CertKey> made = r.MakeLeaf(leaf.name, leaf.cn, leaf.ca, leaf.days);
    if (!made.ok()) return made.status();
    *leaf.out = *made;
  }
  return pki;
}

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace pkv::testing
