#include "common/tls.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"

namespace pkv {
namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;

std::string Flag(absl::string_view prefix, absl::string_view what) {
  return absl::StrCat("--", prefix, "_", what);
}

absl::StatusOr<std::string> ReadPemFile(const std::string& path, const std::string& flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(flag, " ", path, ": cannot open the file"));
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", path, ": the file is empty"));
  }
  return text.str();
}

BioPtr MemoryBio(const std::string& pem) {
  return BioPtr(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// The certificates in `pem`, in order (leaf first for a chain). Empty when none parses.
std::vector<X509Ptr> ParseCertificates(const std::string& pem) {
  std::vector<X509Ptr> certs;
  BioPtr bio = MemoryBio(pem);
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    certs.emplace_back(cert);
  }
  return certs;
}

// OK when now is inside [notBefore, notAfter] of `cert`.
absl::Status CheckValidity(X509* cert, const std::string& flag, const std::string& path) {
  if (X509_cmp_current_time(X509_get0_notAfter(cert)) < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " ", path, ": the certificate has expired; renew it"));
  }
  if (X509_cmp_current_time(X509_get0_notBefore(cert)) > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " ", path, ": the certificate is not valid yet (check the clock or its notBefore)"));
  }
  return absl::OkStatus();
}

absl::Status CheckCertAndKey(const TlsMaterial& m, const TlsFiles& files,
                             absl::string_view prefix) {
  const std::string cert_flag = Flag(prefix, "cert"), key_flag = Flag(prefix, "key");
  std::vector<X509Ptr> chain = ParseCertificates(m.cert_pem);
  if (chain.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(cert_flag, " ", files.cert_file, ": no PEM certificate in the file"));
  }
  absl::Status valid = CheckValidity(chain.front().get(), cert_flag, files.cert_file);
  if (!valid.ok()) return valid;
  BioPtr bio = MemoryBio(m.key_pem);
  PkeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  if (key == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(key_flag, " ", files.key_file,
                                                   ": no unencrypted PEM private key in the file"));
  }
  if (X509_check_private_key(chain.front().get(), key.get()) != 1) {
    return absl::InvalidArgumentError(absl::StrCat(key_flag, " ", files.key_file,
                                                   " is not the private key of the certificate in ",
                                                   cert_flag, " ", files.cert_file));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TlsMaterial> LoadTlsMaterial(const TlsFiles& files, absl::string_view prefix) {
  if (files.cert_file.empty() != files.key_file.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(Flag(prefix, "cert"), " and ",
                                                   Flag(prefix, "key"), " must be given together"));
  }
  TlsMaterial m;
  if (!files.cert_file.empty()) {
    absl::StatusOr<std::string> cert = ReadPemFile(files.cert_file, Flag(prefix, "cert"));
    if (!cert.ok()) return cert.status();
    absl::StatusOr<std::string> key = ReadPemFile(files.key_file, Flag(prefix, "key"));
    if (!key.ok()) return key.status();
    m.cert_pem = *std::move(cert);
    m.key_pem = *std::move(key);
    absl::Status checked = CheckCertAndKey(m, files, prefix);
    if (!checked.ok()) return checked;
  }
  if (!files.ca_file.empty()) {
    const std::string ca_flag = Flag(prefix, "ca");
    absl::StatusOr<std::string> ca = ReadPemFile(files.ca_file, ca_flag);
    if (!ca.ok()) return ca.status();
    m.ca_pem = *std::move(ca);
    if (ParseCertificates(m.ca_pem).empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(ca_flag, " ", files.ca_file, ": no PEM certificate in the file"));
    }
  }
  return m;
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsFiles& files, ClientCertPolicy policy, absl::string_view prefix) {
  if (files.cert_file.empty() || files.key_file.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("TLS needs ", Flag(prefix, "cert"), " and ", Flag(prefix, "key")));
  }
  if (policy != ClientCertPolicy::kNone && files.ca_file.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("client certificates need ", Flag(prefix, "ca"), " to verify them"));
  }
  absl::StatusOr<TlsMaterial> m = LoadTlsMaterial(files, prefix);
  if (!m.ok()) return m.status();
  grpc_ssl_client_certificate_request_type request = GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE;
  if (policy == ClientCertPolicy::kVerifyIfPresented) {
    request = GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY;
  } else if (policy == ClientCertPolicy::kRequireAndVerify) {
    request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  grpc::SslServerCredentialsOptions options(request);
  if (policy != ClientCertPolicy::kNone) options.pem_root_certs = m->ca_pem;
  options.pem_key_cert_pairs.push_back({m->key_pem, m->cert_pem});
  return grpc::SslServerCredentials(options);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const TlsFiles& files, absl::string_view prefix) {
  absl::StatusOr<TlsMaterial> m = LoadTlsMaterial(files, prefix);
  if (!m.ok()) return m.status();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = m->ca_pem;  // empty: gRPC's default roots
  options.pem_private_key = m->key_pem;
  options.pem_cert_chain = m->cert_pem;
  return grpc::SslCredentials(options);
}

}  // namespace pkv
