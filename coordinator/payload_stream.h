// Bulk data streamed in PayloadChunk pieces (wire.h): splitting the coordinator's frames for a
// client that takes only so much per frame, and putting back together what a client streams in.
// Both work in place: pieces point into the frame's buffers, and arriving pieces are read
// straight into the message's one buffer.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "job.h"
#include "wire.h"

namespace fakegpu::coord {

// The frames that carry `frame` to a client taking at most chunk_bytes of bulk data per frame
// (0: any amount): PayloadChunk pieces, then the frame itself with the last piece.
std::vector<OutFrame> split_frame(OutFrame frame, uint64_t chunk_bytes);

// The messages one client is streaming in, one buffer each.
class PayloadAssembler {
 public:
  // Messages with more bulk data than max_bytes are not kept: their pieces are dropped.
  explicit PayloadAssembler(uint64_t max_bytes) : max_bytes_(max_bytes) {}

  // Where the `bytes` of a PayloadChunk frame go; null when they are to be dropped. Throws
  // WireError when the piece does not continue its message's stream where the last one ended.
  uint8_t* place_chunk(uint64_t request_id, const wire::PayloadChunk& chunk, uint64_t bytes);
  // Whether a stream is open for this request: its message, when it comes, ends it.
  bool streaming(uint64_t request_id) const { return streams_.count(request_id) > 0; }
  // Where the last piece, carried by the message itself, goes; as place_chunk.
  uint8_t* place_last(uint64_t request_id, uint64_t bytes);

  struct Message {
    std::shared_ptr<std::vector<uint8_t>> data;  // null when the message was too large to keep
    uint64_t total = 0;                          // its bulk bytes, all pieces together
  };
  // Ends the stream of this request, returning its data.
  Message finish(uint64_t request_id);

 private:
  struct Stream {
    Message message;
    uint64_t got = 0;
  };
  uint8_t* place(Stream& s, uint64_t bytes);

  uint64_t max_bytes_;
  std::map<uint64_t, Stream> streams_;
};

}  // namespace fakegpu::coord
