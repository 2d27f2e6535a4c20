// A minimal HTTP/2 client (RFC 9113) over a blocking loopback TCP socket, for tests that must send
// what no well-behaved gRPC client sends: PINGs without data (RELIABILITY S4), streams reset right
// after they open (S5, CVE-2023-44487). It speaks just enough HTTP/2 for that: the client preface
// and SETTINGS, ACKs of the server's SETTINGS, HEADERS for a gRPC request (HPACK from RFC 7541 with
// static-table names and literal values only: no Huffman, no dynamic table), DATA carrying one
// gRPC length-prefixed message, RST_STREAM, PING, and a frame reader with a timeout. It does not
// decode the server's header blocks and does not enforce flow control (a caller sending DATA
// tracks the connection window from the WINDOW_UPDATE frames it reads).
//
// Thread-safety: one thread may send while one other thread reads (the socket is full duplex and
// the send and receive state are disjoint); nothing else is thread-safe. The client owns its
// socket and closes it on destruction.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace pkv::testing {

// Frame types and flags used here (RFC 9113 section 6).
enum class H2Type : uint8_t {
  kData = 0x0,
  kHeaders = 0x1,
  kRstStream = 0x3,
  kSettings = 0x4,
  kPing = 0x6,
  kGoaway = 0x7,
  kWindowUpdate = 0x8,
};
inline constexpr uint8_t kH2FlagEndStream = 0x1;   // DATA, HEADERS
inline constexpr uint8_t kH2FlagAck = 0x1;         // SETTINGS, PING
inline constexpr uint8_t kH2FlagEndHeaders = 0x4;  // HEADERS
// Error codes (RFC 9113 section 7).
inline constexpr uint32_t kH2Cancel = 0x8;
inline constexpr uint32_t kH2EnhanceYourCalm = 0xb;

struct H2Frame {
  uint8_t type = 0;  // an H2Type value, or a type this client does not know
  uint8_t flags = 0;
  uint32_t stream_id = 0;
  std::string payload;
};

// The wire bytes of one frame: the 9-byte header, then `payload`.
std::string EncodeH2Frame(H2Type type, uint8_t flags, uint32_t stream_id,
                          const std::string& payload);
// An HPACK header block for a gRPC request: :method POST, :scheme http, :path, :authority,
// content-type application/grpc, te trailers, then `extra` headers (lower-case names, e.g.
// {"grpc-timeout", "2562047H"}) as given.
std::string GrpcRequestHeaderBlock(
    const std::string& path, const std::string& authority,
    const std::vector<std::pair<std::string, std::string>>& extra = {});
// A gRPC length-prefixed message: uncompressed flag 0, 4-byte big-endian length, the bytes.
std::string GrpcLengthPrefixed(const std::string& message);

class RawH2Client {
 public:
  // Connects to 127.0.0.1:port, sends the preface and an empty SETTINGS, and reads until the
  // server's SETTINGS arrives, which it ACKs. Frames read before it are dropped.
  static absl::StatusOr<std::unique_ptr<RawH2Client>> Connect(int port, absl::Duration timeout);
  ~RawH2Client();
  RawH2Client(const RawH2Client&) = delete;
  RawH2Client& operator=(const RawH2Client&) = delete;

  // Sends raw bytes (e.g. several encoded frames at once). UNAVAILABLE once the peer closed.
  absl::Status Send(const std::string& bytes);
  absl::Status SendFrame(H2Type type, uint8_t flags, uint32_t stream_id,
                         const std::string& payload);
  absl::Status SendHeaders(uint32_t stream_id, const std::string& header_block, bool end_stream);
  absl::Status SendRstStream(uint32_t stream_id, uint32_t error_code);
  absl::Status SendPing(uint64_t opaque, bool ack = false);

  // The next frame; DEADLINE_EXCEEDED if none completes within `timeout`, UNAVAILABLE at EOF or a
  // connection reset.
  absl::StatusOr<H2Frame> ReadFrame(absl::Duration timeout);
  // Reads frames (ACKing SETTINGS, dropping the rest) until a GOAWAY; its error code.
  absl::StatusOr<uint32_t> WaitForGoaway(absl::Duration timeout);
  // Reads and drops frames until the server closes the connection; false on timeout.
  bool WaitClosed(absl::Duration timeout);

 private:
  explicit RawH2Client(int fd) : fd_(fd) {}
  // Blocks until at least one more byte is buffered; the same errors as ReadFrame.
  absl::Status Fill(absl::Time deadline);

  int fd_;
  std::string in_;  // received bytes not yet returned as frames
};

}  // namespace pkv::testing
