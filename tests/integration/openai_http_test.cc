// The router's OpenAI-compatible HTTP API with clients nobody here wrote: the official `openai`
// npm SDK (tests/openai/sdk_check.mjs: streamed and whole chat and text completions, logprobs,
// models, and its typed errors for 400/401/404/429) and curl (SSE framing), against a real
// pkv-router and CPU pkv-workers on loopback. Also: a client that disconnects mid-stream frees
// its pages at the worker.
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/harness/cluster.h"
#include "tests/harness/loopback.h"
#include "tests/harness/process.h"
#include "tests/harness/raw_http.h"
#include "tests/integration/reliability_util.h"

namespace pkv::testing {
namespace {

using ::testing::HasSubstr;

constexpr char kApiKey[] = "sk-pkv-test-key";

// A Llama-3-style template (the tiny model's tokenizer has no such special tokens: they are plain
// text to it, which is all this test needs).
constexpr char kChatTemplate[] =
    "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>"
    "\n\n{{ m['content'] | trim }}<|eot_id|>{% endfor %}{% if add_generation_prompt %}"
    "<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}";

std::string SourceDir() { return PKV_SOURCE_ROOT; }

// The tiny model plus a chat_template.jinja.
std::string ModelWithChatTemplate() {
  const std::string dir = MakeTempDir("pkv-chat-model") + "/tiny-chat";
  const std::string cmd = absl::StrCat("cp -r ", TinyModelDir(), " ", dir);
  if (std::system(cmd.c_str()) != 0) return "";
  std::ofstream(dir + "/chat_template.jinja") << kChatTemplate;
  return dir;
}

std::string KeysFile() {
  const std::string path = MakeTempDir("pkv-keys") + "/keys";
  std::ofstream(path) << kApiKey << "\n";
  return path;
}

std::unique_ptr<Cluster> StartHttpCluster(const std::string& model_dir) {
  ClusterOptions o;
  o.num_workers = 1;
  o.http = true;
  o.model_dir = model_dir;
  // Steps of at least 5 ms, so a stream of the whole context lasts seconds (the 429 check holds
  // the only admission slot with one); nothing asserts a speed.
  o.worker_args = {"--enable_test_faults", "--test_fault=slow_step_ms:5"};
  // One stream at a time; a request waits at most 500 ms for it, so one that meets a long stream
  // gets a 429 (and one that meets a stream just ending waits instead of failing).
  o.router_args = {"--max_inflight=1", "--max_queue=1", "--queue_timeout=500ms",
                   "--api_keys_file=" + KeysFile()};
  absl::StatusOr<std::unique_ptr<Cluster>> c = Cluster::Start(o);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(*c) : nullptr;
}

// Runs the SDK check; its output goes to the test log on failure.
void RunSdkCheck(Cluster& cluster, bool chat) {
  std::vector<std::string> args = {SourceDir() + "/tests/openai/run_sdk_check.sh",
                                   "--base-url",
                                   absl::StrCat("http://", cluster.router_http_address(), "/v1"),
                                   "--api-key",
                                   kApiKey,
                                   "--model",
                                   cluster.model_dir()};
  if (chat) args.push_back("--chat");
  const std::string log = cluster.log_dir() + "/sdk_check.log";
  absl::StatusOr<std::unique_ptr<Process>> p = Process::Spawn("/bin/bash", args, log);
  ASSERT_TRUE(p.ok()) << p.status();
  const std::optional<int> rc = (*p)->Wait(absl::Seconds(240));
  EXPECT_EQ(rc, std::optional<int>(0)) << (*p)->LogTail(8000) << "\n" << cluster.Logs();
}

TEST(OpenAiHttpTest, OfficialSdkWithChatTemplate) {
  std::unique_ptr<Cluster> cluster = StartHttpCluster(ModelWithChatTemplate());
  ASSERT_NE(cluster, nullptr);
  RunSdkCheck(*cluster, /*chat=*/true);
  EXPECT_TRUE(WaitWorkerQuiescent(cluster->worker(0), absl::Seconds(20)).ok());
}

TEST(OpenAiHttpTest, OfficialSdkWithoutChatTemplate) {
  std::unique_ptr<Cluster> cluster = StartHttpCluster(TinyModelDir());
  ASSERT_NE(cluster, nullptr);
  RunSdkCheck(*cluster, /*chat=*/false);
  EXPECT_TRUE(WaitWorkerQuiescent(cluster->worker(0), absl::Seconds(20)).ok());
}

// curl's view of a streamed completion: every event is "data: <JSON object>\n\n" and the stream
// ends with "data: [DONE]\n\n"; the content type is text/event-stream.
TEST(OpenAiHttpTest, CurlSeesServerSentEvents) {
  std::unique_ptr<Cluster> cluster = StartHttpCluster(TinyModelDir());
  ASSERT_NE(cluster, nullptr);
  const std::string out = cluster->log_dir() + "/curl.out";
  const std::string cmd = absl::StrCat(
      "curl -sS -N -i --max-time 60 -H 'Authorization: Bearer ", kApiKey,
      "' -H 'Content-Type: application/json' -d '{\"prompt\": \"hi\", \"max_tokens\": 5, "
      "\"stream\": true, \"ignore_eos\": true, \"stream_options\": {\"include_usage\": true}}' "
      "http://",
      cluster->router_http_address(), "/v1/completions > ", out);
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::ifstream in(out);
  const std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t head_end = raw.find("\r\n\r\n");
  ASSERT_NE(head_end, std::string::npos) << raw;
  EXPECT_THAT(raw.substr(0, head_end), HasSubstr("content-type: text/event-stream"));
  const std::string body = raw.substr(head_end + 4);
  ASSERT_TRUE(body.size() > 2 && body.substr(body.size() - 2) == "\n\n") << body;
  const std::vector<std::string> events = absl::StrSplit(body.substr(0, body.size() - 2), "\n\n");
  // Token events (the router may coalesce a slow reader's tokens into fewer), finish, usage,
  // [DONE].
  ASSERT_GE(events.size(), 4u) << body;
  EXPECT_EQ(events.back(), "data: [DONE]");
  int tokens = 0;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    ASSERT_EQ(events[i].rfind("data: ", 0), 0u) << events[i];
    EXPECT_EQ(events[i].find('\n'), std::string::npos) << "one line per event: " << events[i];
    absl::StatusOr<JsonValue> json = ParseJson(events[i].substr(6));
    ASSERT_TRUE(json.ok() && json->is_object()) << events[i];
    EXPECT_EQ(json->Find("object")->str(), "text_completion");
    const JsonValue* choices = json->Find("choices");
    if (!choices->items().empty() && choices->items()[0].Find("finish_reason")->is_null()) ++tokens;
  }
  EXPECT_GE(tokens, 1);
  const JsonValue usage = ParseJson(events[events.size() - 2].substr(6))->Find("usage")[0];
  EXPECT_EQ(usage.Find("completion_tokens")->integer(), 5);
}

// A client that leaves mid-stream: the router cancels the call, the worker drops the sequence and
// its pages within a step, and the HTTP metrics count a 499.
TEST(OpenAiHttpTest, DisconnectFreesWorkerPages) {
  std::unique_ptr<Cluster> cluster = StartHttpCluster(TinyModelDir());
  ASSERT_NE(cluster, nullptr);
  const int port = std::stoi(cluster->router_http_address().substr(10));
  const int fd = ConnectLoopback(port);
  ASSERT_GE(fd, 0);
  const std::string request =
      HttpRequest("POST", "/v1/completions",
                  R"({"prompt": "a long story", "ignore_eos": true, "stream": true})",
                  absl::StrCat("Authorization: Bearer ", kApiKey, "\r\n"));
  ASSERT_EQ(write(fd, request.data(), request.size()), static_cast<ssize_t>(request.size()));
  timeval tv{30, 0};  // a hang detector, not a bound
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char buf[4096];
  std::string got;
  while (got.find("data: ") == std::string::npos) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    ASSERT_GT(n, 0) << got;
    got.append(buf, static_cast<size_t>(n));
  }
  ASSERT_THAT(got, HasSubstr("HTTP/1.1 200"));
  // The worker publishes its page gauge after the step that sent the token: poll for it.
  EXPECT_TRUE(WaitFor(
      [&] {
        return ScrapeMetric(cluster->worker(0).metrics_address(),
                            "pkv_kv_cache_pages{state=\"used\"}") > 0;
      },
      absl::Seconds(5)))
      << "the stream never held pages at the worker";
  close(fd);
  EXPECT_TRUE(WaitWorkerQuiescent(cluster->worker(0), absl::Seconds(20)).ok());
  EXPECT_TRUE(WaitFor(
      [&] {
        return ScrapeMetric(cluster->router_metrics_address(),
                            "pkv_router_http_requests_total{path=\"/v1/completions\",status="
                            "\"499\"}") == 1;
      },
      absl::Seconds(10)));
}

}  // namespace
}  // namespace pkv::testing
