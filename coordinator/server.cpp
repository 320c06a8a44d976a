#include "server.h"

#include <fmt/format.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <deque>
#include <list>
#include <utility>

#include "control_ring.h"
#include "descriptor_passing.h"
#include "frame_reader.h"
#include "payload_stream.h"

namespace fakegpu::coord {

// One client connection. Type-erased over the socket kind so the rest of the server does not
// care whether the client came in over unix or tcp.
class Server::Session : public std::enable_shared_from_this<Server::Session> {
 public:
  virtual ~Session() = default;
  virtual void start() = 0;
  virtual void send(OutFrame frame) = 0;
  virtual void close_after_flush() = 0;
  virtual void close_now() = 0;
  // For a client on a control ring: moves whatever frames are waiting in either direction;
  // true when it moved any bytes.
  virtual bool service() = 0;
  virtual ControlArea* control_area() = 0;  // null until the client opens a control ring
  virtual bool closed() const = 0;
};

namespace {

template <typename Socket>
class SocketSession : public Server::Session {
 public:
  SocketSession(Socket socket, ClientId id, Job& job, std::function<void(ClientId)> on_closed,
                std::function<void(std::shared_ptr<Session>)> on_ring_opened)
      : socket_(std::move(socket)),
        id_(id),
        job_(job),
        on_closed_(std::move(on_closed)),
        on_ring_opened_(std::move(on_ring_opened)),
        reader_(job.max_buffer_bytes(), [&job, id] { return job.greeted(id); }) {}

  void start() override {
    asio::error_code ec;
    socket_.non_blocking(true, ec);
    wait_readable();
  }

  void send(OutFrame frame) override {
    if (closed_) return;
    const uint64_t chunk_bytes = frame.chunk_bytes, bulk_bytes = frame.bulk_bytes();
    if (chunk_bytes == 0 || bulk_bytes <= chunk_bytes) {
      queue_frame(std::move(frame), bulk_bytes, false);
    } else {
      std::vector<OutFrame> pieces = split_frame(std::move(frame), chunk_bytes);
      job_.count_payload_chunks(0, pieces.size() - 1);
      for (OutFrame& piece : pieces) {
        const uint64_t piece_bytes = piece.bulk_bytes();  // read before the frame is moved from
        queue_frame(std::move(piece), piece_bytes, true);
      }
    }
    if (ring_)
      flush_ring();
    else if (!writing_)
      write_next();
  }

  void close_after_flush() override {
    closing_ = true;
    if (!writing_ && ring_queue_.empty()) close_now();
  }

  bool service() override {
    if (closed_ || !ring_) return false;
    const uint64_t before = ring_bytes_in_;
    drained_ = false;
    read_available();
    bool moved = ring_bytes_in_ != before;
    if (moved && !closed_) wake_rank(ring_.area());  // a writer of a large frame may wait for the room made
    if (!closed_) moved |= flush_ring();
    return moved;
  }

  ControlArea* control_area() override { return ring_ ? ring_.area() : nullptr; }
  bool closed() const override { return closed_; }

  void close_now() override {
    if (closed_) return;
    closed_ = true;
    asio::error_code ignored;
    socket_.shutdown(Socket::shutdown_both, ignored);
    socket_.close(ignored);
    // queue_ stays: a write still in flight points into its front frame until it completes.
    for (int fd : fds_) ::close(fd);
    fds_.clear();
    if (ring_) {  // a rank asleep on the ring wakes, finds the socket closed and gives up
      ring_.area()->rank_bell.fetch_add(1);
      futex_wake_all(&ring_.area()->rank_bell);
    }
    on_closed_(id_);
  }

 private:
  struct Queued {
    std::array<uint8_t, wire::kHeaderBytes> header{};
    OutFrame frame;
    bool piece = false;  // one frame of a reply streamed in pieces
  };

  // A whole frame goes ahead of the pieces of streamed replies, so a large reply does not hold
  // up small ones; pieces keep their order. The front frame stays put while it is being written.
  void queue_frame(OutFrame frame, uint64_t bulk_bytes, bool piece) {
    Queued q;
    q.frame = std::move(frame);
    q.piece = piece;
    wire::FrameHeader h{q.frame.type, q.frame.request_id, static_cast<uint32_t>(q.frame.fields.size()),
                        q.frame.fields.size() + bulk_bytes};
    wire::encode_header(h, q.header.data());
    std::list<Queued>& queue = ring_ ? ring_queue_ : queue_;
    auto at = queue.end();
    if (!piece) {
      at = queue.begin();
      if (at != queue.end() && (ring_ ? out_sent_ > 0 : writing_)) ++at;
      at = std::find_if(at, queue.end(), [](const Queued& x) { return x.piece; });
    }
    queue.insert(at, std::move(q));
  }

  // On a control ring the socket carries only doorbells, descriptors and the peer's closing.
  void wait_readable() {
    auto self = shared_from_this();
    socket_.async_wait(Socket::wait_read, [this, self](asio::error_code ec) {
      if (closed_) return;
      if (ec) return close_now();
      drained_ = false;
      if (!ring_) return read_available();
      if (!drain_socket()) return;
      service();
      if (!closed_) wait_readable();
    });
  }

  // More bytes are needed than have arrived: on the socket, wait for them; on a ring, the
  // server's loop calls service() again.
  void await_more() {
    if (!ring_) wait_readable();
  }

  // Reads the doorbell bytes on a ring client's socket, keeping any descriptors that came
  // with them; false when the socket has closed.
  bool drain_socket() {
    uint8_t bells[256];
    for (;;) {
      ssize_t n = receive_from_socket(bells, sizeof bells);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      if (n <= 0) {
        close_now();
        return false;
      }
      if (static_cast<size_t>(n) < sizeof bells) return true;
    }
  }

  // Switches this client onto the control ring whose area came with its OpenControlRing.
  void open_ring(const wire::FrameHeader& header, const std::vector<uint8_t>& body, int fd) {
    OutFrame reply;
    reply.request_id = header.request_id;
    try {
      ControlMapping mapping;
      if (fd >= 0) mapping = ControlMapping::map(std::exchange(fd, -1));
      if (!job_.greeted(id_)) throw RingError("a control ring before the Hello");
      if (ring_) throw RingError("a second control ring");
      if (!mapping) throw RingError("no descriptor came with OpenControlRing");
      if (rx_begin_ != rx_end_) throw RingError("frames sent behind OpenControlRing, before its answer");
      auto msg = wire::decode_fields<wire::OpenControlRing>(body.data(), header.fields_bytes);
      if (msg.capacity != mapping.capacity())
        throw RingError(fmt::format("rings of {} bytes announced, {} mapped", msg.capacity, mapping.capacity()));
      reply.type = wire::MsgType::kAck;
      send(std::move(reply));  // the last frame on the socket
      ring_ = std::move(mapping);
      from_rank_ = ring_.to_coord();
      to_rank_ = ring_.to_rank();
      job_.on_control_ring(id_, msg.peer_exchange != 0);
      on_ring_opened_(shared_from_this());
    } catch (const std::exception& e) {
      if (fd >= 0) ::close(fd);
      reply.type = wire::MsgType::kError;
      reply.fields = wire::encode_fields(
          wire::ErrorReply{static_cast<int32_t>(wire::Status::kInvalidUsage), fmt::format("control ring refused: {}", e.what())});
      send(std::move(reply));
    }
  }

  // Writes queued frames into the ring as far as it has room; true when any bytes went in.
  bool flush_ring() {
    size_t moved = 0;
    try {
      while (!ring_queue_.empty()) {
        Queued& q = ring_queue_.front();
        // A descriptor goes ahead on the socket, so it is there when the rank reads the frame.
        if (out_sent_ == 0 && q.frame.descriptor) {
          send_descriptor(q.frame.descriptor->fd);
          q.frame.descriptor.reset();
        }
        size_t skip = out_sent_;
        bool full = false;
        auto put = [&](const uint8_t* data, size_t size) {
          if (full || skip >= size) {
            skip -= std::min(skip, size);
            return;
          }
          size_t n = to_rank_.write(data + skip, size - skip);
          out_sent_ += n;
          moved += n;
          full = n < size - skip;
          skip = 0;
        };
        put(q.header.data(), q.header.size());
        put(q.frame.fields.data(), q.frame.fields.size());
        for (const Bulk& b : q.frame.bulk) put(b.buffer->data() + b.offset, b.size);
        if (full) break;
        ring_queue_.pop_front();
        out_sent_ = 0;
      }
    } catch (const RingError& e) {
      fmt::print(stderr, "fakegpu-coordinator: dropping client {}: {}\n", id_, e.what());
      close_now();
      return false;
    }
    if (moved) wake_rank(ring_.area());
    if (closing_ && ring_queue_.empty() && !writing_) close_now();
    return moved > 0;
  }

  // The rank reads its socket only for these bytes, so the socket never fills up with them; a
  // failure is the connection's.
  void send_descriptor(int fd) {
    if (!fakegpu::send_descriptor(socket_.native_handle(), fd, MSG_DONTWAIT))
      throw RingError(fmt::format("cannot send a descriptor on the socket: {}", std::strerror(errno)));
  }

  // Reads whatever has arrived and hands over every complete frame. Reads go through a buffer,
  // so a burst of small frames costs one recvmsg; large bulk data is read straight into place.
  // recvmsg also collects file descriptors sent alongside (SCM_RIGHTS, with ShareSegment).
  void read_available() {
    for (;;) {
      try {
        rx_begin_ += reader_.feed(rx_.data() + rx_begin_, rx_end_ - rx_begin_);
      } catch (const FrameError& e) {
        fmt::print(stderr, "fakegpu-coordinator: dropping client {}: {}\n", id_, e.what());
        close_now();
        return;
      }
      if (reader_.ready()) {
        if (!deliver(reader_.take())) return;
        continue;
      }
      if (drained_) return await_more();  // the last read emptied the socket
      const FrameReader::Span rest = reader_.wanted();
      const bool direct = rest.data && rest.size >= rx_.size();
      if (!receive(direct ? rest.data : rx_.data(), direct ? rest.size : rx_.size(), direct)) return;
    }
  }

  // Hands over a complete frame, with the descriptor that came with it (on a ring, the
  // descriptor went ahead on the socket, so it is there to be read). False when reading must stop.
  bool deliver(ReadFrame frame) {
    const wire::FrameHeader& h = frame.header;
    if (h.type == wire::MsgType::kPayloadChunk) {  // its bulk is in place already
      job_.count_payload_chunks(1, 0);
      return true;
    }
    int fd = -1;
    if (h.type == wire::MsgType::kShareSegment || h.type == wire::MsgType::kOpenControlRing) {
      if (fds_.empty() && ring_ && !drain_socket()) return false;
      if (!fds_.empty()) {
        fd = fds_.front();
        fds_.pop_front();
      }
    }
    if (frame.streamed && !frame.bulk_dropped) {
      job_.on_frame(id_, h, std::move(frame.body), fd, std::move(frame.payload));
    } else if (!frame.streamed && h.type == wire::MsgType::kOpenControlRing) {
      open_ring(h, frame.body, fd);
      if (ring_) {
        wait_readable();  // from now on the socket only rings the bell
        return false;
      }
    } else if (frame.bulk_dropped) {
      job_.on_oversized_frame(id_, h, std::move(frame.body));
    } else {
      job_.on_frame(id_, h, std::move(frame.body), fd);
    }
    return !closing_ && !closed_;
  }

  // One read into dst, from the ring or, without one, the socket; false when reading must stop
  // (closed, or nothing there: then it waits).
  bool receive(uint8_t* dst, size_t len, bool direct) {
    if (ring_) return receive_from_ring(dst, len, direct);
    ssize_t n = receive_from_socket(dst, len);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      wait_readable();
      return false;
    }
    if (n <= 0) {
      close_now();
      return false;
    }
    drained_ = static_cast<size_t>(n) < len;  // a short read: nothing more is waiting
    if (direct) {
      reader_.advance(static_cast<size_t>(n));
    } else {
      rx_begin_ = 0;
      rx_end_ = static_cast<size_t>(n);
    }
    return true;
  }

  // One recvmsg; descriptors sent alongside (SCM_RIGHTS, with ShareSegment) go to fds_.
  ssize_t receive_from_socket(uint8_t* dst, size_t len) {
    return receive_with_descriptors(socket_.native_handle(), dst, len, &fds_);
  }

  bool receive_from_ring(uint8_t* dst, size_t len, bool direct) {
    size_t n;
    try {
      n = from_rank_.read(dst, len);
    } catch (const RingError& e) {
      fmt::print(stderr, "fakegpu-coordinator: dropping client {}: {}\n", id_, e.what());
      close_now();
      return false;
    }
    if (n == 0) return false;
    ring_bytes_in_ += n;
    drained_ = n < len;
    if (direct) {
      reader_.advance(n);
    } else {
      rx_begin_ = 0;
      rx_end_ = n;
    }
    return true;
  }

  void write_next() {
    if (queue_.empty()) {
      writing_ = false;
      if (closing_ && ring_queue_.empty()) close_now();
      return;
    }
    writing_ = true;
    Queued& q = queue_.front();
    buffers_.clear();
    buffers_.push_back(asio::buffer(q.header));
    buffers_.push_back(asio::buffer(q.frame.fields));
    for (const Bulk& b : q.frame.bulk) buffers_.push_back(asio::buffer(b.buffer->data() + b.offset, b.size));
    auto self = shared_from_this();
    asio::async_write(socket_, buffers_, [this, self](asio::error_code ec, size_t) {
      if (closed_) return;
      if (ec) return close_now();
      queue_.pop_front();
      write_next();
    });
  }

  Socket socket_;
  ClientId id_;
  Job& job_;
  std::function<void(ClientId)> on_closed_;
  std::function<void(std::shared_ptr<Session>)> on_ring_opened_;
  ControlMapping ring_;  // set once the client has moved onto a control ring
  ByteRing from_rank_, to_rank_;
  uint64_t ring_bytes_in_ = 0;
  std::list<Queued> ring_queue_;  // frames for the ring, once it is open
  size_t out_sent_ = 0;  // bytes of ring_queue_.front() already in the ring
  FrameReader reader_;
  std::deque<int> fds_;  // received descriptors not yet claimed by a frame
  std::vector<uint8_t> rx_ = std::vector<uint8_t>(64 * 1024);  // bytes read ahead of the frame being parsed
  size_t rx_begin_ = 0, rx_end_ = 0;
  bool drained_ = false;  // the last read came back short: wait for readiness before reading again
  std::list<Queued> queue_;  // a list: a frame being written stays where it is
  std::vector<asio::const_buffer> buffers_;  // the frame being written, reused between frames
  bool writing_ = false;
  bool closing_ = false;
  bool closed_ = false;
};

// True when something accepts connections at this unix socket path.
bool unix_socket_is_live(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  bool live = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return live;
}

}  // namespace

Server::Server(asio::io_context& io, const Endpoint& endpoint, ClusterConfig cluster, std::string cluster_path,
               std::string token)
    : io_(io),
      job_(std::move(cluster),
           ServerInfo{transport_name(endpoint.transport), endpoint.address, std::move(cluster_path), token}, *this),
      data_plane_(io),
      watchdog_(io) {
  job_.use_data_plane(data_plane_);
  if (endpoint.transport == Transport::kUnix)
    listen_unix(endpoint.address);
  else
    listen_tcp(endpoint.address, !token.empty());
  watch();
}

void Server::watch() {
  watchdog_.expires_after(job_.watch_period());
  watchdog_.async_wait([this](asio::error_code ec) {
    if (ec || stopped_) return;
    job_.check_timeouts(std::chrono::steady_clock::now());
    watch();
  });
}

Server::~Server() { stop(); }

void Server::listen_unix(const std::string& path) {
  struct stat st{};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) throw ServerError(fmt::format("{} exists and is not a socket; refusing to replace it", path));
    if (unix_socket_is_live(path))
      throw ServerError(fmt::format("another coordinator is already listening on {}; stop it first or choose another address", path));
    ::unlink(path.c_str());  // stale socket left by a coordinator that died
  }
  unix_acceptor_ = std::make_unique<asio::local::stream_protocol::acceptor>(io_);
  asio::local::stream_protocol::endpoint ep(path);
  // Create the socket file 0600 from the start, so there is no window where others may connect.
  mode_t old_mask = ::umask(0177);
  asio::error_code ec;
  unix_acceptor_->open(ep.protocol(), ec);
  if (!ec) unix_acceptor_->bind(ep, ec);
  ::umask(old_mask);
  if (!ec) unix_acceptor_->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw ServerError(fmt::format("cannot listen on unix socket {}: {}", path, ec.message()));
  unix_path_ = path;
  bound_address_ = path;
  accept_loop(*unix_acceptor_);
}

void Server::listen_tcp(const std::string& address, bool have_token) {
  TcpAddress parsed = parse_tcp_address(address);
  std::string host = parsed.host.empty() || parsed.host == "localhost" ? "127.0.0.1" : parsed.host;
  asio::error_code ec;
  auto ip = asio::ip::make_address(host, ec);
  if (ec) throw ServerError(fmt::format("cannot bind tcp address {}: '{}' is not an IP address", address, host));
  // Anyone who can reach a non-loopback port could join or read the job: demand a shared secret.
  if (!ip.is_loopback() && !have_token)
    throw ServerError(fmt::format("refusing to listen on {} without a token: set FAKEGPU_COORDINATOR_TOKEN to a secret "
                                  "(the same value in every rank's environment), or bind 127.0.0.1",
                                  address));
  asio::ip::tcp::endpoint ep(ip, parsed.port);
  tcp_acceptor_ = std::make_unique<asio::ip::tcp::acceptor>(io_);
  tcp_acceptor_->open(ep.protocol(), ec);
  if (!ec) tcp_acceptor_->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) tcp_acceptor_->bind(ep, ec);
  if (!ec) tcp_acceptor_->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw ServerError(fmt::format("cannot listen on tcp {}: {}", address, ec.message()));
  auto local = tcp_acceptor_->local_endpoint();
  bound_address_ = fmt::format(ip.is_v6() ? "[{}]:{}" : "{}:{}", local.address().to_string(), local.port());
  accept_loop(*tcp_acceptor_);
}

template <typename Acceptor>
void Server::accept_loop(Acceptor& acceptor) {
  acceptor.async_accept([this, &acceptor](asio::error_code ec, typename Acceptor::protocol_type::socket socket) {
    if (stopped_) return;
    if (!ec) {
      if constexpr (std::is_same_v<typename Acceptor::protocol_type, asio::ip::tcp>) {
        socket.set_option(asio::ip::tcp::no_delay(true), ec);
        detect_dead_peer(socket.native_handle());
      }
      ClientId id = next_client_++;
      auto session = std::make_shared<SocketSession<typename Acceptor::protocol_type::socket>>(
          std::move(socket), id, job_, [this](ClientId closed) { on_session_closed(closed); },
          [this](std::shared_ptr<Session> s) { ring_sessions_.push_back(std::move(s)); });
      sessions_[id] = session;
      job_.on_connect(id);
      session->start();
    } else if (ec == asio::error::no_descriptors || ec.value() == ENFILE || ec == asio::error::no_memory ||
               ec == asio::error::no_buffer_space) {
      // Out of descriptors or memory: retrying at once would spin. Say so once, and try again
      // shortly; the connection waits in the listen backlog meanwhile.
      static bool said = false;
      if (!std::exchange(said, true))
        fmt::print(stderr, "fakegpu-coordinator: cannot accept a connection: {}; retrying every 100 ms\n", ec.message());
      auto retry = std::make_shared<asio::steady_timer>(io_, std::chrono::milliseconds(100));
      retry->async_wait([this, &acceptor, retry](asio::error_code) {
        if (!stopped_) accept_loop(acceptor);
      });
      return;
    }
    accept_loop(acceptor);
  });
}

// Between events the loop keeps polling the control rings for up to kRingSpin, yielding the core
// each time, because a rank's next frame usually follows within microseconds; sleeping and
// being woken costs far more. Then it sleeps until a socket (doorbell included) or timer fires.
// While it spins it looks at the sockets and timers only every kSocketLook: each look is an
// epoll_wait system call, and on a busy host every microsecond a turn costs is taken from the
// ranks it waits for. Nothing on a socket is that urgent while the rings are open: their
// frames' descriptors are read as each frame is, and new connections can wait.
// Only frames a rank waits on keep it polling (Job::awaited_frames). Collectives the ranks
// exchange among themselves wait for nobody here, and on a host with fewer cores than
// processes each turn this loop takes is one the ranks lose; so while only those come, it
// sleeps, waking for a doorbell (which a rank rings for a frame it waits on) or every
// kLazyLook to take what has gathered in the rings.
void Server::run() {
  constexpr auto kSocketLook = std::chrono::microseconds(50);
  constexpr auto kLazyLook = std::chrono::microseconds(200);
  auto last_work = std::chrono::steady_clock::now();
  auto last_look = last_work - kSocketLook;
  while (!io_.stopped()) {
    auto now = std::chrono::steady_clock::now();
    bool worked = false;
    if (ring_sessions_.empty() || now - last_look >= kSocketLook) {
      worked = io_.poll() > 0;
      last_look = now;
    }
    const uint64_t awaited = job_.awaited_frames();
    if (service_rings() || worked) {
      if (job_.awaited_frames() != awaited) last_work = std::chrono::steady_clock::now();
      continue;
    }
    if (!ring_sessions_.empty() && now - last_work < kRingSpin) {
      sched_yield();
      continue;
    }
    set_asleep(true);
    if (!service_rings()) ring_sessions_.empty() ? io_.run_one() : io_.run_one_for(kLazyLook);
    set_asleep(false);
    if (job_.awaited_frames() != awaited) last_work = std::chrono::steady_clock::now();
  }
}

bool Server::service_rings() {
  ring_sessions_.erase(std::remove_if(ring_sessions_.begin(), ring_sessions_.end(),
                                      [](const std::shared_ptr<Session>& s) { return s->closed(); }),
                       ring_sessions_.end());
  bool moved = false;
  for (size_t i = 0; i < ring_sessions_.size(); ++i) moved |= ring_sessions_[i]->service();
  return moved;
}

void Server::set_asleep(bool asleep) {
  for (auto& s : ring_sessions_)
    if (ControlArea* area = s->control_area()) area->coord_asleep.store(asleep ? 1 : 0);
  // Our store before our next look at the rings, as the ranks publish before they look at it.
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

void Server::on_session_closed(ClientId id) {
  if (sessions_.erase(id)) job_.on_disconnect(id);
}

void Server::send(ClientId client, OutFrame frame) {
  auto it = sessions_.find(client);
  if (it != sessions_.end()) it->second->send(std::move(frame));
}

void Server::disconnect(ClientId client) {
  auto it = sessions_.find(client);
  if (it != sessions_.end()) it->second->close_after_flush();
}

void Server::stop() {
  if (stopped_) return;
  stopped_ = true;
  watchdog_.cancel();
  asio::error_code ignored;
  if (unix_acceptor_) unix_acceptor_->close(ignored);
  if (tcp_acceptor_) tcp_acceptor_->close(ignored);
  auto sessions = sessions_;  // close_now() erases from sessions_
  for (auto& [id, s] : sessions) s->close_now();
  ring_sessions_.clear();
  if (!unix_path_.empty()) ::unlink(unix_path_.c_str());
}

}  // namespace fakegpu::coord
