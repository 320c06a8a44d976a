#include "server.h"

#include <fmt/format.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "control_ring.h"
#include "session.h"

namespace fakegpu::coord {

namespace {

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
      auto session = make_session(
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
