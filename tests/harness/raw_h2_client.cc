#include "tests/harness/raw_h2_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace pkv::testing {
namespace {

constexpr char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
constexpr size_t kFrameHeaderBytes = 9;

// RFC 7541 5.1: an integer with an N-bit prefix; `first_bits` are the bits above the prefix in
// the first byte (the representation's pattern).
void AppendHpackInt(std::string* out, uint8_t first_bits, int prefix_bits, uint32_t value) {
  const uint32_t max_prefix = (1u << prefix_bits) - 1;
  if (value < max_prefix) {
    out->push_back(static_cast<char>(first_bits | value));
    return;
  }
  out->push_back(static_cast<char>(first_bits | max_prefix));
  value -= max_prefix;
  while (value >= 128) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

// RFC 7541 5.2: a string literal, not Huffman-coded (H bit 0, 7-bit length prefix).
void AppendHpackString(std::string* out, const std::string& s) {
  AppendHpackInt(out, 0x00, 7, static_cast<uint32_t>(s.size()));
  out->append(s);
}

// RFC 7541 6.2.2: literal without indexing, the name from static-table entry `name_index`; the
// server adds nothing to its dynamic table, so every block we send is independent.
void AppendLiteralIndexedName(std::string* out, uint32_t name_index, const std::string& value) {
  AppendHpackInt(out, 0x00, 4, name_index);
  AppendHpackString(out, value);
}

// The same with a literal name (index 0), for names the static table lacks (te).
void AppendLiteralNewName(std::string* out, const std::string& name, const std::string& value) {
  out->push_back(0x00);
  AppendHpackString(out, name);
  AppendHpackString(out, value);
}

void PutBigEndian32(std::string* out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>(v >> shift));
}

uint32_t GetBigEndian32(const std::string& s, size_t at) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<uint8_t>(s[at + i]);
  return v;
}

}  // namespace

std::string EncodeH2Frame(H2Type type, uint8_t flags, uint32_t stream_id,
                          const std::string& payload) {
  std::string out;
  out.reserve(kFrameHeaderBytes + payload.size());
  const uint32_t length = static_cast<uint32_t>(payload.size());  // < 2^24: the default max 16 KiB
  out.push_back(static_cast<char>(length >> 16));
  out.push_back(static_cast<char>(length >> 8));
  out.push_back(static_cast<char>(length));
  out.push_back(static_cast<char>(type));
  out.push_back(static_cast<char>(flags));
  PutBigEndian32(&out, stream_id & 0x7fffffffu);  // the reserved bit stays 0
  out.append(payload);
  return out;
}

std::string GrpcRequestHeaderBlock(const std::string& path, const std::string& authority,
                                   const std::vector<std::pair<std::string, std::string>>& extra) {
  // Static-table indices (RFC 7541 appendix A): 3 = ":method: POST", 6 = ":scheme: http" (both
  // fully indexed, 0x80 | index), 4 = ":path", 1 = ":authority", 31 = "content-type".
  std::string block;
  block.push_back(static_cast<char>(0x80 | 3));
  block.push_back(static_cast<char>(0x80 | 6));
  AppendLiteralIndexedName(&block, 4, path);
  AppendLiteralIndexedName(&block, 1, authority);
  AppendLiteralIndexedName(&block, 31, "application/grpc");
  AppendLiteralNewName(&block, "te", "trailers");  // gRPC servers require it
  for (const auto& [name, value] : extra) AppendLiteralNewName(&block, name, value);
  return block;
}

std::string GrpcLengthPrefixed(const std::string& message) {
  std::string out(1, '\0');  // not compressed
  PutBigEndian32(&out, static_cast<uint32_t>(message.size()));
  out.append(message);
  return out;
}

absl::StatusOr<std::unique_ptr<RawH2Client>> RawH2Client::Connect(int port,
                                                                  absl::Duration timeout) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int err = errno;
    close(fd);
    return absl::UnavailableError(absl::StrCat("connect to port ", port, ": ", strerror(err)));
  }
  const int one = 1;  // small frames must leave at once, not wait for Nagle
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  std::unique_ptr<RawH2Client> client(new RawH2Client(fd));
  if (absl::Status s =
          client->Send(std::string(kPreface) + EncodeH2Frame(H2Type::kSettings, 0, 0, ""));
      !s.ok()) {
    return s;
  }
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    absl::StatusOr<H2Frame> frame = client->ReadFrame(deadline - absl::Now());
    if (!frame.ok()) return frame.status();
    if (frame->type == static_cast<uint8_t>(H2Type::kSettings) && !(frame->flags & kH2FlagAck)) {
      if (absl::Status s = client->SendFrame(H2Type::kSettings, kH2FlagAck, 0, ""); !s.ok()) {
        return s;
      }
      return client;
    }
  }
}

RawH2Client::~RawH2Client() { close(fd_); }

absl::Status RawH2Client::Send(const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    // MSG_NOSIGNAL: a closed peer is an error to report, not a SIGPIPE killing the test.
    const ssize_t n = send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::UnavailableError(absl::StrCat("send: ", strerror(errno)));
    sent += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status RawH2Client::SendFrame(H2Type type, uint8_t flags, uint32_t stream_id,
                                    const std::string& payload) {
  return Send(EncodeH2Frame(type, flags, stream_id, payload));
}

absl::Status RawH2Client::SendHeaders(uint32_t stream_id, const std::string& header_block,
                                      bool end_stream) {
  const uint8_t flags = kH2FlagEndHeaders | (end_stream ? kH2FlagEndStream : 0);
  return SendFrame(H2Type::kHeaders, flags, stream_id, header_block);
}

absl::Status RawH2Client::SendRstStream(uint32_t stream_id, uint32_t error_code) {
  std::string payload;
  PutBigEndian32(&payload, error_code);
  return SendFrame(H2Type::kRstStream, 0, stream_id, payload);
}

absl::Status RawH2Client::SendPing(uint64_t opaque, bool ack) {
  std::string payload;
  PutBigEndian32(&payload, static_cast<uint32_t>(opaque >> 32));
  PutBigEndian32(&payload, static_cast<uint32_t>(opaque));
  return SendFrame(H2Type::kPing, ack ? kH2FlagAck : 0, 0, payload);
}

absl::Status RawH2Client::Fill(absl::Time deadline) {
  while (true) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return absl::DeadlineExceededError("no frame in time");
    pollfd p{fd_, POLLIN, 0};
    const int wait_ms = static_cast<int>(std::max<int64_t>(1, absl::ToInt64Milliseconds(left)));
    const int ready = poll(&p, 1, wait_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;  // re-check the deadline
    char buf[16384];
    const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) return absl::UnavailableError("the server closed the connection");
    if (n < 0) return absl::UnavailableError(absl::StrCat("recv: ", strerror(errno)));
    in_.append(buf, static_cast<size_t>(n));
    return absl::OkStatus();
  }
}

absl::StatusOr<H2Frame> RawH2Client::ReadFrame(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    if (in_.size() >= kFrameHeaderBytes) {
      const size_t length = (static_cast<size_t>(static_cast<uint8_t>(in_[0])) << 16) |
                            (static_cast<size_t>(static_cast<uint8_t>(in_[1])) << 8) |
                            static_cast<uint8_t>(in_[2]);
      if (in_.size() >= kFrameHeaderBytes + length) {
        H2Frame frame;
        frame.type = static_cast<uint8_t>(in_[3]);
        frame.flags = static_cast<uint8_t>(in_[4]);
        frame.stream_id = GetBigEndian32(in_, 5) & 0x7fffffffu;
        frame.payload = in_.substr(kFrameHeaderBytes, length);
        in_.erase(0, kFrameHeaderBytes + length);
        return frame;
      }
    }
    if (absl::Status s = Fill(deadline); !s.ok()) return s;
  }
}

absl::StatusOr<uint32_t> RawH2Client::WaitForGoaway(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    absl::StatusOr<H2Frame> frame = ReadFrame(deadline - absl::Now());
    if (!frame.ok()) return frame.status();
    if (frame->type == static_cast<uint8_t>(H2Type::kGoaway)) {
      // Payload: last stream id (4 bytes), error code (4 bytes), debug data.
      if (frame->payload.size() < 8) return absl::DataLossError("GOAWAY shorter than 8 bytes");
      return GetBigEndian32(frame->payload, 4);
    }
    if (frame->type == static_cast<uint8_t>(H2Type::kSettings) && !(frame->flags & kH2FlagAck)) {
      if (absl::Status s = SendFrame(H2Type::kSettings, kH2FlagAck, 0, ""); !s.ok()) return s;
    }
  }
}

bool RawH2Client::WaitClosed(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    in_.clear();
    const absl::Status s = Fill(deadline);
    if (absl::IsUnavailable(s)) return true;
    if (!s.ok()) return false;
  }
}

}  // namespace pkv::testing
