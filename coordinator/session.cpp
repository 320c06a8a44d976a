#include "session.h"

#include <fmt/format.h>
#include <sys/socket.h>
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

}  // namespace

std::shared_ptr<Server::Session> make_session(asio::local::stream_protocol::socket socket, ClientId id, Job& job,
                                              SessionClosed on_closed, RingOpened on_ring_opened) {
  return std::make_shared<SocketSession<asio::local::stream_protocol::socket>>(
      std::move(socket), id, job, std::move(on_closed), std::move(on_ring_opened));
}

std::shared_ptr<Server::Session> make_session(asio::ip::tcp::socket socket, ClientId id, Job& job,
                                              SessionClosed on_closed, RingOpened on_ring_opened) {
  return std::make_shared<SocketSession<asio::ip::tcp::socket>>(std::move(socket), id, job, std::move(on_closed),
                                                                std::move(on_ring_opened));
}

}  // namespace fakegpu::coord
