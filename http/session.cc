#include "http/session.h"

#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace pkv::http::internal {
namespace {

template <typename Stream>
constexpr bool kIsTls = !std::is_same_v<Stream, tcp::socket>;

std::chrono::nanoseconds ToChrono(absl::Duration d) { return absl::ToChronoNanoseconds(d); }

// Lingering close after a refusal: at most this long, and this many discarded bytes.
constexpr absl::Duration kLingerTime = absl::Seconds(5);
constexpr size_t kMaxLingerBytes = 64 << 20;

// An error answer's body: the OpenAI error shape, which plain clients read as well as any.
std::string ErrorBody(int status, std::string_view message) {
  std::string escaped;
  for (char c : message) {
    if (c == '"' || c == '\\') escaped.push_back('\\');
    if (static_cast<unsigned char>(c) >= 0x20) escaped.push_back(c);
  }
  return absl::StrCat(R"({"error":{"message":")", escaped, R"(","type":")",
                      status == 408 ? "timeout" : "invalid_request_error",
                      R"(","param":null,"code":null}})", "\n");
}

}  // namespace

template <typename Stream>
Session<Stream>::Session(Stream stream, std::shared_ptr<ServerShared> shared)
    : stream_(std::move(stream)),
      shared_(std::move(shared)),
      read_timer_(stream_.get_executor()),
      write_timer_(stream_.get_executor()) {}

template <typename Stream>
tcp::socket& Session<Stream>::socket() {
  if constexpr (kIsTls<Stream>) {
    return stream_.next_layer();
  } else {
    return stream_;
  }
}

template <typename Stream>
void Session<Stream>::Run() {
  if constexpr (kIsTls<Stream>) {
    ArmTimer(shared_->options.read_timeout, /*for_read=*/true);
    stream_.async_handshake(net::ssl::stream_base::server,
                            [self = shared_from_this(), this](beast::error_code ec) {
                              read_timer_.cancel();
                              if (ec) return Close();
                              ReadRequest();
                            });
  } else {
    ReadRequest();
  }
}

template <typename Stream>
void Session<Stream>::ArmTimer(absl::Duration after, bool for_read) {
  net::steady_timer& timer = for_read ? read_timer_ : write_timer_;
  timer.expires_after(ToChrono(after));
  timer.async_wait([self = shared_from_this(), this, for_read](beast::error_code ec) {
    if (ec || phase_ == Phase::kClosed) return;  // cancelled: the operation finished in time
    beast::error_code ignored;
    if (for_read) {
      // Cancelling fails the pending read, whose handler then answers 408 on the still open
      // socket (closing it here would lose the answer) or closes an idle connection.
      read_timed_out_ = true;
      socket().cancel(ignored);
      return;
    }
    // Closing the socket fails the pending write, whose handler then cleans up.
    socket().close(ignored);
  });
}

template <typename Stream>
void Session<Stream>::ReadRequest() {
  phase_ = Phase::kReading;
  read_timed_out_ = false;
  parser_.emplace();
  parser_->header_limit(static_cast<uint32_t>(shared_->options.max_header_bytes));
  parser_->body_limit(shared_->options.max_body_bytes);
  ArmTimer(shared_->options.read_timeout, /*for_read=*/true);
  bhttp::async_read(
      stream_, buffer_, *parser_,
      [self = shared_from_this(), this](beast::error_code ec, size_t) { OnRead(ec); });
}

template <typename Stream>
void Session<Stream>::OnRead(beast::error_code ec) {
  read_timer_.cancel();
  if (phase_ == Phase::kClosed) return;
  if (!ec) return Dispatch();
  if (read_timed_out_) {
    // A keep-alive connection that sent nothing is simply closed; a partial request is told why.
    if (!parser_->got_some()) return Close();
    return Reject(408,
                  "the request did not arrive in time (headers and body must be complete "
                  "within the server's read timeout)");
  }
  if (ec == bhttp::error::body_limit) {
    return Reject(413, absl::StrCat("the request body is larger than the limit of ",
                                    shared_->options.max_body_bytes, " bytes"));
  }
  if (ec == bhttp::error::header_limit) {
    return Reject(431, absl::StrCat("the request headers are larger than the limit of ",
                                    shared_->options.max_header_bytes, " bytes"));
  }
  if (ec == bhttp::error::end_of_stream || ec == net::error::eof ||
      ec == net::error::connection_reset || ec == net::ssl::error::stream_truncated ||
      !parser_->got_some()) {
    return Close();
  }
  Reject(400, absl::StrCat("malformed HTTP request: ", ec.message()));
}

template <typename Stream>
void Session<Stream>::Dispatch() {
  bhttp::request<bhttp::string_body> message = parser_->release();
  Request request;
  request.method = std::string(message.method_string());
  request.target = std::string(message.target());
  request.path = request.target.substr(0, request.target.find('?'));
  for (const auto& field : message) {
    request.headers.emplace_back(absl::AsciiStrToLower(std::string(field.name_string())),
                                 std::string(field.value()));
  }
  request.body = std::move(message.body());
  beast::error_code ignored;
  const tcp::endpoint peer = socket().remote_endpoint(ignored);
  request.peer = absl::StrCat(peer.address().to_string(), ":", peer.port());
  keep_alive_ = message.keep_alive();
  close_after_write_ = false;
  streaming_ = false;
  on_gone_ = nullptr;
  phase_ = Phase::kAnswering;
  ++exchange_id_;
  auto exchange =
      std::make_shared<ExchangeImpl>(std::move(request), shared_from_this(), exchange_id_);
  Watch();
  shared_->handler(std::move(exchange));
}

template <typename Stream>
void Session<Stream>::Watch() {
  // Bytes that arrive meanwhile (a pipelined request) stay in buffer_ for the next parse. A client
  // that already sent the start of its next request is not watched: that request is parsed from
  // buffer_ once the answer is written (a pending watch would hold the socket, and the pipelined
  // request would wait for bytes that never come).
  if (watching_ || buffer_.size() > 0) return;
  watching_ = true;
  stream_.async_read_some(buffer_.prepare(4096),
                          [self = shared_from_this(), this](beast::error_code ec, size_t n) {
                            watching_ = false;
                            if (phase_ == Phase::kClosed) return;
                            if (ec) {
                              if (phase_ == Phase::kAnswering) return Gone();
                              return Close();
                            }
                            buffer_.commit(n);
                            if (phase_ == Phase::kAwaitingNext) {
                              // The answer is queued; the next request is read once it is written
                              // (OnWritten).
                              if (!writing_ && queue_.empty()) ReadRequest();
                              return;
                            }
                            Watch();
                          });
}

template <typename Stream>
void Session<Stream>::Reject(int status, std::string message) {
  bhttp::response<bhttp::string_body> res{static_cast<bhttp::status>(status), 11};
  res.set(bhttp::field::content_type, "application/json");
  res.set(bhttp::field::connection, "close");
  res.body() = ErrorBody(status, message);
  res.prepare_payload();
  std::ostringstream out;
  out << res;
  phase_ = Phase::kAnswering;
  ++exchange_id_;  // no exchange of the handler's may write after this
  keep_alive_ = false;
  rejected_ = true;
  Enqueue(out.str(), /*last=*/true);
}

template <typename Stream>
void Session<Stream>::OnRespond(uint64_t id, Response response) {
  if (!current(id) || streaming_) return;
  bhttp::response<bhttp::string_body> res{static_cast<bhttp::status>(response.status), 11};
  for (auto& [name, value] : response.headers) res.set(name, value);
  if (!keep_alive_) res.set(bhttp::field::connection, "close");
  res.body() = std::move(response.body);
  res.prepare_payload();
  std::ostringstream out;
  out << res;
  Enqueue(out.str(), /*last=*/true);
}

template <typename Stream>
void Session<Stream>::OnStartStream(uint64_t id, int status, Headers headers) {
  if (!current(id) || streaming_) return;
  streaming_ = true;
  bhttp::response<bhttp::empty_body> res{static_cast<bhttp::status>(status), 11};
  for (auto& [name, value] : headers) res.set(name, value);
  if (!keep_alive_) res.set(bhttp::field::connection, "close");
  res.chunked(true);
  std::ostringstream out;
  out << res.base();
  Enqueue(out.str(), /*last=*/false);
}

template <typename Stream>
void Session<Stream>::OnWrite(uint64_t id, std::string chunk) {
  if (!current(id) || !streaming_ || chunk.empty()) return;
  Enqueue(beast::buffers_to_string(bhttp::make_chunk(net::buffer(chunk))), /*last=*/false);
}

template <typename Stream>
void Session<Stream>::OnEnd(uint64_t id) {
  if (!current(id) || !streaming_) return;
  Enqueue(beast::buffers_to_string(bhttp::make_chunk_last()), /*last=*/true);
}

template <typename Stream>
void Session<Stream>::OnSetGone(uint64_t id, std::function<void()> on_gone) {
  if (id != exchange_id_ || id == answered_id_) return;
  if (phase_ == Phase::kClosed && on_gone != nullptr) return on_gone();
  if (current(id)) on_gone_ = std::move(on_gone);
}

template <typename Stream>
void Session<Stream>::Enqueue(std::string bytes, bool last) {
  if (phase_ == Phase::kClosed) return;
  queued_bytes_ += bytes.size();
  queue_.push_back(Piece{std::move(bytes), last});
  if (last) {
    phase_ = Phase::kAwaitingNext;  // nothing more from this exchange
    answered_id_ = exchange_id_;
    on_gone_ = nullptr;
  }
  if (queued_bytes_ > shared_->options.max_pending_write_bytes) return Gone();
  WriteNext();
}

template <typename Stream>
void Session<Stream>::WriteNext() {
  if (writing_ || queue_.empty() || phase_ == Phase::kClosed) return;
  writing_ = true;
  ArmTimer(shared_->options.write_timeout, /*for_read=*/false);
  net::async_write(
      stream_, net::buffer(queue_.front().bytes),
      [self = shared_from_this(), this](beast::error_code ec, size_t) { OnWritten(ec); });
}

template <typename Stream>
void Session<Stream>::OnWritten(beast::error_code ec) {
  writing_ = false;
  write_timer_.cancel();
  if (phase_ == Phase::kClosed) return;
  if (ec) return Gone();
  const bool last = queue_.front().last;
  queued_bytes_ -= queue_.front().bytes.size();
  queue_.pop_front();
  if (!last) return WriteNext();
  if (rejected_) return Linger();
  if (!keep_alive_) return Close();
  // The answer is out: the next request is read once the watching read hands over the socket,
  // and must start within the read timeout (an idle keep-alive connection is then closed).
  if (!watching_) return ReadRequest();
  ArmTimer(shared_->options.read_timeout, /*for_read=*/true);
}

template <typename Stream>
void Session<Stream>::Linger() {
  // A refused client may still be sending (a body over the limit). Closing now would make the
  // kernel answer its data with a reset that can destroy our answer before the client reads it,
  // so stop writing, and read and discard what comes for a while (nginx's lingering close).
  beast::error_code ignored;
  socket().shutdown(tcp::socket::shutdown_send, ignored);
  ArmTimer(kLingerTime, /*for_read=*/false);
  Discard();
}

template <typename Stream>
void Session<Stream>::Discard() {
  linger_buffer_.resize(64 << 10);
  socket().async_read_some(net::buffer(linger_buffer_),
                           [self = shared_from_this(), this](beast::error_code ec, size_t n) {
                             lingered_bytes_ += n;
                             if (ec || lingered_bytes_ > kMaxLingerBytes) return Close();
                             Discard();
                           });
}

template <typename Stream>
void Session<Stream>::Gone() {
  std::function<void()> on_gone = std::move(on_gone_);
  on_gone_ = nullptr;
  Close();
  if (on_gone != nullptr) on_gone();
}

template <typename Stream>
void Session<Stream>::Close() {
  if (phase_ == Phase::kClosed) return;
  const bool answering = phase_ == Phase::kAnswering;
  phase_ = Phase::kClosed;
  read_timer_.cancel();
  write_timer_.cancel();
  beast::error_code ignored;
  socket().shutdown(tcp::socket::shutdown_both, ignored);
  socket().close(ignored);
  queue_.clear();
  Uncount();
  if (answering && on_gone_ != nullptr) {
    std::function<void()> on_gone = std::move(on_gone_);
    on_gone_ = nullptr;
    on_gone();
  }
}

template class Session<tcp::socket>;
template class Session<net::ssl::stream<tcp::socket>>;

}  // namespace pkv::http::internal
