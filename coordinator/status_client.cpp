#include "status_client.h"

#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "wire.h"

namespace fakegpu::coord {
namespace {

class Connection {
 public:
  Connection(const Endpoint& endpoint, int timeout_ms)
      : where_(fmt::format("{}:{}", transport_name(endpoint.transport), endpoint.address)) {
    fd_ = connect_endpoint(endpoint);
    if (fd_ < 0) fail(std::strerror(errno));
    timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  }
  ~Connection() {
    if (fd_ >= 0) ::close(fd_);
  }

  template <typename Msg>
  void send(const Msg& msg, uint64_t request_id) {
    auto fields = wire::encode_fields(msg);
    std::vector<uint8_t> frame(wire::kHeaderBytes);
    wire::encode_header({Msg::kType, request_id, static_cast<uint32_t>(fields.size()), fields.size()}, frame.data());
    frame.insert(frame.end(), fields.begin(), fields.end());
    for (size_t done = 0; done < frame.size();) {
      ssize_t n = ::send(fd_, frame.data() + done, frame.size() - done, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) fail(std::strerror(errno));
      done += static_cast<size_t>(n);
    }
  }

  // Reads one frame; an ErrorReply becomes an exception carrying the coordinator's message.
  std::pair<wire::FrameHeader, std::vector<uint8_t>> receive() {
    uint8_t raw[wire::kHeaderBytes];
    read_exact(raw, sizeof raw);
    wire::FrameHeader header = wire::decode_header(raw);
    if (header.body_bytes > (uint64_t{256} << 20)) fail("its status reply is implausibly large");
    std::vector<uint8_t> body(header.body_bytes);
    read_exact(body.data(), body.size());
    if (header.type == wire::MsgType::kError)
      fail(wire::decode_fields<wire::ErrorReply>(body.data(), header.fields_bytes).message);
    return {header, std::move(body)};
  }

  [[noreturn]] void fail(const std::string& why) const {
    throw std::runtime_error(fmt::format("coordinator at {}: {}", where_, why));
  }

 private:
  void read_exact(uint8_t* dst, size_t size) {
    for (size_t got = 0; got < size;) {
      ssize_t n = ::recv(fd_, dst + got, size - got, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) fail("no answer (timed out)");
      if (n <= 0) fail(n == 0 ? "closed the connection" : std::strerror(errno));
      got += static_cast<size_t>(n);
    }
  }

  std::string where_;
  int fd_ = -1;
};

}  // namespace

nlohmann::json query_status(const Endpoint& endpoint, const std::string& token, int timeout_ms) {
  Connection conn(endpoint, timeout_ms);
  wire::Hello hello;
  hello.pid = static_cast<uint32_t>(getpid());
  hello.role = wire::ClientRole::kObserver;
  hello.token = token;
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  hello.hostname = host;
  conn.send(hello, 1);
  if (conn.receive().first.type != wire::MsgType::kWelcome) conn.fail("answered the Hello with something else");
  conn.send(wire::StatusQuery{}, 2);
  auto [header, body] = conn.receive();
  if (header.type != wire::MsgType::kStatusReply) conn.fail("answered the status query with something else");
  try {
    return nlohmann::json::parse(body.begin() + header.fields_bytes, body.end());
  } catch (const nlohmann::json::exception& e) {
    conn.fail(std::string("sent a status that is not JSON: ") + e.what());
  }
}

}  // namespace fakegpu::coord
