// TLS, mutual TLS and API keys through real processes (RELIABILITY.md X1-X6): a router with TLS on
// its client port and API keys, two workers that accept only the router's certificate, and
// certificates made at test time by `openssl` (tests/harness/test_pki.h).
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "pkv/v1/generation.grpc.pb.h"
#include "pkv/v1/worker.grpc.pb.h"
#include "tests/harness/cluster.h"
#include "tests/harness/test_pki.h"
#include "tests/integration/raw_call.h"
#include "tests/integration/reliability_util.h"

namespace pkv::testing {
namespace {

using ::testing::HasSubstr;

// Lower-case hex with at least one letter, so its upper-case variant is a different key.
std::string RandomKey(std::mt19937_64& rng) {
  std::string key;
  while (key.find_first_of("abcdef") == std::string::npos) {
    key =
        absl::StrCat("pk", absl::Hex(rng(), absl::kZeroPad16), absl::Hex(rng(), absl::kZeroPad16));
  }
  return key;
}

std::shared_ptr<grpc::ChannelCredentials> Tls(const std::string& ca,
                                              const CertKey* client = nullptr) {
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = ReadFileOrEmpty(ca);
  if (client != nullptr) {
    o.pem_cert_chain = ReadFileOrEmpty(client->cert);
    o.pem_private_key = ReadFileOrEmpty(client->key);
  }
  return grpc::SslCredentials(o);
}

std::shared_ptr<grpc::Channel> Channel(const std::string& address,
                                       std::shared_ptr<grpc::ChannelCredentials> credentials) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a fresh connection (and handshake)
  return grpc::CreateCustomChannel(address, std::move(credentials), args);
}

Metadata Bearer(const std::string& key) { return {{"authorization", "Bearer " + key}}; }

class SecurityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<TestPki> pki = MakeTestPki();
    ASSERT_TRUE(pki.ok()) << pki.status();
    pki_ = new TestPki(*pki);
    std::mt19937_64 rng(std::random_device{}());
    keys_ = new std::vector<std::string>{RandomKey(rng), RandomKey(rng)};
    const std::string keys_file = pki_->dir + "/api_keys";
    std::ofstream(keys_file) << "# test keys\n" << (*keys_)[0] << "\n\n  " << (*keys_)[1] << "  \n";

    ClusterOptions options;
    options.num_workers = 2;
    options.insecure = false;
    options.worker_args = {"--tls_cert=" + pki_->worker.cert, "--tls_key=" + pki_->worker.key,
                           "--tls_ca=" + pki_->ca, "--tls_client_names=pkv-router"};
    options.router_args = {"--tls_cert=" + pki_->router.cert,
                           "--tls_key=" + pki_->router.key,
                           "--tls_ca=" + pki_->ca,
                           "--worker_tls_cert=" + pki_->router.cert,
                           "--worker_tls_key=" + pki_->router.key,
                           "--worker_tls_ca=" + pki_->ca,
                           "--api_keys_file=" + keys_file};
    options.router_credentials = Tls(pki_->ca);
    options.worker_credentials = Tls(pki_->ca, &pki_->router);  // the harness acts as the router
    auto c = Cluster::Start(options);
    ASSERT_TRUE(c.ok()) << c.status();
    cluster_ = c->release();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    delete keys_;
    delete pki_;
    cluster_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(cluster_, nullptr); }

  std::shared_ptr<grpc::Channel> RouterChannel(const std::string& ca,
                                               const CertKey* client = nullptr) {
    return Channel(cluster_->router_address(), Tls(ca, client));
  }
  // A request the tiny model answers quickly.
  static std::string ValidRequest() { return GreedyRequest(3, 5, 8).SerializeAsString(); }
  double WorkerSum(const std::string& sample) { return SumOverWorkers(*cluster_, {0, 1}, sample); }

  static TestPki* pki_;
  static std::vector<std::string>* keys_;
  static Cluster* cluster_;
};

TestPki* SecurityTest::pki_ = nullptr;
std::vector<std::string>* SecurityTest::keys_ = nullptr;
Cluster* SecurityTest::cluster_ = nullptr;

TEST_F(SecurityTest, RightKeyAndCertificatesStreamEndToEnd) {
  for (const std::string& key : *keys_) {
    const RawResult r = RawCall(RouterChannel(pki_->ca), "/pkv.v1.Generation/Generate",
                                ValidRequest(), Bearer(key));
    EXPECT_TRUE(r.status.ok()) << r.status.error_message() << "\n" << cluster_->Logs();
    EXPECT_FALSE(r.responses.empty());
  }
  // A client certificate from the right CA is accepted too (verified when shown), and the
  // scheme is case-insensitive.
  const RawResult r = RawCall(RouterChannel(pki_->ca, &pki_->client), "/pkv.v1.Generation/Generate",
                              ValidRequest(), {{"authorization", "bearer " + (*keys_)[1]}});
  EXPECT_TRUE(r.status.ok()) << r.status.error_message();
}

// X1: every method of every service the router registers, except grpc.health.v1, needs a key.
TEST_F(SecurityTest, EveryGenerationMethodRefusesMissingWrongAndCaseVariantKeys) {
  const std::string key = (*keys_)[0];
  const std::vector<std::pair<std::string, Metadata>> bad = {
      {"no key", {}},
      {"wrong key", Bearer(key + "x")},
      {"case variant", Bearer(absl::AsciiStrToUpper(key))},
      {"prefix of the key", Bearer(key.substr(0, key.size() - 1))},
      {"Basic scheme", {{"authorization", "Basic " + key}}},
      {"bare key", {{"authorization", key}}},
      {"other header", {{"x-api-key", key}}},
      {"two keys", {{"authorization", "Bearer " + key}, {"authorization", "Bearer " + key}}},
  };
  const google::protobuf::ServiceDescriptor* service =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName("pkv.v1.Generation");
  ASSERT_NE(service, nullptr);
  ASSERT_EQ(service->method_count(), 3);  // a new method must be added to this test's thinking
  const double failures = RouterSample(*cluster_, "pkv_router_auth_failures_total");
  const double generated = WorkerSum("pkv_generated_tokens_total");
  const double prompt = WorkerSum("pkv_prompt_tokens_total");
  int refused = 0;
  for (int m = 0; m < service->method_count(); ++m) {
    const std::string method =
        absl::StrCat("/", service->full_name(), "/", service->method(m)->name());
    for (const auto& [what, metadata] : bad) {
      SCOPED_TRACE(absl::StrCat(method, ": ", what));
      const RawResult r = RawCall(RouterChannel(pki_->ca), method, ValidRequest(), metadata);
      EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAUTHENTICATED)
          << r.status.error_message();
      EXPECT_FALSE(absl::StrContains(r.status.error_message(), key));
      EXPECT_TRUE(r.responses.empty());
      ++refused;
    }
  }
  EXPECT_EQ(RouterSample(*cluster_, "pkv_router_auth_failures_total"), failures + refused);
  EXPECT_EQ(WorkerSum("pkv_generated_tokens_total"), generated);
  EXPECT_EQ(WorkerSum("pkv_prompt_tokens_total"), prompt);

  // Health stays open (probes carry no key); with a key the guarded methods answer.
  grpc::health::v1::HealthCheckRequest check;
  const RawResult health =
      RawCall(RouterChannel(pki_->ca), "/grpc.health.v1.Health/Check", check.SerializeAsString());
  ASSERT_TRUE(health.status.ok()) << health.status.error_message();
  grpc::health::v1::HealthCheckResponse serving;
  ASSERT_TRUE(serving.ParseFromString(health.responses.at(0)));
  EXPECT_EQ(serving.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  const RawResult watch = RawCall(RouterChannel(pki_->ca), "/grpc.health.v1.Health/Watch",
                                  check.SerializeAsString(), {}, absl::Milliseconds(500));
  EXPECT_EQ(watch.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_FALSE(watch.responses.empty());
  const RawResult info =
      RawCall(RouterChannel(pki_->ca), "/pkv.v1.Generation/GetModelInfo", "", Bearer(key));
  EXPECT_TRUE(info.status.ok()) << info.status.error_message();
}

TEST_F(SecurityTest, PlaintextClientsAndUntrustedCertificatesCannotConnect) {
  const std::string request = ValidRequest();
  const Metadata key = Bearer((*keys_)[0]);
  struct Attempt {
    const char* what;
    std::shared_ptr<grpc::Channel> channel;
  };
  const Attempt attempts[] = {
      {"plaintext client to the TLS port",
       Channel(cluster_->router_address(), grpc::InsecureChannelCredentials())},
      {"client that does not trust the router's CA", RouterChannel(pki_->wrong_ca)},
      {"client certificate from the wrong CA", RouterChannel(pki_->ca, &pki_->wrong)},
      {"expired client certificate", RouterChannel(pki_->ca, &pki_->expired)},
  };
  for (const Attempt& a : attempts) {
    SCOPED_TRACE(a.what);
    const RawResult r =
        RawCall(a.channel, "/pkv.v1.Generation/Generate", request, key, absl::Seconds(5));
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE) << r.status.error_message();
    EXPECT_TRUE(r.responses.empty());
  }
  EXPECT_TRUE(WaitServing(cluster_->router_address(), absl::Seconds(5), "", Tls(pki_->ca)).ok());
}

// X2/X3: a worker talks only to holders of a certificate from its CA, and with
// --tls_client_names only to the router's identity; Drain included.
TEST_F(SecurityTest, WorkersAcceptOnlyTheRoutersCertificate) {
  const std::string address = cluster_->worker(0).address();
  const std::string load = pkv::v1::GetLoadRequest().SerializeAsString();
  struct Attempt {
    const char* what;
    std::shared_ptr<grpc::ChannelCredentials> credentials;
    grpc::StatusCode code;
  };
  const Attempt attempts[] = {
      {"plaintext", grpc::InsecureChannelCredentials(), grpc::StatusCode::UNAVAILABLE},
      {"no client certificate", Tls(pki_->ca), grpc::StatusCode::UNAVAILABLE},
      {"certificate from the wrong CA", Tls(pki_->ca, &pki_->wrong), grpc::StatusCode::UNAVAILABLE},
      {"expired certificate", Tls(pki_->ca, &pki_->expired), grpc::StatusCode::UNAVAILABLE},
      {"right CA, not the router", Tls(pki_->ca, &pki_->intruder),
       grpc::StatusCode::PERMISSION_DENIED},
      {"the router's certificate", Tls(pki_->ca, &pki_->router), grpc::StatusCode::OK},
  };
  for (const Attempt& a : attempts) {
    SCOPED_TRACE(a.what);
    const RawResult r = RawCall(Channel(address, a.credentials), "/pkv.v1.Worker/GetLoad", load, {},
                                absl::Seconds(5));
    EXPECT_EQ(r.status.error_code(), a.code) << r.status.error_message();
  }
  // The admin RPC from a certificate the CA signed for someone else.
  pkv::v1::DrainRequest drain;
  drain.set_timeout_seconds(1);
  const RawResult r = RawCall(Channel(address, Tls(pki_->ca, &pki_->intruder)),
                              "/pkv.v1.Worker/Drain", drain.SerializeAsString());
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(r.status.error_message(), HasSubstr("pkv-intruder"));
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_TRUE(
      WaitServing(address, absl::Seconds(2), "pkv.v1.Worker", Tls(pki_->ca, &pki_->router)).ok());
  EXPECT_TRUE(cluster_->worker(0).process->Running());
}

// X3: a router whose worker certificate comes from the wrong CA never gets a worker.
TEST_F(SecurityTest, RouterWithAWrongCaCertificateGetsNoWorker) {
  const int port = PickFreePort();
  const std::string address = absl::StrCat("127.0.0.1:", port);
  auto router = Process::Spawn(
      BinDir() + "/pkv-router",
      {"--listen=" + address, absl::StrCat("--metrics_listen=127.0.0.1:", PickFreePort()),
       absl::StrCat("--workers=", cluster_->worker(0).address(), ",",
                    cluster_->worker(1).address()),
       "--tls_cert=" + pki_->router.cert, "--tls_key=" + pki_->router.key,
       "--worker_tls_cert=" + pki_->wrong.cert, "--worker_tls_key=" + pki_->wrong.key,
       "--worker_tls_ca=" + pki_->ca, "--health_interval=100ms"},
      cluster_->log_dir() + "/wrong-ca-router.log");
  ASSERT_TRUE(router.ok()) << router.status();
  absl::SleepFor(absl::Seconds(2));  // ~20 health rounds against each worker
  const RawResult r = RawCall(Channel(address, Tls(pki_->ca)), "/pkv.v1.Generation/Generate",
                              ValidRequest(), {}, absl::Seconds(5));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE) << r.status.error_message();
  EXPECT_THAT(r.status.error_message(), HasSubstr("no healthy worker"));
  EXPECT_FALSE(
      WaitServing(address, absl::Milliseconds(500), "pkv.v1.Generation", Tls(pki_->ca)).ok());
}

// X3, client <-> router mutual TLS: with --tls_require_client_cert a client must show a
// certificate from --tls_ca (and still an API key).
TEST_F(SecurityTest, RequiredClientCertificates) {
  const std::string address = absl::StrCat("127.0.0.1:", PickFreePort());
  auto router = Process::Spawn(
      BinDir() + "/pkv-router",
      {"--listen=" + address, absl::StrCat("--metrics_listen=127.0.0.1:", PickFreePort()),
       absl::StrCat("--workers=", cluster_->worker(0).address()), "--tls_cert=" + pki_->router.cert,
       "--tls_key=" + pki_->router.key, "--tls_ca=" + pki_->ca, "--tls_require_client_cert",
       "--worker_tls_cert=" + pki_->router.cert, "--worker_tls_key=" + pki_->router.key,
       "--worker_tls_ca=" + pki_->ca, "--api_keys_file=" + pki_->dir + "/api_keys"},
      cluster_->log_dir() + "/mtls-router.log");
  ASSERT_TRUE(router.ok()) << router.status();
  const auto with_cert = Tls(pki_->ca, &pki_->client);
  ASSERT_TRUE(WaitServing(address, absl::Seconds(30), "pkv.v1.Generation", with_cert).ok())
      << (*router)->LogTail();
  const Metadata key = Bearer((*keys_)[0]);
  const RawResult ok =
      RawCall(Channel(address, with_cert), "/pkv.v1.Generation/Generate", ValidRequest(), key);
  EXPECT_TRUE(ok.status.ok()) << ok.status.error_message();
  for (const auto& [what, credentials] :
       std::vector<std::pair<std::string, std::shared_ptr<grpc::ChannelCredentials>>>{
           {"no client certificate", Tls(pki_->ca)},
           {"wrong CA", Tls(pki_->ca, &pki_->wrong)},
           {"expired", Tls(pki_->ca, &pki_->expired)}}) {
    SCOPED_TRACE(what);
    const RawResult r = RawCall(Channel(address, credentials), "/pkv.v1.Generation/Generate",
                                ValidRequest(), key, absl::Seconds(5));
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE) << r.status.error_message();
  }
  // A certificate is not a key: without one the call is still refused.
  const RawResult no_key =
      RawCall(Channel(address, with_cert), "/pkv.v1.Generation/Generate", ValidRequest());
  EXPECT_EQ(no_key.status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

// Plaintext is an explicit opt-in, and unusable TLS or key files stop a process at start-up with
// a message naming the flag.
TEST_F(SecurityTest, ProcessesRefuseToStartWithoutTlsOrWithBadFiles) {
  const std::string workers = "--workers=" + cluster_->worker(0).address();
  const std::string listen = absl::StrCat("--listen=127.0.0.1:", PickFreePort());
  const std::string metrics = absl::StrCat("--metrics_listen=127.0.0.1:", PickFreePort());
  struct Start {
    const char* binary;
    std::vector<std::string> args;
    int exit_code;
    std::string message;
  };
  const std::string worker_common = "--model=" + cluster_->model_dir();
  const Start starts[] = {
      {"pkv-router", {workers, listen, metrics}, 2, "or --insecure to serve plaintext"},
      {"pkv-router",
       {workers, listen, metrics, "--tls_cert=" + pki_->router.cert,
        "--tls_key=" + pki_->router.key},
       2,
       "worker connections need mutual TLS"},
      {"pkv-router",
       {workers, listen, metrics, "--insecure", "--tls_cert=" + pki_->expired.cert,
        "--tls_key=" + pki_->expired.key},
       1,
       "the certificate has expired"},
      {"pkv-router",
       {workers, listen, metrics, "--insecure", "--tls_cert=" + pki_->router.cert,
        "--tls_key=" + pki_->worker.key},
       1,
       "is not the private key of the certificate"},
      {"pkv-router",
       {workers, listen, metrics, "--insecure", "--api_keys_file=" + pki_->dir + "/missing"},
       1,
       "--api_keys_file"},
      {"pkv-worker", {listen, metrics, worker_common}, 2, "or --insecure to serve plaintext"},
      {"pkv-worker",
       {listen, metrics, worker_common, "--tls_cert=" + pki_->worker.cert,
        "--tls_key=" + pki_->worker.key},
       2,
       "mutual TLS needs all of --tls_cert, --tls_key and --tls_ca"},
  };
  int n = 0;
  for (const Start& s : starts) {
    SCOPED_TRACE(absl::StrCat(s.binary, " case ", n));
    auto p = Process::Spawn(BinDir() + "/" + s.binary, s.args,
                            absl::StrCat(cluster_->log_dir(), "/refused-", n++, ".log"));
    ASSERT_TRUE(p.ok());
    const std::optional<int> code = (*p)->Wait(absl::Seconds(20));
    EXPECT_EQ(code, s.exit_code) << (*p)->LogTail();
    EXPECT_THAT((*p)->LogTail(), HasSubstr(s.message));
  }
}

// X5/X6: /metrics (on its own port only) and the logs never contain prompt text or a key.
TEST_F(SecurityTest, MetricsAndLogsNeverShowPromptsOrKeys) {
  std::mt19937_64 rng(std::random_device{}());
  const std::string canary = absl::StrCat("zebracanary", absl::Hex(rng()));
  const std::string key = (*keys_)[1];
  pkv::v1::GenerateRequest request;
  request.set_text("Tell me about " + canary + " please");
  request.mutable_sampling()->set_max_tokens(8);
  request.set_session_id(canary);
  const RawResult ok = RawCall(RouterChannel(pki_->ca), "/pkv.v1.Generation/Generate",
                               request.SerializeAsString(), Bearer(key));
  ASSERT_TRUE(ok.status.ok()) << ok.status.error_message();
  // Refused attempts carry the canary as a wrong key, too.
  RawCall(RouterChannel(pki_->ca), "/pkv.v1.Generation/Generate", request.SerializeAsString(),
          Bearer(canary));
  std::vector<std::string> metrics = {cluster_->router_metrics_address()};
  for (int w = 0; w < cluster_->num_workers(); ++w) {
    metrics.push_back(cluster_->worker(w).metrics_address());
  }
  for (const std::string& address : metrics) {
    absl::StatusOr<std::string> text = HttpGet(address, "/metrics");
    ASSERT_TRUE(text.ok()) << address << ": " << text.status();
    EXPECT_FALSE(absl::StrContains(*text, canary)) << address;
    EXPECT_FALSE(absl::StrContains(*text, key)) << address;
  }
  EXPECT_FALSE(HttpGet(cluster_->router_address(), "/metrics").ok());  // not on the gRPC port
  std::vector<std::string> logs = {cluster_->router().log_path()};
  for (int w = 0; w < cluster_->num_workers(); ++w) {
    logs.push_back(cluster_->worker(w).process->log_path());
  }
  for (const std::string& log : logs) {
    const std::string text = ReadFileOrEmpty(log);
    EXPECT_FALSE(text.empty()) << log;
    EXPECT_FALSE(absl::StrContains(text, canary)) << log;
    for (const std::string& k : *keys_) EXPECT_FALSE(absl::StrContains(text, k)) << log;
  }
}

}  // namespace
}  // namespace pkv::testing
