// Cuts one client's incoming byte stream into frames: the 32-byte header, the fields, then the
// bulk data, which goes after the fields, into the buffer of a message streamed in PayloadChunk
// pieces, or nowhere when it is too large to keep. No sockets: the connection feeds it bytes, or
// reads large bulk data straight to where wanted() points, and takes each frame as it completes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <vector>

#include "payload_stream.h"
#include "wire.h"

namespace fakegpu::coord {

// The stream cannot be trusted past this point: a bad header, a piece out of order, a frame a
// stranger may not send, or one that could not be allocated. The connection is to be dropped.
class FrameError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ReadFrame {
  wire::FrameHeader header;  // of a streamed message too large to keep, body_bytes counts all its pieces
  std::vector<uint8_t> body;  // the fields, then the bulk data unless it was streamed or dropped
  bool streamed = false;      // the frame ends a PayloadChunk stream: its bulk data is in `payload`
  bool bulk_dropped = false;  // the bulk data was too large to keep: `body` holds only the fields
  std::shared_ptr<std::vector<uint8_t>> payload;  // a streamed message's bulk data; null when dropped
};

class FrameReader {
 public:
  // Frames with a body over max_buffer_bytes have their bulk dropped. `greeted` says whether the
  // client has said a valid Hello: until then only small frames, and no PayloadChunk, are allowed.
  FrameReader(uint64_t max_buffer_bytes, std::function<bool()> greeted);

  // Consumes bytes up to the end of the next frame and returns how many it used; then ready()
  // holds until take(). Throws FrameError.
  size_t feed(const uint8_t* data, size_t size);
  // Where the rest of the current part of the frame goes, so a large read can land there
  // directly; data is null when those bytes are to be dropped (feed them anyway).
  struct Span {
    uint8_t* data;
    uint64_t size;
  };
  Span wanted();
  // n bytes were written to wanted().data. A part they complete is closed by the next feed
  // (with no bytes, if need be), which throws FrameError when it is bad.
  void advance(uint64_t n);

  bool ready() const { return ready_; }
  ReadFrame take();

 private:
  enum class Part { kHeader, kFields, kBulk };
  uint64_t part_size() const;
  void end_part();
  void plan_body();

  uint64_t max_buffer_bytes_;
  std::function<bool()> greeted_;
  PayloadAssembler assembler_;
  Part part_ = Part::kHeader;
  uint64_t part_got_ = 0;
  uint8_t header_bytes_[wire::kHeaderBytes] = {};
  wire::FrameHeader header_;
  std::vector<uint8_t> body_;  // fields, and the bulk after them unless it goes elsewhere
  uint8_t* bulk_dst_ = nullptr;  // null: the bulk is dropped
  bool ends_stream_ = false;     // the frame ends a stream of PayloadChunk pieces
  bool ready_ = false;
};

}  // namespace fakegpu::coord
