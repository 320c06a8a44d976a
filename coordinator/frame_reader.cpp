#include "frame_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <utility>

namespace fakegpu::coord {

FrameReader::FrameReader(uint64_t max_buffer_bytes, std::function<bool()> greeted)
    : max_buffer_bytes_(max_buffer_bytes), greeted_(std::move(greeted)), assembler_(max_buffer_bytes) {}

size_t FrameReader::feed(const uint8_t* data, size_t size) {
  size_t used = 0;
  while (!ready_) {
    const uint64_t want = part_size() - part_got_;
    if (want == 0) {  // parts may be empty: a frame without fields or bulk
      end_part();
      continue;
    }
    if (used == size) break;
    const size_t take = std::min<uint64_t>(want, size - used);
    if (uint8_t* dst = wanted().data) std::memcpy(dst, data + used, take);  // no dst: bulk being dropped
    used += take;
    part_got_ += take;
  }
  return used;
}

FrameReader::Span FrameReader::wanted() {
  uint8_t* dst = nullptr;
  switch (part_) {
    case Part::kHeader: dst = header_bytes_; break;
    case Part::kFields: dst = body_.data(); break;
    case Part::kBulk: dst = bulk_dst_; break;
  }
  return {dst ? dst + part_got_ : nullptr, part_size() - part_got_};
}

void FrameReader::advance(uint64_t n) { part_got_ += n; }

uint64_t FrameReader::part_size() const {
  switch (part_) {
    case Part::kHeader: return wire::kHeaderBytes;
    case Part::kFields: return header_.fields_bytes;
    case Part::kBulk: return header_.bulk_bytes();
  }
  return 0;
}

// Moves on once a part of the frame is complete.
void FrameReader::end_part() {
  const Part done = part_;
  part_got_ = 0;
  try {
    if (done == Part::kHeader) {
      header_ = wire::decode_header(header_bytes_);
      part_ = Part::kFields;
      plan_body();
      return;
    }
    if (done == Part::kFields) {
      part_ = Part::kBulk;
      if (header_.type == wire::MsgType::kPayloadChunk) {
        auto chunk = wire::decode_fields<wire::PayloadChunk>(body_.data(), body_.size());
        bulk_dst_ = assembler_.place_chunk(header_.request_id, chunk, header_.bulk_bytes());
      }
      return;
    }
  } catch (const wire::WireError& e) {
    throw FrameError(e.what());
  } catch (const std::bad_alloc&) {
    throw FrameError(fmt::format("cannot allocate a {}-byte frame", header_.body_bytes));
  }
  part_ = Part::kHeader;
  ready_ = true;
}

// Sizes the body for the frame whose header just came, and decides where its bulk goes: after
// the fields, into the buffer of the stream it ends, or nowhere (too large to keep).
void FrameReader::plan_body() {
  const wire::FrameHeader& h = header_;
  // A stranger gets no large buffer: only a greeted client may send bulk data.
  if (h.body_bytes > wire::kMaxFieldsBytes && !greeted_())
    throw wire::WireError(fmt::format("a {}-byte frame before the Hello", h.body_bytes));
  if (h.type == wire::MsgType::kPayloadChunk && !greeted_()) throw wire::WireError("a PayloadChunk before the Hello");
  ends_stream_ = h.type != wire::MsgType::kPayloadChunk && assembler_.streaming(h.request_id);
  if (h.type == wire::MsgType::kPayloadChunk) {
    body_.resize(h.fields_bytes);  // the bulk's place is known once the fields are read
  } else if (ends_stream_) {
    body_.resize(h.fields_bytes);
    bulk_dst_ = assembler_.place_last(h.request_id, h.bulk_bytes());
  } else if (h.body_bytes > max_buffer_bytes_) {
    body_.resize(h.fields_bytes);
    bulk_dst_ = nullptr;  // dropped as it streams past; the sender is told why
  } else {
    body_.resize(h.body_bytes);
    bulk_dst_ = body_.data() + h.fields_bytes;
  }
}

ReadFrame FrameReader::take() {
  ready_ = false;
  ReadFrame frame;
  frame.header = header_;
  frame.body = std::exchange(body_, {});
  if (header_.type == wire::MsgType::kPayloadChunk) return frame;  // its bulk is in place already
  if (ends_stream_) {
    PayloadAssembler::Message message = assembler_.finish(header_.request_id);
    frame.streamed = true;
    frame.payload = std::move(message.data);
    if (!frame.payload) {
      frame.bulk_dropped = true;
      frame.header.body_bytes = header_.fields_bytes + message.total;
    }
  } else {
    frame.bulk_dropped = !bulk_dst_ && header_.bulk_bytes() > 0;
  }
  return frame;
}

}  // namespace fakegpu::coord
