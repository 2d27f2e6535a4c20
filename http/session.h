// One HTTP/1.1 connection (internal to http_server.cc): reads requests with Beast's parser under
// one deadline, hands each to the handler as an Exchange, writes the answer through a queue (one
// asio write in flight), and keeps reading while an answer is pending so that a client that leaves
// is noticed at once. Everything runs on the connection's strand; Exchange calls are posted to it.
// `Stream` is a tcp::socket or an ssl::stream over one.
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "boost/asio.hpp"
#include "boost/asio/ssl.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "http/exchange.h"
#include "http/http_server.h"

namespace pkv::http::internal {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = net::ip::tcp;

// What every connection shares with the server.
struct ServerShared {
  HttpServerOptions options;
  Handler handler;
  std::atomic<int> connections{0};
};

class SessionBase : public std::enable_shared_from_this<SessionBase> {
 public:
  virtual ~SessionBase() = default;
  virtual void Run() = 0;    // on the strand: handshake (TLS), then read the first request
  virtual void Close() = 0;  // on the strand

  // Exchange operations, each posted to the strand by ExchangeImpl; `id` names the exchange, so a
  // call for one that already finished is ignored.
  virtual void OnRespond(uint64_t id, Response response) = 0;
  virtual void OnStartStream(uint64_t id, int status, Headers headers) = 0;
  virtual void OnWrite(uint64_t id, std::string chunk) = 0;
  virtual void OnEnd(uint64_t id) = 0;
  virtual void OnSetGone(uint64_t id, std::function<void()> on_gone) = 0;

  virtual net::any_io_executor strand() = 0;
};

class ExchangeImpl final : public Exchange {
 public:
  ExchangeImpl(Request request, std::shared_ptr<SessionBase> session, uint64_t id)
      : Exchange(std::move(request)), session_(std::move(session)), id_(id) {}

  void Respond(Response response) override {
    Post([s = session_, id = id_, r = std::move(response)]() mutable {
      s->OnRespond(id, std::move(r));
    });
  }
  void StartStream(int status, Headers headers) override {
    Post([s = session_, id = id_, status, h = std::move(headers)]() mutable {
      s->OnStartStream(id, status, std::move(h));
    });
  }
  void Write(std::string chunk) override {
    Post(
        [s = session_, id = id_, c = std::move(chunk)]() mutable { s->OnWrite(id, std::move(c)); });
  }
  void End() override {
    Post([s = session_, id = id_] { s->OnEnd(id); });
  }
  void SetOnGone(std::function<void()> on_gone) override {
    Post([s = session_, id = id_, f = std::move(on_gone)]() mutable {
      s->OnSetGone(id, std::move(f));
    });
  }

 private:
  template <typename F>
  void Post(F&& f) {
    net::post(session_->strand(), std::forward<F>(f));
  }

  const std::shared_ptr<SessionBase> session_;
  const uint64_t id_;
};

template <typename Stream>
class Session final : public SessionBase {
 public:
  Session(Stream stream, std::shared_ptr<ServerShared> shared);
  ~Session() override { Uncount(); }

  void Run() override;
  void Close() override;
  void OnRespond(uint64_t id, Response response) override;
  void OnStartStream(uint64_t id, int status, Headers headers) override;
  void OnWrite(uint64_t id, std::string chunk) override;
  void OnEnd(uint64_t id) override;
  void OnSetGone(uint64_t id, std::function<void()> on_gone) override;
  net::any_io_executor strand() override { return stream_.get_executor(); }

 private:
  // What the write queue holds: a serialized piece of the answer, and whether the exchange is
  // over once it is written.
  struct Piece {
    std::string bytes;
    bool last = false;
  };
  enum class Phase { kReading, kAnswering, kAwaitingNext, kClosed };

  void ReadRequest();
  void OnRead(beast::error_code ec);
  void Dispatch();
  // Reads the socket while an answer is pending: EOF or an error means the client left.
  void Watch();
  void Reject(int status, std::string message);  // an error answer, then close
  void Enqueue(std::string bytes, bool last);
  void WriteNext();
  void OnWritten(beast::error_code ec);
  void Gone();    // the client left mid-exchange
  void Linger();  // after a refusal: stop writing, discard input for a while, then close
  void Discard();
  void ArmTimer(absl::Duration after, bool for_read);
  tcp::socket& socket();
  // Gives the connection's slot back (once): at Close, since a handler may keep its exchange, and
  // with it this object, long after the socket is gone.
  void Uncount() {
    if (counted_) shared_->connections.fetch_sub(1);
    counted_ = false;
  }
  bool current(uint64_t id) const { return phase_ == Phase::kAnswering && id == exchange_id_; }

  Stream stream_;
  const std::shared_ptr<ServerShared> shared_;
  net::steady_timer read_timer_;
  net::steady_timer write_timer_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  Phase phase_ = Phase::kReading;
  bool read_timed_out_ = false;
  bool watching_ = false;
  bool keep_alive_ = false;
  bool close_after_write_ = false;
  bool streaming_ = false;
  bool rejected_ = false;  // the server refused the request (Reject): linger, then close
  std::string linger_buffer_;
  size_t lingered_bytes_ = 0;
  uint64_t exchange_id_ = 0;
  uint64_t answered_id_ = 0;  // the last exchange whose answer was queued whole
  std::function<void()> on_gone_;
  std::deque<Piece> queue_;
  size_t queued_bytes_ = 0;
  bool writing_ = false;
  bool counted_ = true;  // holds one of shared_->connections
};

}  // namespace pkv::http::internal
