#include "client.h"

#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <fstream>
#include <thread>

#include "cuda_bridge.h"
#include "descriptor_passing.h"
#include "env.h"
#include "identity.h"
#include "peer_path.h"
#include "wire_codes.h"

namespace fakegpu::stub {
namespace {

std::string describe(const Endpoint& ep) { return std::string(transport_name(ep.transport)) + ":" + ep.address; }

// How long to spin before sleeping while waiting on the control ring. The spin hands the core
// on with sched_yield, which only reaches tasks in the caller's scheduling group; with autogroup
// on, Linux makes each session such a group. A rank alone in its session (torchrun starts every
// worker in a new one; the leader is the rank or the wrapper that started it) would keep the
// core from its peers while it spins, so it sleeps at once instead.
std::chrono::microseconds ring_spin() {
  const pid_t session = getsid(0);
  if (session != getpid() && session != getppid()) return kRingSpin;
  std::ifstream autogroup("/proc/sys/kernel/sched_autogroup_enabled");
  int enabled = 0;
  return autogroup >> enabled && enabled ? std::chrono::microseconds(0) : kRingSpin;
}

}  // namespace

void Request::wait() { owner_->wait_for(*this); }

bool Request::ready() { return owner_->poll(*this); }

void Request::abandon() {
  std::lock_guard<std::mutex> lock(owner_->mu_);
  owner_->pending_.erase(id_);
}

bool Request::failed() {
  if (!ready()) return false;
  std::lock_guard<std::mutex> lock(owner_->mu_);
  return status_ != ncclSuccess;
}

void Request::check() const {
  std::lock_guard<std::mutex> lock(owner_->mu_);
  if (status_ != ncclSuccess) throw NcclError(status_, error_);
}

Endpoint coordinator_endpoint() {
  const std::string transport = env::get(env::kCoordinatorTransport);
  const std::string address = env::get(env::kCoordinatorAddr);
  if (address.empty())
    throw NcclError(ncclInvalidUsage,
                    "FAKEGPU_COORDINATOR_ADDR is not set: run the job under fgpu, or point it at a running "
                    "fakegpu-coordinator (an absolute socket path, or host:port with FAKEGPU_COORDINATOR_TRANSPORT=tcp)");
  try {
    return parse_endpoint(transport, address);
  } catch (const EndpointError& e) {
    throw NcclError(ncclInvalidUsage, e.what());
  }
}

std::shared_ptr<Client> Client::get(const Endpoint& endpoint) {
  static std::mutex mu;
  // Leaked on purpose: threads may still be waiting on a client during static destruction.
  static auto* clients = new std::map<std::string, std::shared_ptr<Client>>;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = (*clients)[describe(endpoint)];
  if (!slot) {
    std::shared_ptr<Client> client(new Client(endpoint));
    client->connect_with_retry();
    client->handshake();
    client->open_control_ring();
    slot = client;
  }
  return slot;
}

Client::Client(Endpoint endpoint) : endpoint_(std::move(endpoint)) {
  can_share_ = endpoint_.transport == Transport::kUnix && !env::get(env::kStagingForceSocket);
  // FAKEGPU_STAGING_CHUNK_BYTES: the most bulk data one frame carries.
  chunk_bytes_ = env::get(env::kStagingChunkBytes);
  spin_ = ring_spin();
}

// Clients live for the whole process; only one whose handshake failed is ever destroyed.
Client::~Client() {
  if (fd_ >= 0) ::close(fd_);
}

void Client::connect_with_retry() {
  // The coordinator may still be starting when the ranks are launched: retry for a while.
  auto deadline = std::chrono::steady_clock::now() + env::get(env::kConnectTimeout);
  for (;;) {
    fd_ = connect_endpoint(endpoint_);
    if (fd_ >= 0) return;
    int err = errno;
    if (std::chrono::steady_clock::now() >= deadline)
      throw NcclError(ncclSystemError, "cannot connect to the fakegpu coordinator at " + describe(endpoint_) + ": " +
                                           std::strerror(err) + " (is it running? fgpu starts one for you)");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

void Client::handshake() {
  wire::Hello hello;
  Identity id = identity_from_environment();
  hello.env_rank = id.rank;
  hello.env_world_size = id.world_size;
  hello.pid = static_cast<uint32_t>(getpid());
  hello.hostname = id.hostname;
  hello.token = env::get(env::kCoordinatorToken);
  hello.chunk_bytes = chunk_bytes_;
  if (env::get(env::kMode) == "hybrid") hello.compute_gpu = cuda().device_name();
  submit(hello)->reply<wire::Welcome>();  // throws the coordinator's refusal, if any
}

void Client::open_control_ring() {
  if (!can_share_ || !env::get(env::kControlRing)) return;
  constexpr uint64_t kRingBytes = 256 * 1024;
  ControlMapping mapping;
  try {
    mapping = ControlMapping::create(kRingBytes);
  } catch (const RingError&) {
    return;  // no shared memory here: the socket serves
  }
  const wire::OpenControlRing open{kRingBytes, static_cast<uint8_t>(peer_exchange_offered())};
  auto req = submit_raw(wire::MsgType::kOpenControlRing, wire::encode_fields(open), nullptr, 0, nullptr, 0, mapping.fd());
  req->wait();
  try {
    req->check();
  } catch (const NcclError&) {
    if (connection_lost()) throw;
    return;  // refused: the socket serves
  }
  ring_ = std::move(mapping);
  to_coord_ = ring_.to_coord();
  from_coord_ = ring_.to_rank();
  info(spin_.count() ? "Control ring open: waits spin up to " + std::to_string(spin_.count()) + " us, then sleep"
                     : std::string("Control ring open: waits sleep at once (this rank is alone in its session, which "
                                   "autogroup schedules apart from its peers)"));
}

std::shared_ptr<Request> Client::submit_raw(wire::MsgType type, std::vector<uint8_t> fields, const void* bulk,
                                            size_t bulk_bytes, void* reply_dst, size_t reply_capacity, int fd,
                                            bool wake) {
  auto req = std::make_shared<Request>();
  req->owner_ = this;
  req->bulk_dst_ = reply_dst;
  req->bulk_capacity_ = reply_capacity;
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!broken_.empty()) throw NcclError(ncclSystemError, broken_);
    id = next_request_++;
    req->id_ = id;
    pending_[id] = req;
  }
  write_frame(type, id, fields, bulk, bulk_bytes, fd, wake);
  return req;
}

void Client::post_raw(wire::MsgType type, const std::vector<uint8_t>& fields) {
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!broken_.empty()) throw NcclError(ncclSystemError, broken_);
    id = next_request_++;  // answered only by an error, which nobody waits for
  }
  write_frame(type, id, fields, nullptr, 0, -1, /*wake=*/false);
}

bool Client::share_segment(uint64_t segment, int fd, uint64_t size) {
  if (!can_share_) return false;
  auto already_shared = [&] {
    std::lock_guard<std::mutex> lock(mu_);
    if (!broken_.empty()) throw NcclError(ncclSystemError, broken_);
    return shared_segments_.count(segment) > 0;
  };
  if (already_shared()) return true;  // the common case: no further locking
  // A segment counts as shared only once its frame is on the wire, so another thread never
  // posts a collective naming it ahead of the ShareSegment frame; share_mu_ makes one thread
  // send it while the others wait.
  std::lock_guard<std::mutex> sharing(share_mu_);
  if (already_shared()) return true;
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    id = next_request_++;
  }
  // No reply: the coordinator reports a segment it could not map on the collectives using it.
  write_frame(wire::MsgType::kShareSegment, id, wire::encode_fields(wire::ShareSegment{segment, size}), nullptr, 0, fd);
  std::lock_guard<std::mutex> lock(mu_);
  shared_segments_.insert(segment);
  return true;
}

void Client::write_frame(wire::MsgType type, uint64_t id, const std::vector<uint8_t>& fields, const void* bulk,
                         size_t bulk_bytes, int fd, bool wake) {
  auto* data = static_cast<const uint8_t*>(bulk);
  uint64_t offset = 0;
  for (; bulk_bytes - offset > chunk_bytes_; offset += chunk_bytes_)
    write_one(wire::MsgType::kPayloadChunk, id, wire::encode_fields(wire::PayloadChunk{offset, bulk_bytes}),
              data + offset, chunk_bytes_, -1);
  write_one(type, id, fields, bulk_bytes ? data + offset : nullptr, bulk_bytes - offset, fd, wake);
}

void Client::write_one(wire::MsgType type, uint64_t id, const std::vector<uint8_t>& fields, const void* bulk,
                       size_t bulk_bytes, int fd, bool wake) {
  uint8_t header[wire::kHeaderBytes];
  wire::encode_header({type, id, static_cast<uint32_t>(fields.size()), fields.size() + bulk_bytes}, header);
  if (ring_) {
    std::lock_guard<std::mutex> lock(send_mu_);
    try {
      // A descriptor goes ahead on the socket, with one byte; the coordinator collects it from
      // there when it reads this frame from the ring.
      if (fd >= 0) send_descriptor(fd);
      ring_write(header, sizeof header, wake);
      ring_write(fields.data(), fields.size(), wake);
      ring_write(bulk, bulk_bytes, wake);
    } catch (const std::exception& e) {
      std::string why = "lost connection to the fakegpu coordinator at " + describe(endpoint_) + ": " + e.what();
      fail_all(why);
      throw NcclError(ncclSystemError, why);
    }
    return;
  }
  iovec iov[3] = {{header, sizeof header},
                  {const_cast<uint8_t*>(fields.data()), fields.size()},
                  {const_cast<void*>(bulk), bulk_bytes}};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  std::lock_guard<std::mutex> lock(send_mu_);
  size_t index = 0;
  while (index < 3) {
    msghdr msg{};
    msg.msg_iov = iov + index;
    msg.msg_iovlen = 3 - index;
    if (fd >= 0) attach_descriptor(msg, control, fd);  // to the first bytes of the frame only
    ssize_t n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      std::string why = "lost connection to the fakegpu coordinator at " + describe(endpoint_) + ": " + std::strerror(errno);
      fail_all(why);
      throw NcclError(ncclSystemError, why);
    }
    fd = -1;
    // Advance past what was written, possibly in the middle of one buffer.
    auto left = static_cast<size_t>(n);
    while (index < 3 && left >= iov[index].iov_len) left -= iov[index++].iov_len;
    if (index < 3) {
      iov[index].iov_base = static_cast<char*>(iov[index].iov_base) + left;
      iov[index].iov_len -= left;
    }
  }
}

void Client::send_descriptor(int fd) {
  if (!fakegpu::send_descriptor(fd_, fd))
    throw wire::WireError(std::string("cannot send a descriptor: ") + std::strerror(errno));
}

void Client::ring_write(const void* src, size_t n, bool wake) {
  auto* p = static_cast<const uint8_t*>(src);
  while (n > 0) {
    size_t put = to_coord_.write(p, n);
    p += put;
    n -= put;
    // A full ring wakes the coordinator whatever the frame: this rank waits for the room.
    if (put && (wake || n)) ring_doorbell();
    if (n) ring_wait([&] { return to_coord_.writable() > 0; });
  }
}

void Client::ring_doorbell() {
  ControlArea* area = ring_.area();
  if (area->coord_asleep.load() == 0 || area->coord_asleep.exchange(0) == 0) return;
  char bell = 0;
  // A full socket already holds bells enough to wake the coordinator; a closed one shows on
  // the next wait.
  (void)::send(fd_, &bell, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
}

template <typename Ready>
void Client::ring_wait(Ready ready) {
  // Spinning pays off because the answer usually comes within microseconds; sched_yield hands
  // the core to the coordinator or another rank meanwhile (see ring_spin).
  const auto spin_end = std::chrono::steady_clock::now() + spin_;
  do {
    if (ready()) return;
    sched_yield();
  } while (std::chrono::steady_clock::now() < spin_end);
  ControlArea* area = ring_.area();
  for (;;) {
    uint32_t bell = area->rank_bell.load();
    area->rank_asleep.store(1);
    std::atomic_thread_fence(std::memory_order_seq_cst);  // see wake_rank
    if (ready()) return;
    futex_wait(&area->rank_bell, bell, std::chrono::milliseconds(100));
    if (ready()) return;
    // Woken or timed out with nothing to do: the coordinator may have gone.
    if (socket_closed()) throw wire::WireError("the coordinator closed the connection");
  }
}

// Reads through a small buffer, so that a short reply (header and fields) costs one recv;
// large payloads go from the socket straight to their destination.
void Client::read_exact(void* dst, size_t n) {
  auto* p = static_cast<uint8_t*>(dst);
  if (ring_) {
    while (n > 0) {
      size_t got = from_coord_.read(p, n);
      p += got;
      n -= got;
      if (got) ring_doorbell();  // the coordinator may wait for this room to write more
      if (n) ring_wait([&] { return from_coord_.readable() > 0; });
    }
    return;
  }
  while (n > 0) {
    if (rx_begin_ < rx_end_) {
      size_t take = std::min(n, rx_end_ - rx_begin_);
      std::memcpy(p, rx_.data() + rx_begin_, take);
      rx_begin_ += take;
      p += take;
      n -= take;
      continue;
    }
    const bool direct = n >= rx_.size();
    ssize_t got = ::recv(fd_, direct ? p : rx_.data(), direct ? n : rx_.size(), MSG_DONTWAIT);
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      // Sleep in poll, not in recv: a blocked recv is also woken each time the coordinator
      // reads this socket's requests (write space); poll only when data arrives.
      pollfd ready{fd_, POLLIN, 0};
      ::poll(&ready, 1, -1);
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    if (got == 0) throw wire::WireError("the coordinator closed the connection");
    if (got < 0) throw wire::WireError(std::strerror(errno));
    if (direct) {
      p += got;
      n -= static_cast<size_t>(got);
    } else {
      rx_begin_ = 0;
      rx_end_ = static_cast<size_t>(got);
    }
  }
}

void Client::wait_for(Request& req) {
  std::unique_lock<std::mutex> lock(mu_);
  while (!req.done_) {
    if (reading_) {
      cv_.wait(lock);
      continue;
    }
    reading_ = true;
    lock.unlock();
    read_frame();
    lock.lock();
    reading_ = false;
    cv_.notify_all();  // another waiter may have to take over the reading
  }
}

bool Client::poll(Request& req) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (req.done_ || reading_) return req.done_;
    if (ring_) {
      if (from_coord_.readable() == 0) return false;
    } else {
      pollfd p{fd_, POLLIN, 0};
      if (rx_begin_ == rx_end_ && ::poll(&p, 1, 0) <= 0) return false;  // nothing has arrived
    }
    reading_ = true;
  }
  read_frame();  // a frame has started arriving: the rest follows at once
  std::lock_guard<std::mutex> lock(mu_);
  reading_ = false;
  cv_.notify_all();
  return req.done_;
}

void Client::finish(Request& req, ncclResult_t status, std::string error) {
  std::lock_guard<std::mutex> lock(mu_);
  req.status_ = status;
  req.error_ = std::move(error);
  req.done_ = true;
  cv_.notify_all();
}

void Client::read_frame() {
  std::shared_ptr<Request> req;
  try {
    uint8_t raw[wire::kHeaderBytes];
    read_exact(raw, sizeof raw);
    wire::FrameHeader header = wire::decode_header(raw);
    std::vector<uint8_t> fields(header.fields_bytes);
    read_exact(fields.data(), fields.size());
    if (header.type == wire::MsgType::kPayloadChunk) return read_chunk(header, fields);
    if (header.type == wire::MsgType::kPeerMailbox) return receive_peer_mailbox(fields);
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = pending_.find(header.request_id);
      if (it != pending_.end()) {
        req = it->second;
        pending_.erase(it);
      }
    }
    // The bulk, or its last piece when it came in PayloadChunk frames, goes after what is in.
    const uint64_t bulk = header.bulk_bytes();
    const size_t at = req ? req->bulk_got_ : 0;
    const bool bulk_fits =
        req && !req->bulk_lost_ && bulk <= req->bulk_capacity_ - at && (bulk == 0 || req->bulk_dst_);
    if (bulk_fits)
      read_exact(static_cast<uint8_t*>(req->bulk_dst_) + at, bulk);
    else
      discard(bulk);
    if (!req) return;  // e.g. the error answer to a ShareSegment, which nobody waits for
    req->reply_type_ = header.type;
    if (header.type == wire::MsgType::kError) {
      const NcclError err = error_from_reply(wire::decode_fields<wire::ErrorReply>(fields.data(), fields.size()));
      finish(*req, err.code(), err.what());
    } else if (!bulk_fits) {
      finish(*req, ncclInternalError, "coordinator sent " + std::to_string(at + bulk) + " bytes of data or more for a " +
                                          std::to_string(req->bulk_capacity_) + "-byte buffer");
    } else {
      req->fields_ = std::move(fields);
      finish(*req, ncclSuccess, "");
    }
  } catch (const std::exception& e) {
    std::string why = "lost connection to the fakegpu coordinator at " + describe(endpoint_) + ": " + e.what();
    fail_all(why);
    if (req) finish(*req, ncclSystemError, why);  // already taken off pending_ when the connection broke
  }
}

// After the ring opened the coordinator writes on the socket only the bytes that carry
// descriptors, taken with their frames; the end of the stream is its closing.
bool Client::socket_closed() {
  char byte;
  return ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

bool Client::coordinator_gone() {
  if (connection_lost()) return true;
  if (!socket_closed()) return false;
  fail_all("lost connection to the fakegpu coordinator at " + describe(endpoint_) + ": it closed the connection");
  return true;
}

std::shared_ptr<PeerExchange> Client::peer_mailbox(uint64_t comm_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = peer_mailboxes_.find(comm_id);
  return it == peer_mailboxes_.end() ? nullptr : it->second;
}

void Client::forget_peer_mailbox(uint64_t comm_id) {
  std::lock_guard<std::mutex> lock(mu_);
  peer_mailboxes_.erase(comm_id);
}

// The descriptor went ahead of the frame on the socket, with one byte. A mailbox that cannot
// be taken is a lost connection: the coordinator expects this rank to use it.
void Client::receive_peer_mailbox(const std::vector<uint8_t>& fields) {
  auto msg = wire::decode_fields<wire::PeerMailbox>(fields.data(), fields.size());
  std::deque<int> fds;
  char byte;
  ssize_t n = -1;
  pollfd p{fd_, POLLIN, 0};  // it was sent before the frame: it is there, or about to be
  while (n < 0 && ::poll(&p, 1, 10000) > 0) {
    n = receive_with_descriptors(fd_, &byte, 1, &fds);
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) break;
  }
  for (size_t i = 1; i < fds.size(); ++i) ::close(fds[i]);
  if (n != 1 || fds.empty()) {
    if (!fds.empty()) ::close(fds[0]);
    throw wire::WireError("the descriptor of communicator " + std::to_string(msg.comm_id) +
                          "'s peer mailbox did not arrive on the socket");
  }
  const int fd = fds[0];
  try {
    auto mailbox = std::shared_ptr<PeerExchange>(PeerExchange::map(fd, msg.nranks, msg.bytes));
    std::lock_guard<std::mutex> lock(mu_);
    peer_mailboxes_[msg.comm_id] = std::move(mailbox);
  } catch (const PeerExchangeError& e) {
    throw wire::WireError("communicator " + std::to_string(msg.comm_id) + ": " + e.what());
  }
}

void Client::read_chunk(const wire::FrameHeader& header, const std::vector<uint8_t>& fields) {
  auto chunk = wire::decode_fields<wire::PayloadChunk>(fields.data(), fields.size());
  std::shared_ptr<Request> req;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pending_.find(header.request_id);
    if (it != pending_.end()) req = it->second;  // it stays pending until its message comes
  }
  const uint64_t bytes = header.bulk_bytes();
  // In place: it continues where the last piece ended, and it, like its message, fits the buffer.
  if (req && !req->bulk_lost_ && req->bulk_dst_ && chunk.offset == req->bulk_got_ && chunk.offset < chunk.total &&
      chunk.total <= req->bulk_capacity_ && bytes < chunk.total - chunk.offset) {
    read_exact(static_cast<uint8_t*>(req->bulk_dst_) + chunk.offset, bytes);
    req->bulk_got_ += bytes;
    return;
  }
  discard(bytes);
  if (req) req->bulk_lost_ = true;  // its message then finishes it with an error
}

void Client::discard(uint64_t bytes) {
  while (bytes > 0) {
    scratch_.resize(std::min<uint64_t>(bytes, 1 << 20));
    read_exact(scratch_.data(), scratch_.size());
    bytes -= scratch_.size();
  }
}

void Client::fail_all(const std::string& why) {
  std::map<uint64_t, std::shared_ptr<Request>> pending;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (broken_.empty()) broken_ = why;
    pending.swap(pending_);
  }
  for (auto& [id, req] : pending) finish(*req, ncclSystemError, why);
}

}  // namespace fakegpu::stub
