// FrameReader cuts a byte stream into frames however the bytes arrive: whole, a byte at a time,
// split anywhere, or with large bulk data read straight into place.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "frame_reader.h"

using namespace fakegpu;
using namespace fakegpu::coord;
using wire::MsgType;

namespace {

constexpr uint64_t kLimit = 1 << 20;  // max_buffer_bytes of the readers below

std::vector<uint8_t> counting_bytes(size_t n, uint8_t first) {
  std::vector<uint8_t> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

// The bytes a client puts on the wire for one frame.
void append_frame(std::vector<uint8_t>& stream, const OutFrame& frame) {
  uint8_t header[wire::kHeaderBytes];
  wire::encode_header({frame.type, frame.request_id, static_cast<uint32_t>(frame.fields.size()),
                       frame.fields.size() + frame.bulk_bytes()},
                      header);
  stream.insert(stream.end(), header, header + sizeof header);
  stream.insert(stream.end(), frame.fields.begin(), frame.fields.end());
  for (const Bulk& b : frame.bulk)
    stream.insert(stream.end(), b.buffer->begin() + b.offset, b.buffer->begin() + b.offset + b.size);
}

OutFrame hello_frame(uint64_t request_id) {
  wire::Hello hello;
  hello.hostname = "host";
  return {MsgType::kHello, request_id, wire::encode_fields(hello), {}, 0, nullptr};
}

OutFrame collective_frame(uint64_t request_id, size_t bulk_bytes) {
  wire::Collective c;
  c.count = bulk_bytes;
  OutFrame f{MsgType::kCollective, request_id, wire::encode_fields(c), {}, 0, nullptr};
  if (bulk_bytes) {
    auto data = std::make_shared<const std::vector<uint8_t>>(counting_bytes(bulk_bytes, 3));
    f.bulk.push_back({data, 0, bulk_bytes});
  }
  return f;
}

std::vector<uint8_t> body_of(const OutFrame& f) {
  std::vector<uint8_t> body = f.fields;
  for (const Bulk& b : f.bulk) body.insert(body.end(), b.buffer->begin() + b.offset, b.buffer->begin() + b.offset + b.size);
  return body;
}

// Feeds bytes [from, to) and collects the frames they complete.
void read_range(FrameReader& reader, const std::vector<uint8_t>& stream, size_t from, size_t to,
                std::vector<ReadFrame>& frames) {
  while (from < to || reader.ready()) {
    const size_t used = reader.feed(stream.data() + from, to - from);
    from += used;
    if (reader.ready()) {
      frames.push_back(reader.take());
    } else if (used == 0 && from < to) {
      ADD_FAILURE() << "feed took no bytes and completed no frame";
      return;
    }
  }
}

FrameReader greeted_reader(uint64_t limit = kLimit) {
  return FrameReader(limit, [] { return true; });
}

}  // namespace

TEST(FrameReader, FramesComeOutWhereverTheStreamIsCut) {
  const std::vector<OutFrame> sent = {hello_frame(1), collective_frame(2, 100), collective_frame(3, 0),
                                      collective_frame(4, 7)};
  std::vector<uint8_t> stream;
  for (const OutFrame& f : sent) append_frame(stream, f);

  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    FrameReader reader = greeted_reader();
    std::vector<ReadFrame> frames;
    read_range(reader, stream, 0, cut, frames);
    read_range(reader, stream, cut, stream.size(), frames);
    ASSERT_EQ(frames.size(), sent.size()) << "cut at byte " << cut;
    for (size_t i = 0; i < sent.size(); ++i) {
      EXPECT_EQ(frames[i].header.type, sent[i].type) << "cut at byte " << cut;
      EXPECT_EQ(frames[i].header.request_id, sent[i].request_id);
      EXPECT_EQ(frames[i].header.fields_bytes, sent[i].fields.size());
      EXPECT_EQ(frames[i].body, body_of(sent[i])) << "frame " << i << ", cut at byte " << cut;
      EXPECT_FALSE(frames[i].streamed);
      EXPECT_FALSE(frames[i].bulk_dropped);
    }
  }
}

TEST(FrameReader, AByteAtATime) {
  std::vector<uint8_t> stream;
  append_frame(stream, collective_frame(9, 33));
  FrameReader reader = greeted_reader();
  std::vector<ReadFrame> frames;
  for (size_t i = 0; i < stream.size(); ++i) {
    EXPECT_TRUE(frames.empty()) << "a frame completed early, at byte " << i;
    read_range(reader, stream, i, i + 1, frames);
  }
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].body, body_of(collective_frame(9, 33)));
}

TEST(FrameReader, FeedStopsAtTheEndOfAFrame) {
  std::vector<uint8_t> stream;
  append_frame(stream, hello_frame(1));
  const size_t first = stream.size();
  append_frame(stream, hello_frame(2));
  FrameReader reader = greeted_reader();
  EXPECT_EQ(reader.feed(stream.data(), stream.size()), first);
  ASSERT_TRUE(reader.ready());
  EXPECT_EQ(reader.feed(stream.data() + first, stream.size() - first), 0u) << "fed past an untaken frame";
  EXPECT_EQ(reader.take().header.request_id, 1u);
  EXPECT_EQ(reader.feed(stream.data() + first, stream.size() - first), stream.size() - first);
  EXPECT_EQ(reader.take().header.request_id, 2u);
}

TEST(FrameReader, LargeBulkIsReadStraightIntoPlace) {
  const OutFrame frame = collective_frame(5, 5000);
  std::vector<uint8_t> stream;
  append_frame(stream, frame);
  const size_t head = wire::kHeaderBytes + frame.fields.size();
  FrameReader reader = greeted_reader();
  EXPECT_EQ(reader.feed(stream.data(), head), head);
  FrameReader::Span rest = reader.wanted();
  ASSERT_NE(rest.data, nullptr);
  ASSERT_EQ(rest.size, 5000u);
  std::memcpy(rest.data, stream.data() + head, 3000);
  reader.advance(3000);
  rest = reader.wanted();
  ASSERT_EQ(rest.size, 2000u);
  std::memcpy(rest.data, stream.data() + head + 3000, 2000);
  reader.advance(2000);
  EXPECT_FALSE(reader.ready());
  EXPECT_EQ(reader.feed(nullptr, 0), 0u);  // closes the part
  ASSERT_TRUE(reader.ready());
  EXPECT_EQ(reader.take().body, body_of(frame));
}

TEST(FrameReader, OversizedBulkIsDroppedAndTheStreamGoesOn) {
  std::vector<uint8_t> stream;
  const OutFrame big = collective_frame(1, 5000);
  append_frame(stream, big);
  append_frame(stream, collective_frame(2, 10));
  FrameReader reader = greeted_reader(1000);
  std::vector<ReadFrame> frames;
  read_range(reader, stream, 0, stream.size(), frames);
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_TRUE(frames[0].bulk_dropped);
  EXPECT_EQ(frames[0].body, big.fields);
  EXPECT_EQ(frames[0].header.body_bytes, big.fields.size() + 5000);
  EXPECT_FALSE(frames[1].bulk_dropped);
  EXPECT_EQ(frames[1].body, body_of(collective_frame(2, 10)));
}

TEST(FrameReader, ChunkedPayloadIsPutBackTogether) {
  const OutFrame whole = collective_frame(7, 10000);
  std::vector<uint8_t> stream;
  for (const OutFrame& piece : split_frame(collective_frame(7, 10000), 4096)) append_frame(stream, piece);
  for (size_t cut : {size_t{0}, size_t{1}, size_t{40}, size_t{4200}, size_t{4200 + 77}, stream.size() - 1}) {
    FrameReader reader = greeted_reader();
    std::vector<ReadFrame> frames;
    read_range(reader, stream, 0, cut, frames);
    read_range(reader, stream, cut, stream.size(), frames);
    ASSERT_EQ(frames.size(), 3u) << "cut at byte " << cut;
    EXPECT_EQ(frames[0].header.type, MsgType::kPayloadChunk);
    EXPECT_EQ(frames[1].header.type, MsgType::kPayloadChunk);
    const ReadFrame& last = frames[2];
    EXPECT_EQ(last.header.type, MsgType::kCollective);
    EXPECT_TRUE(last.streamed);
    EXPECT_FALSE(last.bulk_dropped);
    EXPECT_EQ(last.body, whole.fields);
    ASSERT_NE(last.payload, nullptr);
    EXPECT_EQ(*last.payload, counting_bytes(10000, 3)) << "cut at byte " << cut;
  }
}

TEST(FrameReader, ChunkedPayloadOverTheLimitIsDropped) {
  std::vector<uint8_t> stream;
  for (const OutFrame& piece : split_frame(collective_frame(7, 10000), 4096)) append_frame(stream, piece);
  FrameReader reader = greeted_reader(8000);
  std::vector<ReadFrame> frames;
  read_range(reader, stream, 0, stream.size(), frames);
  ASSERT_EQ(frames.size(), 3u);
  const ReadFrame& last = frames[2];
  EXPECT_TRUE(last.streamed);
  EXPECT_TRUE(last.bulk_dropped);
  EXPECT_EQ(last.payload, nullptr);
  // The header counts the whole message, so the sender is told its real size.
  EXPECT_EQ(last.header.body_bytes, last.header.fields_bytes + 10000);
}

TEST(FrameReader, ChunkOutOfOrderIsRefused) {
  std::vector<OutFrame> pieces = split_frame(collective_frame(7, 10000), 4096);
  ASSERT_EQ(pieces.size(), 3u);
  std::vector<uint8_t> stream;
  append_frame(stream, pieces[1]);  // starts at offset 4096
  FrameReader reader = greeted_reader();
  std::vector<ReadFrame> frames;
  try {
    read_range(reader, stream, 0, stream.size(), frames);
    FAIL() << "a stream starting mid-way was accepted";
  } catch (const FrameError& e) {
    EXPECT_NE(std::string(e.what()).find("starts at offset 4096"), std::string::npos) << e.what();
  }
}

TEST(FrameReader, BadMagicIsRefused) {
  std::vector<uint8_t> stream;
  append_frame(stream, hello_frame(1));
  stream[0] ^= 0xff;
  FrameReader reader = greeted_reader();
  EXPECT_THROW(reader.feed(stream.data(), stream.size()), FrameError);
}

TEST(FrameReader, StrangersMaySendOnlySmallFrames) {
  bool greeted = false;
  FrameReader reader(kLimit, [&] { return greeted; });
  std::vector<uint8_t> stream;
  append_frame(stream, collective_frame(1, wire::kMaxFieldsBytes));
  try {
    reader.feed(stream.data(), wire::kHeaderBytes);
    FAIL() << "a large frame before the Hello was accepted";
  } catch (const FrameError& e) {
    EXPECT_NE(std::string(e.what()).find("before the Hello"), std::string::npos) << e.what();
  }
  greeted = true;
  FrameReader after_hello(kLimit, [&] { return greeted; });
  std::vector<ReadFrame> frames;
  read_range(after_hello, stream, 0, stream.size(), frames);
  EXPECT_EQ(frames.size(), 1u);
}

TEST(FrameReader, StrangersMayNotStreamPayloads) {
  std::vector<uint8_t> stream;
  append_frame(stream, split_frame(collective_frame(7, 10000), 4096).front());
  FrameReader reader(kLimit, [] { return false; });
  EXPECT_THROW(reader.feed(stream.data(), stream.size()), FrameError);
}
