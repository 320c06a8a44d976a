#include "endpoint.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace fakegpu {
namespace {
constexpr char kIdMagic[4] = {'F', 'G', 'I', 'D'};
constexpr uint8_t kIdLayoutVersion = 1;
}  // namespace

const char* transport_name(Transport t) { return t == Transport::kUnix ? "unix" : "tcp"; }

TcpAddress parse_tcp_address(const std::string& address) {
  auto colon = address.rfind(':');
  if (colon == std::string::npos)
    throw EndpointError("tcp address '" + address + "' has no port; expected host:port, e.g. 127.0.0.1:29591");
  TcpAddress out;
  out.host = address.substr(0, colon);
  if (out.host.size() >= 2 && out.host.front() == '[' && out.host.back() == ']')
    out.host = out.host.substr(1, out.host.size() - 2);
  std::string port = address.substr(colon + 1);
  char* end = nullptr;
  errno = 0;
  long value = port.empty() ? -1 : std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || errno != 0 || value < 0 || value > 65535)
    throw EndpointError("tcp address '" + address + "' has an invalid port '" + port + "' (0-65535)");
  out.port = static_cast<uint16_t>(value);
  return out;
}

Endpoint parse_endpoint(const std::string& transport, const std::string& address) {
  Endpoint ep;
  ep.address = address;
  if (address.empty()) throw EndpointError("coordinator address is empty (set FAKEGPU_COORDINATOR_ADDR)");
  if (transport == "unix") {
    ep.transport = Transport::kUnix;
    if (address[0] != '/')
      throw EndpointError("unix socket path '" + address + "' must be absolute");
    if (address.size() >= sizeof(sockaddr_un{}.sun_path))
      throw EndpointError("unix socket path '" + address + "' is longer than the " +
                          std::to_string(sizeof(sockaddr_un{}.sun_path) - 1) + " bytes a socket path may have");
  } else if (transport == "tcp") {
    ep.transport = Transport::kTcp;
    parse_tcp_address(address);
  } else {
    throw EndpointError("unknown coordinator transport '" + transport + "' (expected unix or tcp)");
  }
  return ep;
}

void pack_unique_id(const UniqueIdContents& contents, char out[kUniqueIdBytes]) {
  const std::string& addr = contents.endpoint.address;
  if (addr.size() > kUniqueIdMaxAddress)
    throw EndpointError("coordinator address '" + addr + "' is longer than the " +
                        std::to_string(kUniqueIdMaxAddress) + " bytes a unique id can carry");
  std::memset(out, 0, kUniqueIdBytes);
  std::memcpy(out, kIdMagic, 4);
  out[4] = static_cast<char>(kIdLayoutVersion);
  out[5] = static_cast<char>(contents.endpoint.transport);
  out[6] = static_cast<char>(addr.size() & 0xff);
  out[7] = static_cast<char>(addr.size() >> 8);
  std::memcpy(out + 8, contents.key.bytes, wire::kCommKeyBytes);
  std::memcpy(out + 24, addr.data(), addr.size());
}

UniqueIdContents unpack_unique_id(const char in[kUniqueIdBytes]) {
  if (std::memcmp(in, kIdMagic, 4) != 0)
    throw EndpointError("the ncclUniqueId was not made by fakegpu's ncclGetUniqueId (wrong magic); "
                        "was it produced by a process without the fakegpu libnccl preloaded?");
  if (static_cast<uint8_t>(in[4]) != kIdLayoutVersion)
    throw EndpointError("the ncclUniqueId has layout version " + std::to_string(static_cast<uint8_t>(in[4])) +
                        ", this library reads version " + std::to_string(kIdLayoutVersion));
  UniqueIdContents c;
  auto transport = static_cast<uint8_t>(in[5]);
  if (transport != static_cast<uint8_t>(Transport::kUnix) && transport != static_cast<uint8_t>(Transport::kTcp))
    throw EndpointError("the ncclUniqueId names an unknown transport " + std::to_string(transport));
  c.endpoint.transport = static_cast<Transport>(transport);
  size_t len = static_cast<uint8_t>(in[6]) | (static_cast<size_t>(static_cast<uint8_t>(in[7])) << 8);
  if (len == 0 || len > kUniqueIdMaxAddress) throw EndpointError("the ncclUniqueId carries a corrupt address length");
  std::memcpy(c.key.bytes, in + 8, wire::kCommKeyBytes);
  c.endpoint.address.assign(in + 24, len);
  if (c.endpoint.address.find('\0') != std::string::npos)
    throw EndpointError("the ncclUniqueId carries a corrupt coordinator address");
  return c;
}

int connect_endpoint(const Endpoint& ep) {
  if (ep.transport == Transport::kUnix) {
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, ep.address.c_str(), sizeof(addr.sun_path) - 1);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) return fd;
    int saved = errno;
    ::close(fd);
    errno = saved;
    return -1;
  }
  TcpAddress tcp = parse_tcp_address(ep.address);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  std::string host = tcp.host.empty() ? "127.0.0.1" : tcp.host;
  if (getaddrinfo(host.c_str(), std::to_string(tcp.port).c_str(), &hints, &res) != 0) {
    errno = EHOSTUNREACH;
    return -1;
  }
  int fd = -1, saved = ECONNREFUSED;
  for (addrinfo* ai = res; ai && fd < 0; ai = ai->ai_next) {
    fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      saved = errno;
      ::close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  if (fd < 0) {
    errno = saved;
    return -1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  detect_dead_peer(fd);
  return fd;
}

void detect_dead_peer(int fd) {
  int on = 1, idle_s = 5, interval_s = 1, probes = 5;
  unsigned user_timeout_ms = 15000;
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof idle_s);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval_s, sizeof interval_s);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof probes);
  setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof user_timeout_ms);
}

wire::CommKey random_comm_key() {
  wire::CommKey key;
  size_t got = 0;
  while (got < sizeof(key.bytes)) {
    ssize_t n = getrandom(key.bytes + got, sizeof(key.bytes) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw EndpointError(std::string("getrandom failed: ") + std::strerror(errno));
    got += static_cast<size_t>(n);
  }
  return key;
}

}  // namespace fakegpu
