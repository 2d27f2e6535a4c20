// pkv-grpc-hop: what one more gRPC hop costs on gRPC 1.51's callback API, and what part of it a
// long-lived multiplexed stream would save (issue 18, the router's cost). Three roles, one process
// each, talking over loopback with the generic (ByteBuffer) API, every reaction non-blocking as in
// the router and the worker:
//   server  --listen A              echoes every message it reads on any stream (the "worker")
//   proxy   --listen P --upstream A --mux=false|true|pool
//                                   per incoming stream, reads one request and forwards it: a new
//                                   upstream call per request (mux=false, the router today), a
//                                   message on one long-lived upstream bidi stream shared by all
//                                   requests (mux=true), or the request written into a call opened
//                                   beforehand (mux=pool: 16 kept open, one reopened per request);
//                                   relays the reply, then finishes
//   async_proxy --listen P --upstream A --threads N
//                                   the mux=false proxy on the completion-queue API (N threads
//                                   polling one queue; no callback executor)
//   inproc_proxy --listen P         the mux=false proxy and the echo service on one grpc::Server:
//                                   the proxy reaches the echo over gRPC's in-process transport
//                                   (a channel from Server::InProcessChannel, method Echo), the
//                                   router -> worker leg of a router hosted in the worker's process
//   client  --target T --mux=false|true --rate R --n N
//                                   sends N requests at R/s (constant arrivals), each a new call
//                                   (mux=false, like `pkv bench serve`) or a message on one bidi
//                                   stream (mux=true); prints p50/p90/p99 of the time from
//                                   starting the request to reading its reply
// The payload is 64 bytes whose first 8 are the request's id (how mux replies find their call).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"

namespace {

using Clock = std::chrono::steady_clock;
using grpc::ByteBuffer;
constexpr char kMethod[] = "/pkv.hop.Hop/Call";
// inproc_proxy's upstream method: the echo, registered beside the proxy on the same server.
constexpr char kEchoMethod[] = "/pkv.hop.Hop/Echo";

ByteBuffer MakePayload(uint64_t id) {
  char bytes[64] = {};
  std::memcpy(bytes, &id, sizeof(id));
  grpc::Slice slice(bytes, sizeof(bytes));
  return ByteBuffer(&slice, 1);
}

uint64_t PayloadId(const ByteBuffer& buffer) {
  grpc::Slice slice;
  if (!buffer.DumpToSingleSlice(&slice).ok() || slice.size() < 8) return ~0ull;
  uint64_t id = 0;
  std::memcpy(&id, slice.begin(), sizeof(id));
  return id;
}

// ---- server: echo every message read, in order, one write in flight.
class EchoReactor final : public grpc::ServerGenericBidiReactor {
 public:
  EchoReactor() { StartRead(&in_); }
  void OnReadDone(bool ok) override {
    bool read_again = false;
    {
      absl::MutexLock lock(&mu_);
      if (!ok) {
        reads_done_ = true;
      } else {
        queue_.push_back(in_);
        in_.Clear();
        read_again = true;
      }
    }
    if (read_again) StartRead(&in_);  // in_ is ours again: the read completed
    Next();
  }
  void OnWriteDone(bool) override {
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      queue_.pop_front();
    }
    Next();
  }
  void OnDone() override { delete this; }

 private:
  // Starts the next write, or finishes once the peer half-closed and everything was written;
  // gRPC operations are issued unlocked (a reaction may run inline).
  void Next() {
    ByteBuffer* write = nullptr;
    bool finish = false;
    {
      absl::MutexLock lock(&mu_);
      if (writing_ || finished_) return;
      if (!queue_.empty()) {
        writing_ = true;
        write = &queue_.front();  // deque: stable under push_back
      } else if (reads_done_) {
        finished_ = finish = true;
      }
    }
    if (write != nullptr) StartWrite(write);
    if (finish) Finish(grpc::Status::OK);
  }
  absl::Mutex mu_;
  ByteBuffer in_;
  std::deque<ByteBuffer> queue_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

class EchoService final : public grpc::CallbackGenericService {
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext*) override {
    return new EchoReactor;
  }
};

// ---- client side of one request as its own call: write + half-close, read one reply.
class OneCall final : public grpc::ClientBidiReactor<ByteBuffer, ByteBuffer> {
 public:
  using Done = std::function<void(bool ok, ByteBuffer reply)>;
  OneCall(grpc::GenericStub* stub, ByteBuffer request, Done done, const char* method = kMethod)
      : request_(std::move(request)), done_(std::move(done)) {
    ctx_.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    stub->PrepareBidiStreamingCall(&ctx_, method, grpc::StubOptions(), this);
    StartWrite(&request_, grpc::WriteOptions().set_last_message());
    StartRead(&reply_);
    StartCall();
  }
  void OnReadDone(bool ok) override {
    if (ok && !replied_) {
      replied_ = true;
      done_(true, reply_);  // at the reply, not at the status: what TTFT measures
    }
  }
  void OnDone(const grpc::Status&) override {
    if (!replied_) done_(false, ByteBuffer());
    delete this;
  }

 private:
  grpc::ClientContext ctx_;
  ByteBuffer request_, reply_;
  Done done_;
  bool replied_ = false;
};

// ---- a call opened before its request is known (its HTTP/2 stream and the server's reactor
// exist), taking one request later: the "pre-opened stream" alternative to multiplexing.
class PreCall final : public grpc::ClientBidiReactor<ByteBuffer, ByteBuffer> {
 public:
  using Done = std::function<void(bool ok, ByteBuffer reply)>;
  explicit PreCall(grpc::GenericStub* stub) {
    ctx_.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    stub->PrepareBidiStreamingCall(&ctx_, kMethod, grpc::StubOptions(), this);
    StartRead(&reply_);
    StartCall();  // sends the headers now
  }
  void Send(ByteBuffer request, Done done) {
    request_ = std::move(request);
    done_ = std::move(done);
    StartWrite(&request_, grpc::WriteOptions().set_last_message());
  }
  void OnReadDone(bool ok) override {
    if (ok && !replied_) {
      replied_ = true;
      done_(true, reply_);
    }
  }
  void OnDone(const grpc::Status&) override {
    if (!replied_ && done_) done_(false, ByteBuffer());
    delete this;
  }

 private:
  grpc::ClientContext ctx_;
  ByteBuffer request_, reply_;
  Done done_;
  bool replied_ = false;
};

// Keeps `size` pre-opened calls; each request takes one, then opens a replacement (Refill).
class PreCallPool {
 public:
  PreCallPool(grpc::GenericStub* stub, int size) : stub_(stub) {
    absl::MutexLock lock(&mu_);
    for (int i = 0; i < size; ++i) idle_.push_back(new PreCall(stub_));
  }
  PreCall* Take() {
    PreCall* call = nullptr;
    {
      absl::MutexLock lock(&mu_);
      if (!idle_.empty()) {
        call = idle_.front();
        idle_.pop_front();
      }
    }
    return call != nullptr ? call : new PreCall(stub_);
  }
  // Opens a replacement; called after the request was sent on the call Take gave.
  void Refill() {
    PreCall* fresh = new PreCall(stub_);
    absl::MutexLock lock(&mu_);
    idle_.push_back(fresh);
  }

 private:
  grpc::GenericStub* const stub_;
  absl::Mutex mu_;
  std::deque<PreCall*> idle_ ABSL_GUARDED_BY(mu_);
};

// ---- one long-lived bidi stream carrying many requests; replies matched by id.
class MuxStream final : public grpc::ClientBidiReactor<ByteBuffer, ByteBuffer> {
 public:
  using Done = std::function<void(ByteBuffer reply)>;
  explicit MuxStream(grpc::GenericStub* stub) {
    stub->PrepareBidiStreamingCall(&ctx_, kMethod, grpc::StubOptions(), this);
    StartRead(&in_);
    StartCall();
  }
  void Send(uint64_t id, ByteBuffer request, Done done) {
    ByteBuffer* write = nullptr;
    {
      absl::MutexLock lock(&mu_);
      pending_[id] = std::move(done);
      queue_.push_back(std::move(request));
      if (!writing_) write = StartNextLocked();
    }
    if (write != nullptr) StartWrite(write);
  }
  void OnWriteDone(bool) override {
    ByteBuffer* write = nullptr;
    {
      absl::MutexLock lock(&mu_);
      queue_.pop_front();
      writing_ = false;
      write = StartNextLocked();
    }
    if (write != nullptr) StartWrite(write);
  }
  void OnReadDone(bool ok) override {
    if (!ok) return;
    Done done;
    {
      absl::MutexLock lock(&mu_);
      auto it = pending_.find(PayloadId(in_));
      if (it != pending_.end()) {
        done = std::move(it->second);
        pending_.erase(it);
      }
    }
    ByteBuffer reply = in_;
    in_.Clear();
    StartRead(&in_);
    if (done) done(std::move(reply));
  }
  void OnDone(const grpc::Status& status) override {
    std::fprintf(stderr, "mux stream ended: %s\n", status.error_message().c_str());
  }

 private:
  ByteBuffer* StartNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (queue_.empty()) return nullptr;
    writing_ = true;
    return &queue_.front();  // deque: stable under push_back
  }
  grpc::ClientContext ctx_;
  ByteBuffer in_;
  absl::Mutex mu_;
  std::deque<ByteBuffer> queue_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  std::map<uint64_t, Done> pending_ ABSL_GUARDED_BY(mu_);
};

// ---- proxy: one request per incoming stream, forwarded upstream, reply relayed, then Finish.
class ProxyReactor final : public grpc::ServerGenericBidiReactor {
 public:
  // `method`: what the upstream call invokes (kMethod on a separate echo server; kEchoMethod
  // in-process).
  ProxyReactor(grpc::GenericStub* stub, MuxStream* mux, PreCallPool* pool,
               const char* method = kMethod)
      : stub_(stub), mux_(mux), pool_(pool), method_(method) {
    StartRead(&in_);
  }
  void OnReadDone(bool ok) override {
    if (!ok) {
      if (!forwarded_) Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no request"));
      return;
    }
    forwarded_ = true;
    if (mux_ != nullptr) {
      mux_->Send(PayloadId(in_), in_, [this](ByteBuffer reply) { Relay(std::move(reply)); });
    } else if (pool_ != nullptr) {
      pool_->Take()->Send(in_, [this](bool ok, ByteBuffer reply) {
        if (ok) {
          Relay(std::move(reply));
        } else {
          Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "upstream failed"));
        }
      });
      pool_->Refill();
    } else {
      new OneCall(
          stub_, in_,
          [this](bool ok, ByteBuffer reply) {
            if (ok) {
              Relay(std::move(reply));
            } else {
              Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "upstream failed"));
            }
          },
          method_);
    }
  }
  void OnWriteDone(bool) override { Finish(grpc::Status::OK); }
  void OnDone() override { delete this; }

 private:
  void Relay(ByteBuffer reply) {
    out_ = std::move(reply);
    StartWrite(&out_);
  }
  grpc::GenericStub* const stub_;
  MuxStream* const mux_;
  PreCallPool* const pool_;
  const char* const method_;
  ByteBuffer in_, out_;
  bool forwarded_ = false;
};

class ProxyService final : public grpc::CallbackGenericService {
 public:
  ProxyService(grpc::GenericStub* stub, MuxStream* mux, PreCallPool* pool)
      : stub_(stub), mux_(mux), pool_(pool) {}
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext*) override {
    return new ProxyReactor(stub_, mux_, pool_);
  }

 private:
  grpc::GenericStub* const stub_;
  MuxStream* const mux_;
  PreCallPool* const pool_;
};

// ---- proxy and echo on one server (inproc_proxy): calls of kEchoMethod are the echo, every other
// call is proxied to kEchoMethod over the server's own in-process channel (set once the server
// runs, before any client connects: the role connects its clients only after start-up).
class InProcessProxyService final : public grpc::CallbackGenericService {
 public:
  void SetUpstream(std::shared_ptr<grpc::Channel> channel) {
    stub_ = std::make_unique<grpc::GenericStub>(std::move(channel));
  }
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* ctx) override {
    if (ctx->method() == kEchoMethod) return new EchoReactor;
    return new ProxyReactor(stub_.get(), nullptr, nullptr, kEchoMethod);
  }

 private:
  std::unique_ptr<grpc::GenericStub> stub_;
};

int ServeInProcessProxy(const std::string& listen) {
  InProcessProxyService service;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials());
  builder.RegisterCallbackGenericService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) return 1;
  service.SetUpstream(server->InProcessChannel(grpc::ChannelArguments()));
  server->Wait();
  return 0;
}

// ---- the same proxy on the completion-queue API: `threads` threads poll one CQ that carries both
// the incoming calls and the upstream calls, and every step runs on the thread that polled it (no
// callback executor in between). One request per incoming call, a new upstream call for it.
class AsyncProxy {
 public:
  AsyncProxy(const std::string& listen, std::shared_ptr<grpc::Channel> upstream, int threads)
      : stub_(std::move(upstream)) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort(listen, grpc::InsecureServerCredentials());
    builder.RegisterAsyncGenericService(&service_);
    cq_ = builder.AddCompletionQueue();
    server_ = builder.BuildAndStart();
    for (int i = 0; i < 64; ++i) new Call(this);  // calls requested ahead
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Poll(); });
  }
  void Wait() { server_->Wait(); }

 private:
  enum Op {
    kArrived,
    kReadDown,
    kUpStarted,
    kUpWritten,
    kUpRead,
    kUpFinished,
    kDownWritten,
    kDownFinished
  };
  struct Call;
  struct Tag {
    Call* call;
    Op op;
  };
  // Steps: arrived -> read the request -> start upstream -> write it (last) + read the reply ->
  // write the reply downstream -> finish downstream; the upstream's own Finish is collected too.
  struct Call {
    explicit Call(AsyncProxy* p) : proxy(p), stream(&sctx) {
      Arm(kArrived);
      proxy->service_.RequestCall(&sctx, &stream, proxy->cq_.get(), proxy->cq_.get(),
                                  &tags[kArrived]);
    }
    void Arm(Op op) {
      tags[op] = {this, op};
      ++pending;
    }
    // Returns true when the call is complete and may be deleted.
    bool Step(Op op, bool ok) {
      --pending;
      switch (op) {
        case kArrived:
          if (!ok) return pending == 0;
          new Call(proxy);
          Arm(kReadDown);
          stream.Read(&in, &tags[kReadDown]);
          break;
        case kReadDown:
          if (!ok) {
            Arm(kDownFinished);
            stream.Finish(grpc::Status::OK, &tags[kDownFinished]);
            break;
          }
          cctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
          up = proxy->stub_.PrepareCall(&cctx, kMethod, proxy->cq_.get());
          Arm(kUpStarted);
          up->StartCall(&tags[kUpStarted]);
          break;
        case kUpStarted:
          Arm(kUpWritten);
          Arm(kUpRead);
          up->WriteLast(in, grpc::WriteOptions(), &tags[kUpWritten]);
          up->Read(&out, &tags[kUpRead]);
          break;
        case kUpWritten:
          break;
        case kUpRead:
          Arm(kUpFinished);
          up->Finish(&up_status, &tags[kUpFinished]);
          Arm(kDownWritten);
          stream.Write(out, &tags[kDownWritten]);
          break;
        case kUpFinished:
          break;
        case kDownWritten:
          Arm(kDownFinished);
          stream.Finish(grpc::Status::OK, &tags[kDownFinished]);
          break;
        case kDownFinished:
          break;
      }
      return pending == 0;
    }
    AsyncProxy* const proxy;
    grpc::GenericServerContext sctx;
    grpc::GenericServerAsyncReaderWriter stream;
    grpc::ClientContext cctx;
    std::unique_ptr<grpc::GenericClientAsyncReaderWriter> up;
    grpc::Status up_status;
    ByteBuffer in, out;
    Tag tags[8];
    std::atomic<int> pending{0};
    absl::Mutex mu;  // steps of one call may complete on different threads
  };
  void Poll() {
    void* raw = nullptr;
    bool ok = false;
    while (cq_->Next(&raw, &ok)) {
      Tag* tag = static_cast<Tag*>(raw);
      Call* call = tag->call;
      bool done = false;
      {
        absl::MutexLock lock(&call->mu);
        done = call->Step(tag->op, ok);
      }
      if (done) delete call;
    }
  }
  grpc::AsyncGenericService service_;
  grpc::GenericStub stub_;
  std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  std::unique_ptr<grpc::Server> server_;
  std::vector<std::thread> threads_;
};

std::string Arg(int argc, char** argv, const std::string& name, const std::string& fallback) {
  const std::string prefix = "--" + name + "=";
  for (int i = 2; i < argc; ++i) {
    if (std::strncmp(argv[i], prefix.c_str(), prefix.size()) == 0) return argv[i] + prefix.size();
  }
  return fallback;
}

std::shared_ptr<grpc::Channel> Connect(const std::string& target) {
  auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10));
  return channel;
}

int Serve(const std::string& listen, grpc::CallbackGenericService* service) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials());
  builder.RegisterCallbackGenericService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) return 1;
  server->Wait();
  return 0;
}

int RunClient(const std::string& target, bool mux, double rate, int n) {
  auto channel = Connect(target);
  grpc::GenericStub stub(channel);
  std::unique_ptr<MuxStream> stream;
  if (mux) stream = std::make_unique<MuxStream>(&stub);
  absl::Mutex mu;
  std::vector<double> latencies_us;
  int done = 0, failed = 0;
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) {
    std::this_thread::sleep_until(t0 + std::chrono::duration<double>(i / rate));
    const auto sent = Clock::now();
    auto finish = [&, sent](bool ok) {
      const double us = std::chrono::duration<double, std::micro>(Clock::now() - sent).count();
      absl::MutexLock lock(&mu);
      ++done;
      if (ok) latencies_us.push_back(us);
      if (!ok) ++failed;
    };
    if (mux) {
      stream->Send(i, MakePayload(i), [finish](ByteBuffer) { finish(true); });
    } else {
      new OneCall(&stub, MakePayload(i), [finish](bool ok, ByteBuffer) { finish(ok); });
    }
  }
  {
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(
        +[](int* d) { return *d > 0; }, &done));  // at least one
    auto all = [&]() { return done == n; };
    mu.AwaitWithTimeout(absl::Condition(&all), absl::Seconds(20));
  }
  absl::MutexLock lock(&mu);
  std::sort(latencies_us.begin(), latencies_us.end());
  auto pct = [&](double p) {
    return latencies_us.empty()
               ? 0.0
               : latencies_us[std::min<size_t>(latencies_us.size() - 1,
                                               static_cast<size_t>(p * latencies_us.size()))];
  };
  double sum = 0;
  for (double v : latencies_us) sum += v;
  std::printf("target %s %s: %zu ok %d failed; us p50 %.1f p90 %.1f p99 %.1f mean %.1f\n",
              target.c_str(), mux ? "mux" : "call-per-request", latencies_us.size(), failed,
              pct(0.5), pct(0.9), pct(0.99), latencies_us.empty() ? 0 : sum / latencies_us.size());
  std::fflush(stdout);
  std::_Exit(0);  // the mux stream stays open; no orderly teardown needed for a measurement
}

}  // namespace

int main(int argc, char** argv) {
  const std::string role = argc > 1 ? argv[1] : "";
  if (role == "server") {
    EchoService service;
    return Serve(Arg(argc, argv, "listen", "127.0.0.1:50900"), &service);
  }
  if (role == "proxy") {
    auto channel = Connect(Arg(argc, argv, "upstream", "127.0.0.1:50900"));
    grpc::GenericStub stub(channel);
    std::unique_ptr<MuxStream> mux;
    std::unique_ptr<PreCallPool> pool;
    const std::string mode = Arg(argc, argv, "mux", "false");
    if (mode == "true") mux = std::make_unique<MuxStream>(&stub);
    if (mode == "pool") pool = std::make_unique<PreCallPool>(&stub, 16);
    ProxyService service(&stub, mux.get(), pool.get());
    return Serve(Arg(argc, argv, "listen", "127.0.0.1:50901"), &service);
  }
  if (role == "inproc_proxy") {
    return ServeInProcessProxy(Arg(argc, argv, "listen", "127.0.0.1:50905"));
  }
  if (role == "async_proxy") {
    AsyncProxy proxy(Arg(argc, argv, "listen", "127.0.0.1:50904"),
                     Connect(Arg(argc, argv, "upstream", "127.0.0.1:50900")),
                     std::stoi(Arg(argc, argv, "threads", "2")));
    proxy.Wait();
    return 0;
  }
  if (role == "client") {
    return RunClient(
        Arg(argc, argv, "target", "127.0.0.1:50900"), Arg(argc, argv, "mux", "false") == "true",
        std::stod(Arg(argc, argv, "rate", "200")), std::stoi(Arg(argc, argv, "n", "1000")));
  }
  std::fprintf(
      stderr,
      "usage: pkv-grpc-hop server|proxy|async_proxy|inproc_proxy|client [--flag=value...]\n");
  return 2;
}
