// Asio front end of the coordinator: one event loop, one persistent connection per client,
// frames read and written asynchronously and handed to the Job.
#pragma once

#include <asio.hpp>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "data_plane.h"
#include "endpoint.h"
#include "job.h"

namespace fakegpu::coord {

class ServerError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Server : public Outbox {
 public:
  // Binds and listens at once; throws ServerError when the address cannot be used, or when it
  // is a tcp address other than loopback and there is no token to require of clients.
  Server(asio::io_context& io, const Endpoint& endpoint, ClusterConfig cluster, std::string cluster_path,
         std::string token);
  ~Server() override;

  Job& job() { return job_; }
  // The address clients should use; for tcp port 0 this carries the port actually bound.
  std::string bound_address() const { return bound_address_; }
  // Stops accepting and closes every connection; the Job keeps its state for the report.
  void stop();
  // Runs the event loop until it is stopped, serving control-ring clients between events.
  void run();

  void send(ClientId client, OutFrame frame) override;
  void disconnect(ClientId client) override;

  class Session;

 private:
  void listen_unix(const std::string& path);
  void listen_tcp(const std::string& address, bool have_token);
  template <typename Acceptor>
  void accept_loop(Acceptor& acceptor);
  void on_session_closed(ClientId id);
  // Wakes the job's rendezvous timeout check a few times per timeout period.
  void watch();
  // Moves frames on every control ring; true when any bytes moved.
  bool service_rings();
  // Tells the ring clients whether this loop is about to sleep (they then ring the doorbell).
  void set_asleep(bool asleep);

  asio::io_context& io_;
  Job job_;
  // After job_, so it is destroyed first: its thread is joined before the Job it works for goes.
  ThreadDataPlane data_plane_;
  std::unique_ptr<asio::local::stream_protocol::acceptor> unix_acceptor_;
  std::unique_ptr<asio::ip::tcp::acceptor> tcp_acceptor_;
  std::string unix_path_;
  std::string bound_address_;
  std::map<ClientId, std::shared_ptr<Session>> sessions_;
  std::vector<std::shared_ptr<Session>> ring_sessions_;  // sessions on a control ring, in opening order
  asio::steady_timer watchdog_;
  ClientId next_client_ = 1;
  bool stopped_ = false;
};

}  // namespace fakegpu::coord
