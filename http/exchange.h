// One request and the channel its answer goes back through. The server creates an Exchange for
// every complete request and passes it to the handler, which answers at once or later, from any
// thread: either one whole Respond(), or StartStream() + Write()* + End() (chunked transfer
// encoding, e.g. Server-Sent Events).
//
// The client can leave at any time (it closed the connection, a write to it stayed outstanding
// longer than the server's write timeout, or its unread output grew past the server's limit). The
// on-gone callback then runs once, on a server thread, and later writes are dropped: a handler that
// started work for the request (a generation) cancels it there. The callback never runs after the
// exchange finished (Respond or End).
//
// Thread-safety: every method may be called from any thread; calls are applied in order. Calls
// after the exchange finished are ignored.
#pragma once

#include <functional>
#include <string>

#include "http/http_types.h"

namespace pkv::http {

class Exchange {
 public:
  virtual ~Exchange() = default;

  const Request& request() const { return request_; }

  // A whole response; finishes the exchange.
  virtual void Respond(Response response) = 0;
  // A streamed response: the status and headers now, the body in chunks, then End().
  virtual void StartStream(int status, Headers headers) = 0;
  virtual void Write(std::string chunk) = 0;
  virtual void End() = 0;
  // Set before the first StartStream (or at any time: a client already gone calls it at once).
  virtual void SetOnGone(std::function<void()> on_gone) = 0;

 protected:
  explicit Exchange(Request request) : request_(std::move(request)) {}

 private:
  const Request request_;
};

}  // namespace pkv::http
