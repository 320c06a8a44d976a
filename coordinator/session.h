// One client connection of the coordinator: reading its frames (socket or control ring) into
// the Job and writing the Job's replies back, over a unix or a tcp socket. Server keeps the
// sessions; make_session makes one for a socket it accepted.
#pragma once

#include <asio.hpp>

#include <functional>
#include <memory>

#include "control_ring.h"
#include "server.h"

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

using SessionClosed = std::function<void(ClientId)>;                             // the session is gone
using RingOpened = std::function<void(std::shared_ptr<Server::Session>)>;  // it moved to a control ring

std::shared_ptr<Server::Session> make_session(asio::local::stream_protocol::socket socket, ClientId id, Job& job,
                                              SessionClosed on_closed, RingOpened on_ring_opened);
std::shared_ptr<Server::Session> make_session(asio::ip::tcp::socket socket, ClientId id, Job& job,
                                              SessionClosed on_closed, RingOpened on_ring_opened);

}  // namespace fakegpu::coord
