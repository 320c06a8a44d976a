// A stand-in for fakegpu-coordinator in the stub's unit tests: it listens on a Unix socket of
// its own, answers the handshake, refuses a control ring (so frames stay on the socket), and
// hands every other frame to the test's handler, on its own thread.
#pragma once

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "endpoint.h"
#include "wire.h"

namespace fakegpu::stub::test {

struct Frame {
  wire::FrameHeader header;
  std::vector<uint8_t> fields;
  std::vector<uint8_t> bulk;
  template <typename Msg>
  Msg decode() const {
    return wire::decode_fields<Msg>(fields.data(), fields.size());
  }
};

class FakeCoordinator {
 public:
  class Connection;
  // Called for each frame after the handshake; replies through the connection, or closes it.
  using Handler = std::function<void(const Frame&, Connection&)>;

  class Connection {
   public:
    explicit Connection(int fd) : fd_(fd) {}
    template <typename Msg>
    void reply(uint64_t request_id, const Msg& msg, const void* bulk = nullptr, size_t bulk_bytes = 0) {
      write_frame(Msg::kType, request_id, wire::encode_fields(msg), bulk, bulk_bytes);
    }
    void fail(uint64_t request_id, wire::Status code, const std::string& message) {
      reply(request_id, wire::ErrorReply{static_cast<int32_t>(code), message});
    }
    // The coordinator goes away: the client sees the connection close. (The descriptor itself
    // is closed by the coordinator's destructor, so its number is not reused meanwhile.)
    void close() {
      ::shutdown(fd_, SHUT_RDWR);
      open_ = false;
    }
    bool open() const { return open_; }

   private:
    void write_frame(wire::MsgType type, uint64_t id, const std::vector<uint8_t>& fields, const void* bulk,
                     size_t bulk_bytes) {
      uint8_t header[wire::kHeaderBytes];
      wire::encode_header({type, id, static_cast<uint32_t>(fields.size()), fields.size() + bulk_bytes}, header);
      write_all(header, sizeof header);
      write_all(fields.data(), fields.size());
      write_all(bulk, bulk_bytes);
    }
    void write_all(const void* data, size_t n) {
      auto* p = static_cast<const uint8_t*>(data);
      while (n > 0) {
        ssize_t put = ::send(fd_, p, n, MSG_NOSIGNAL);
        if (put <= 0) throw std::runtime_error("fake coordinator: cannot write to the client");
        p += put;
        n -= static_cast<size_t>(put);
      }
    }
    int fd_;
    bool open_ = true;
  };

  explicit FakeCoordinator(Handler handler) : handler_(std::move(handler)) {
    char dir[] = "/tmp/fakegpu-stub-test-XXXXXX";
    if (!::mkdtemp(dir)) throw std::runtime_error("fake coordinator: cannot make a directory");
    dir_ = dir;
    path_ = dir_ + "/coordinator.sock";
    listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof addr.sun_path - 1);
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listen_fd_, 4) != 0)
      throw std::runtime_error("fake coordinator: cannot listen on " + path_);
    thread_ = std::thread([this] { serve(); });
  }
  // Clients live as long as the process, so their connection is cut here.
  ~FakeCoordinator() {
    ::shutdown(listen_fd_, SHUT_RDWR);  // wakes accept() when no client ever came
    if (const int fd = client_fd_.load(); fd >= 0) ::shutdown(fd, SHUT_RDWR);
    thread_.join();
    if (const int fd = client_fd_.load(); fd >= 0) ::close(fd);
    ::close(listen_fd_);
    ::unlink(path_.c_str());
    ::rmdir(dir_.c_str());
  }
  FakeCoordinator(const FakeCoordinator&) = delete;
  FakeCoordinator& operator=(const FakeCoordinator&) = delete;

  Endpoint endpoint() const { return parse_endpoint("unix", path_); }

  // Every frame the client sent, the handshake's included, in order.
  std::vector<Frame> frames() {
    std::lock_guard<std::mutex> lock(mu_);
    return frames_;
  }
  // Refuses the Hello with this error instead of welcoming the client.
  void refuse_hello(wire::Status code, const std::string& message) {
    std::lock_guard<std::mutex> lock(mu_);
    hello_refusal_ = {code, message};
  }

 private:
  // Serves one client until it or the handler closes the connection.
  void serve() {
    const int fd = ::accept(listen_fd_, nullptr, nullptr);
    if (fd < 0) return;
    client_fd_ = fd;
    Connection conn(fd);
    try {
      serve_frames(conn, fd);
    } catch (const std::exception&) {
      // the client went away while we answered it: nothing more to serve
    }
  }

  void serve_frames(Connection& conn, int fd) {
    Frame frame;
    while (conn.open() && read_frame(fd, &frame)) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        frames_.push_back(frame);
      }
      const uint64_t id = frame.header.request_id;
      if (frame.header.type == wire::MsgType::kHello) {
        std::pair<wire::Status, std::string> refusal;
        {
          std::lock_guard<std::mutex> lock(mu_);
          refusal = hello_refusal_;
        }
        if (refusal.first != wire::Status::kSuccess)
          conn.fail(id, refusal.first, refusal.second);
        else
          conn.reply(id, wire::Welcome{wire::kProtocolVersion, 2, 1, "test-cluster"});
      } else if (frame.header.type == wire::MsgType::kOpenControlRing) {
        conn.fail(id, wire::Status::kInvalidUsage, "no control rings here");
      } else {
        handler_(frame, conn);
      }
    }
  }

  // False once the client has closed the connection.
  static bool read_frame(int fd, Frame* frame) {
    uint8_t header[wire::kHeaderBytes];
    if (!read_all(fd, header, sizeof header)) return false;
    frame->header = wire::decode_header(header);
    std::vector<uint8_t> body(frame->header.body_bytes);
    if (!read_all(fd, body.data(), body.size())) return false;
    frame->fields.assign(body.begin(), body.begin() + frame->header.fields_bytes);
    frame->bulk.assign(body.begin() + frame->header.fields_bytes, body.end());
    return true;
  }
  static bool read_all(int fd, void* dst, size_t n) {
    auto* p = static_cast<uint8_t*>(dst);
    while (n > 0) {
      ssize_t got = ::recv(fd, p, n, 0);
      if (got <= 0) return false;
      p += got;
      n -= static_cast<size_t>(got);
    }
    return true;
  }

  Handler handler_;
  std::string dir_, path_;
  int listen_fd_ = -1;
  std::atomic<int> client_fd_{-1};
  std::mutex mu_;
  std::vector<Frame> frames_;
  std::pair<wire::Status, std::string> hello_refusal_{wire::Status::kSuccess, ""};
  std::thread thread_;  // last: it starts serving at construction
};

}  // namespace fakegpu::stub::test
