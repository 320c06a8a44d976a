#include "payload_stream.h"

#include <fmt/format.h>

#include <algorithm>

namespace fakegpu::coord {

std::vector<OutFrame> split_frame(OutFrame frame, uint64_t chunk_bytes) {
  std::vector<OutFrame> frames;
  const uint64_t total = frame.bulk_bytes();
  if (chunk_bytes == 0 || total <= chunk_bytes) {
    frames.push_back(std::move(frame));
    return frames;
  }
  // Cuts the next n bytes off the frame's slices, which may be several (a gather's reply).
  size_t slice = 0;
  uint64_t within = 0;
  auto take = [&](uint64_t n) {
    std::vector<Bulk> out;
    while (n > 0) {
      const Bulk& b = frame.bulk[slice];
      const uint64_t m = std::min<uint64_t>(n, b.size - within);
      if (m) out.push_back({b.buffer, static_cast<size_t>(b.offset + within), static_cast<size_t>(m)});
      within += m;
      n -= m;
      if (within == b.size) ++slice, within = 0;
    }
    return out;
  };
  uint64_t offset = 0;
  for (; total - offset > chunk_bytes; offset += chunk_bytes) {
    OutFrame piece;
    piece.type = wire::MsgType::kPayloadChunk;
    piece.request_id = frame.request_id;
    piece.fields = wire::encode_fields(wire::PayloadChunk{offset, total});
    piece.bulk = take(chunk_bytes);
    frames.push_back(std::move(piece));
  }
  frame.bulk = take(total - offset);
  frames.push_back(std::move(frame));
  return frames;
}

uint8_t* PayloadAssembler::place_chunk(uint64_t request_id, const wire::PayloadChunk& chunk, uint64_t bytes) {
  auto [it, fresh] = streams_.try_emplace(request_id);
  Stream& s = it->second;
  if (fresh) {
    if (chunk.offset != 0)
      throw wire::WireError(fmt::format("the first PayloadChunk of request {} starts at offset {}", request_id, chunk.offset));
    s.message.total = chunk.total;
    if (chunk.total <= max_bytes_) {
      try {
        s.message.data = std::make_shared<std::vector<uint8_t>>(chunk.total);
      } catch (const std::bad_alloc&) {
        // kept as too large: the message is answered with an error instead
      }
    }
  } else if (chunk.total != s.message.total || chunk.offset != s.got) {
    throw wire::WireError(fmt::format("a PayloadChunk of request {} claims offset {} of {} bytes, where {} of {} have come",
                                      request_id, chunk.offset, chunk.total, s.got, s.message.total));
  }
  // The message itself carries the last piece, so a chunk never reaches the end.
  if (bytes == 0 || bytes >= s.message.total - s.got)
    throw wire::WireError(fmt::format("a PayloadChunk of request {} carries {} bytes where {} of {} are due",
                                      request_id, bytes, s.message.total - s.got, s.message.total));
  return place(s, bytes);
}

uint8_t* PayloadAssembler::place_last(uint64_t request_id, uint64_t bytes) {
  Stream& s = streams_.at(request_id);
  if (bytes != s.message.total - s.got)
    throw wire::WireError(fmt::format("request {} ends its stream with {} bytes where {} of {} are due", request_id,
                                      bytes, s.message.total - s.got, s.message.total));
  return place(s, bytes);
}

uint8_t* PayloadAssembler::place(Stream& s, uint64_t bytes) {
  uint8_t* dst = s.message.data ? s.message.data->data() + s.got : nullptr;
  s.got += bytes;
  return dst;
}

PayloadAssembler::Message PayloadAssembler::finish(uint64_t request_id) {
  auto it = streams_.find(request_id);
  Message m = std::move(it->second.message);
  streams_.erase(it);
  return m;
}

}  // namespace fakegpu::coord
