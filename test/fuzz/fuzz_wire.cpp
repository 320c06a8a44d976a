// Fuzz target for the wire decoder: the input is one frame as any peer that connects could send
// it. A WireError is the decoder's answer to bad bytes; anything else (a crash, a sanitizer
// report, another exception, a failed round trip below) is a bug.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "wire.h"

namespace {
using namespace fakegpu::wire;

// The header's reserved word is ignored on reading, so it is left out of the comparison.
constexpr size_t kReservedOffset = 12;
constexpr size_t kReservedBytes = 4;

void check_header_round_trip(const uint8_t* in, const FrameHeader& header) {
  uint8_t again[kHeaderBytes];
  encode_header(header, again);
  if (std::memcmp(in, again, kReservedOffset) != 0 ||
      std::memcmp(in + kReservedOffset + kReservedBytes, again + kReservedOffset + kReservedBytes,
                  kHeaderBytes - kReservedOffset - kReservedBytes) != 0)
    std::abort();
}

// Decoding reads every field and the encoding is canonical, so fields that decode must encode
// back to the same bytes; a Hello of another version is read only up to its version, so for it
// the check is that its own encoding survives a second round trip.
template <typename Msg>
void decode_and_round_trip(const uint8_t* fields, size_t size) {
  Msg msg;
  try {
    msg = decode_fields<Msg>(fields, size);
  } catch (const WireError&) {
    return;
  }
  std::vector<uint8_t> encoded = encode_fields(msg);
  if (!msg_has_foreign_version(msg) && (encoded.size() != size || !std::equal(encoded.begin(), encoded.end(), fields)))
    std::abort();
  // Our own encoding must always decode: no catch here.
  if (encode_fields(decode_fields<Msg>(encoded.data(), encoded.size())) != encoded) std::abort();
}

// The coordinator and the stub decode by the header's type, each message with its decode_fields.
// No default: -Wswitch names a type added to wire.h and forgotten here.
void decode_body(MsgType type, const uint8_t* fields, size_t size) {
  switch (type) {
    case MsgType::kHello: return decode_and_round_trip<Hello>(fields, size);
    case MsgType::kWelcome: return decode_and_round_trip<Welcome>(fields, size);
    case MsgType::kError: return decode_and_round_trip<ErrorReply>(fields, size);
    case MsgType::kCommInit: return decode_and_round_trip<CommInit>(fields, size);
    case MsgType::kCommInitDone: return decode_and_round_trip<CommInitDone>(fields, size);
    case MsgType::kCommSplit: return decode_and_round_trip<CommSplit>(fields, size);
    case MsgType::kCommSplitDone: return decode_and_round_trip<CommSplitDone>(fields, size);
    case MsgType::kCommDestroy: return decode_and_round_trip<CommDestroy>(fields, size);
    case MsgType::kAck: return decode_and_round_trip<Ack>(fields, size);
    case MsgType::kCollective: return decode_and_round_trip<Collective>(fields, size);
    case MsgType::kCollectiveDone: return decode_and_round_trip<CollectiveDone>(fields, size);
    case MsgType::kShareSegment: return decode_and_round_trip<ShareSegment>(fields, size);
    case MsgType::kCommShrink: return decode_and_round_trip<CommShrink>(fields, size);
    case MsgType::kCommRevoke: return decode_and_round_trip<CommRevoke>(fields, size);
    case MsgType::kCommInfo: return decode_and_round_trip<CommInfo>(fields, size);
    case MsgType::kCommInfoReply: return decode_and_round_trip<CommInfoReply>(fields, size);
    case MsgType::kSimulate: return decode_and_round_trip<Simulate>(fields, size);
    case MsgType::kSimulateDone: return decode_and_round_trip<SimulateDone>(fields, size);
    case MsgType::kStatusQuery: return decode_and_round_trip<StatusQuery>(fields, size);
    case MsgType::kStatusReply: return decode_and_round_trip<StatusReply>(fields, size);
    case MsgType::kOpenControlRing: return decode_and_round_trip<OpenControlRing>(fields, size);
    case MsgType::kPayloadChunk: return decode_and_round_trip<PayloadChunk>(fields, size);
    case MsgType::kRankActivity: return decode_and_round_trip<RankActivity>(fields, size);
    case MsgType::kPeerMailbox: return decode_and_round_trip<PeerMailbox>(fields, size);
    case MsgType::kRankOperators: return decode_and_round_trip<RankOperators>(fields, size);
  }
  std::abort();  // decode_header let through a type it does not know
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < kHeaderBytes) return 0;
  FrameHeader header;
  try {
    header = decode_header(data);
  } catch (const WireError&) {
    return 0;
  }
  check_header_round_trip(data, header);
  // A reader holds exactly fields_bytes before decoding. When the input is shorter, decode what
  // is there, as a frame whose header said so: the fuzzer need not get the length field right
  // to reach the message decoders.
  size_t available = size - kHeaderBytes;
  decode_body(header.type, data + kHeaderBytes, std::min<size_t>(header.fields_bytes, available));
  return 0;
}
