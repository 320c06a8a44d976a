#include <gtest/gtest.h>

#include <numeric>

#include "payload_stream.h"

using namespace fakegpu;
using namespace fakegpu::coord;
using wire::MsgType;
using wire::PayloadChunk;
using wire::WireError;

namespace {

std::shared_ptr<std::vector<uint8_t>> counting_bytes(size_t n, uint8_t first) {
  auto v = std::make_shared<std::vector<uint8_t>>(n);
  std::iota(v->begin(), v->end(), first);
  return v;
}

// A reply whose bulk is two slices of different buffers, as a gather's reply is.
OutFrame two_slice_reply(size_t a, size_t b) {
  OutFrame f;
  f.type = MsgType::kCollectiveDone;
  f.request_id = 42;
  f.fields = wire::encode_fields(wire::CollectiveDone{7, 1.5});
  f.bulk = {{counting_bytes(a + 10, 0), 10, a}, {counting_bytes(b, 100), 0, b}};
  return f;
}

std::vector<uint8_t> bytes_of(const std::vector<Bulk>& bulk) {
  std::vector<uint8_t> out;
  for (const Bulk& b : bulk) out.insert(out.end(), b.buffer->begin() + b.offset, b.buffer->begin() + b.offset + b.size);
  return out;
}

}  // namespace

TEST(PayloadStream, SmallFramesAndUnchunkedClientsGoWhole) {
  EXPECT_EQ(split_frame(two_slice_reply(100, 100), 4096).size(), 1u);
  EXPECT_EQ(split_frame(two_slice_reply(5000, 5000), 0).size(), 1u);  // an observer: whole frames
  EXPECT_EQ(split_frame(two_slice_reply(4000, 96), 4096).size(), 1u);  // exactly one chunk
}

TEST(PayloadStream, SplitCutsAcrossSlicesAndEndsWithTheMessage) {
  OutFrame whole = two_slice_reply(5000, 3000);
  const std::vector<uint8_t> expected = bytes_of(whole.bulk);
  std::vector<OutFrame> frames = split_frame(two_slice_reply(5000, 3000), 4096);
  ASSERT_EQ(frames.size(), 2u);

  EXPECT_EQ(frames[0].type, MsgType::kPayloadChunk);
  EXPECT_EQ(frames[0].request_id, 42u);
  auto chunk = wire::decode_fields<PayloadChunk>(frames[0].fields.data(), frames[0].fields.size());
  EXPECT_EQ(chunk.offset, 0u);
  EXPECT_EQ(chunk.total, 8000u);
  EXPECT_EQ(frames[0].bulk_bytes(), 4096u);

  EXPECT_EQ(frames[1].type, MsgType::kCollectiveDone);  // the message itself, last
  EXPECT_EQ(frames[1].fields, whole.fields);
  EXPECT_EQ(frames[1].bulk_bytes(), 8000u - 4096u);
  EXPECT_EQ(frames[1].bulk.size(), 2u);  // the rest of the first slice, then the second

  std::vector<uint8_t> joined = bytes_of(frames[0].bulk);
  std::vector<uint8_t> rest = bytes_of(frames[1].bulk);
  joined.insert(joined.end(), rest.begin(), rest.end());
  EXPECT_EQ(joined, expected);
}

TEST(PayloadStream, AssemblerPutsPiecesBackInPlace) {
  const std::vector<uint8_t> expected = bytes_of(two_slice_reply(9000, 1234).bulk);
  std::vector<OutFrame> frames = split_frame(two_slice_reply(9000, 1234), 4096);
  ASSERT_EQ(frames.size(), 3u);
  PayloadAssembler in(1 << 20);
  EXPECT_FALSE(in.streaming(42));
  for (size_t i = 0; i + 1 < frames.size(); ++i) {
    auto chunk = wire::decode_fields<PayloadChunk>(frames[i].fields.data(), frames[i].fields.size());
    std::vector<uint8_t> piece = bytes_of(frames[i].bulk);
    uint8_t* dst = in.place_chunk(42, chunk, piece.size());
    ASSERT_NE(dst, nullptr);
    std::copy(piece.begin(), piece.end(), dst);
    EXPECT_TRUE(in.streaming(42));
  }
  std::vector<uint8_t> last = bytes_of(frames.back().bulk);
  std::copy(last.begin(), last.end(), in.place_last(42, last.size()));
  PayloadAssembler::Message m = in.finish(42);
  ASSERT_TRUE(m.data);
  EXPECT_EQ(*m.data, expected);
  EXPECT_EQ(m.total, expected.size());
  EXPECT_FALSE(in.streaming(42));
}

TEST(PayloadStream, PiecesOutOfPlaceAreProtocolErrors) {
  PayloadAssembler in(1 << 20);
  EXPECT_THROW(in.place_chunk(1, PayloadChunk{4096, 10000}, 4096), WireError);  // not starting at 0

  ASSERT_NE(in.place_chunk(2, PayloadChunk{0, 10000}, 4096), nullptr);
  EXPECT_THROW(in.place_chunk(2, PayloadChunk{0, 10000}, 4096), WireError);  // repeated
  PayloadAssembler in2(1 << 20);
  in2.place_chunk(3, PayloadChunk{0, 10000}, 4096);
  EXPECT_THROW(in2.place_chunk(3, PayloadChunk{4096, 12000}, 4096), WireError);  // total changed
  PayloadAssembler in3(1 << 20);
  in3.place_chunk(4, PayloadChunk{0, 10000}, 4096);
  EXPECT_THROW(in3.place_chunk(4, PayloadChunk{4096, 10000}, 5904), WireError);  // the message must carry the end
  PayloadAssembler in4(1 << 20);
  in4.place_chunk(5, PayloadChunk{0, 10000}, 4096);
  EXPECT_THROW(in4.place_last(5, 100), WireError);  // ends short
  EXPECT_THROW(PayloadAssembler(1 << 20).place_chunk(6, PayloadChunk{0, 10000}, 0), WireError);  // empty piece
}

TEST(PayloadStream, TooLargeMessagesAreDroppedButTracked) {
  PayloadAssembler in(8192);
  EXPECT_EQ(in.place_chunk(9, PayloadChunk{0, 20000}, 8192), nullptr);
  EXPECT_EQ(in.place_chunk(9, PayloadChunk{8192, 20000}, 8192), nullptr);
  EXPECT_THROW(in.place_chunk(9, PayloadChunk{8192, 20000}, 8192), WireError);  // still checked
  PayloadAssembler in2(8192);
  in2.place_chunk(9, PayloadChunk{0, 20000}, 8192);
  EXPECT_EQ(in2.place_last(9, 20000 - 8192), nullptr);
  PayloadAssembler::Message m = in2.finish(9);
  EXPECT_FALSE(m.data);
  EXPECT_EQ(m.total, 20000u);  // for the error that names the size
}
