// The rank's persistent connection to the coordinator. Any thread may submit requests. There is
// no receiver thread: a thread waiting for a reply reads the connection itself, handing frames
// that answer other requests to their waiters, so a reply costs at most one wakeup. Bulk data is
// read straight into the destination buffer the request named. On one host the frames travel
// through a control ring in shared memory (control_ring.h) once the coordinator accepts one.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "control_ring.h"
#include "endpoint.h"
#include "peer_exchange.h"
#include "errors.h"
#include "wire.h"

namespace fakegpu::stub {

class Client;

// The coordinator named by FAKEGPU_COORDINATOR_ADDR (and _TRANSPORT); throws NcclError when unset
// or malformed.
Endpoint coordinator_endpoint();

class Request {
 public:
  void wait();
  // Whether the reply is in, reading what has arrived if no other thread is reading.
  bool ready();
  // Whether the reply is in and is an error, reading what has arrived as ready() does.
  bool failed();
  // Gives up on the reply: one that still comes is read and dropped.
  void abandon();
  // Decodes the reply as Msg; throws NcclError carrying the coordinator's error instead.
  template <typename Msg>
  Msg reply() {
    wait();
    check();
    if (reply_type_ != Msg::kType)
      throw NcclError(ncclInternalError, std::string("coordinator answered ") + wire::msg_type_name(reply_type_) +
                                             ", expected " + wire::msg_type_name(Msg::kType));
    return wire::decode_fields<Msg>(fields_.data(), fields_.size());
  }

 private:
  friend class Client;
  void check() const;

  Client* owner_ = nullptr;
  uint64_t id_ = 0;
  bool done_ = false;  // guarded by the owner's mutex
  ncclResult_t status_ = ncclSuccess;
  std::string error_;
  wire::MsgType reply_type_{};
  std::vector<uint8_t> fields_;
  void* bulk_dst_ = nullptr;
  size_t bulk_capacity_ = 0;
  // Of a reply streamed in PayloadChunk pieces; the reading thread's only.
  size_t bulk_got_ = 0;
  bool bulk_lost_ = false;  // a piece did not fit and was dropped
};

class Client {
 public:
  // The process's connection to the coordinator at this endpoint, made (with the handshake)
  // on first use. Throws NcclError when the coordinator cannot be reached or refuses us.
  static std::shared_ptr<Client> get(const Endpoint& endpoint);

  // Sends msg with optional bulk data. reply_dst receives the reply's bulk data, which must
  // not exceed reply_capacity bytes.
  template <typename Msg>
  std::shared_ptr<Request> submit(const Msg& msg, const void* bulk = nullptr, size_t bulk_bytes = 0,
                                  void* reply_dst = nullptr, size_t reply_capacity = 0) {
    return submit_raw(Msg::kType, wire::encode_fields(msg), bulk, bulk_bytes, reply_dst, reply_capacity);
  }

  // The same for a message whose reply nobody waits for soon (a collective its ranks exchange
  // among themselves): a sleeping coordinator is not woken for it, and takes it within a
  // fraction of a millisecond all the same (Server::run).
  template <typename Msg>
  std::shared_ptr<Request> submit_unhurried(const Msg& msg) {
    return submit_raw(Msg::kType, wire::encode_fields(msg), nullptr, 0, nullptr, 0, -1, /*wake=*/false);
  }

  // Sends a message that has no reply (RankActivity), without waking a sleeping coordinator.
  template <typename Msg>
  void post(const Msg& msg) {
    post_raw(Msg::kType, wire::encode_fields(msg));
  }

  // Makes sure the coordinator has mapped this segment of fake device memory, sending its file
  // descriptor the first time. False when segments cannot be shared on this connection (tcp,
  // or FAKEGPU_STAGING_FORCE_SOCKET=1): the data then travels in the frames.
  bool share_segment(uint64_t segment, int fd, uint64_t size);
  // Whether segments can be shared on this connection at all (see share_segment).
  bool shares_segments() const { return can_share_; }
  // The peer mailbox the coordinator gave communicator comm_id (wire::PeerMailbox), or null.
  // It comes ahead of the reply that completes the communicator.
  std::shared_ptr<PeerExchange> peer_mailbox(uint64_t comm_id);
  void forget_peer_mailbox(uint64_t comm_id);
  // True once the connection to the coordinator is gone (it died, or closed on us).
  bool connection_lost() {
    std::lock_guard<std::mutex> lock(mu_);
    return !broken_.empty();
  }
  // How long a wait polls before it sleeps: kRingSpin, or 0 for a rank whose yields would not
  // reach its peers (see ring_spin in client.cpp).
  std::chrono::microseconds spin() const { return spin_; }
  // Looks whether the coordinator has closed the connection, without waiting; when it has,
  // every request fails and this returns true. For waits that do not read the connection.
  bool coordinator_gone();

  ~Client();

 private:
  friend class Request;
  explicit Client(Endpoint endpoint);
  void wait_for(Request& req);
  bool poll(Request& req);
  // Reads one whole frame and completes the request it answers. Only the reading thread calls it.
  void read_frame();
  void finish(Request& req, ncclResult_t status, std::string error);
  void connect_with_retry();
  void handshake();
  std::shared_ptr<Request> submit_raw(wire::MsgType type, std::vector<uint8_t> fields, const void* bulk,
                                      size_t bulk_bytes, void* reply_dst, size_t reply_capacity, int fd = -1,
                                      bool wake = true);
  void post_raw(wire::MsgType type, const std::vector<uint8_t>& fields);
  // Offers the coordinator a control ring; on refusal the connection stays on the socket.
  void open_control_ring();
  std::mutex share_mu_;  // one thread at a time sends a ShareSegment frame
  // Writes a message, its bulk data in pieces of at most chunk_bytes_ (wire::PayloadChunk); fd,
  // when not -1, travels with it as SCM_RIGHTS ancillary data. wake: ring the doorbell of a
  // coordinator asleep on its control ring.
  void write_frame(wire::MsgType type, uint64_t id, const std::vector<uint8_t>& fields, const void* bulk,
                   size_t bulk_bytes, int fd, bool wake = true);
  // Writes one frame, holding the send lock only for it, so other threads' frames may go
  // between the pieces of a large message.
  void write_one(wire::MsgType type, uint64_t id, const std::vector<uint8_t>& fields, const void* bulk,
                 size_t bulk_bytes, int fd, bool wake = true);
  // Reads the bulk of a PayloadChunk frame into the request it belongs to.
  void read_chunk(const wire::FrameHeader& header, const std::vector<uint8_t>& fields);
  // Whether the coordinator's end of the socket is closed (looks without reading or waiting).
  bool socket_closed();
  // Takes the descriptor of a PeerMailbox frame from the socket and maps it.
  void receive_peer_mailbox(const std::vector<uint8_t>& fields);
  // Reads and drops bytes that no request can take.
  void discard(uint64_t bytes);
  void read_exact(void* dst, size_t n);
  void ring_write(const void* src, size_t n, bool wake = true);
  // Sends fd over the socket with a single byte, ahead of the ring frame that names it.
  void send_descriptor(int fd);
  // Sends the coordinator a byte on the socket if it said it sleeps.
  void ring_doorbell();
  // Returns once ready() holds: spins briefly, then sleeps on the area's futex. Throws
  // WireError when the coordinator has closed the connection meanwhile.
  template <typename Ready>
  void ring_wait(Ready ready);
  void fail_all(const std::string& why);

  Endpoint endpoint_;
  int fd_ = -1;
  std::mutex send_mu_;  // one frame on the wire at a time
  std::mutex mu_;       // guards the fields below and every Request's state
  std::condition_variable cv_;  // a request finished, or the reader stepped down
  bool reading_ = false;        // a thread is reading the socket
  std::vector<uint8_t> scratch_;  // for bulk data nobody can take; used by the reader only
  std::vector<uint8_t> rx_ = std::vector<uint8_t>(4096);  // bytes read ahead; the reader's only
  size_t rx_begin_ = 0, rx_end_ = 0;
  std::map<uint64_t, std::shared_ptr<Request>> pending_;
  uint64_t next_request_ = 1;
  std::string broken_;  // why the connection is gone, once it is
  std::set<uint64_t> shared_segments_;
  std::map<uint64_t, std::shared_ptr<PeerExchange>> peer_mailboxes_;  // by communicator
  bool can_share_ = false;
  uint64_t chunk_bytes_ = wire::kDefaultChunkBytes;  // FAKEGPU_STAGING_CHUNK_BYTES
  std::chrono::microseconds spin_{};                  // how long ring_wait spins before sleeping
  ControlMapping ring_;  // set once the coordinator has accepted a control ring
  ByteRing to_coord_, from_coord_;
};

}  // namespace fakegpu::stub
