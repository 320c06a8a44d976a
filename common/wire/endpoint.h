// Coordinator addresses and the ncclUniqueId that carries one.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "wire.h"

namespace fakegpu {

class EndpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class Transport : uint8_t { kUnix = 1, kTcp = 2 };
const char* transport_name(Transport t);

struct Endpoint {
  Transport transport = Transport::kUnix;
  std::string address;  // absolute socket path, or host:port
};

// Validates a transport name ("unix" or "tcp") and its address. Throws EndpointError naming
// the problem: a relative unix path, a path too long for a socket, a tcp address without port.
Endpoint parse_endpoint(const std::string& transport, const std::string& address);

struct TcpAddress {
  std::string host;  // empty means "not given": callers bind or connect to 127.0.0.1
  uint16_t port = 0;
};
TcpAddress parse_tcp_address(const std::string& address);

// Layout of the 128-byte ncclUniqueId: magic, layout version, transport, address length,
// a 16-byte random key, then the coordinator address.
constexpr size_t kUniqueIdBytes = 128;
constexpr size_t kUniqueIdMaxAddress = kUniqueIdBytes - 24;

struct UniqueIdContents {
  Endpoint endpoint;
  wire::CommKey key;
};
void pack_unique_id(const UniqueIdContents& contents, char out[kUniqueIdBytes]);
// Throws EndpointError when the bytes are not a fakegpu unique id.
UniqueIdContents unpack_unique_id(const char in[kUniqueIdBytes]);

// One connection attempt, TCP_NODELAY set on tcp; returns the socket or -1 with errno set.
int connect_endpoint(const Endpoint& ep);

// A host that vanishes from the network closes nothing: probe an idle tcp connection after 5 s
// and give up after 5 unanswered probes a second apart, or when sent data stays unacknowledged
// for 15 s, so both ends see the connection fail instead of waiting forever.
void detect_dead_peer(int fd);

// Fills a key from the kernel's random source, so ids cannot be guessed.
wire::CommKey random_comm_key();

}  // namespace fakegpu
