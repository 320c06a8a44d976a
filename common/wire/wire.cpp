#include "wire.h"

namespace fakegpu::wire {

const char* msg_type_name(MsgType type) {
  switch (type) {
    case MsgType::kHello: return "Hello";
    case MsgType::kWelcome: return "Welcome";
    case MsgType::kError: return "Error";
    case MsgType::kCommInit: return "CommInit";
    case MsgType::kCommInitDone: return "CommInitDone";
    case MsgType::kCommSplit: return "CommSplit";
    case MsgType::kCommSplitDone: return "CommSplitDone";
    case MsgType::kCommDestroy: return "CommDestroy";
    case MsgType::kAck: return "Ack";
    case MsgType::kCollective: return "Collective";
    case MsgType::kCollectiveDone: return "CollectiveDone";
    case MsgType::kShareSegment: return "ShareSegment";
    case MsgType::kCommShrink: return "CommShrink";
    case MsgType::kCommRevoke: return "CommRevoke";
    case MsgType::kCommInfo: return "CommInfo";
    case MsgType::kCommInfoReply: return "CommInfoReply";
    case MsgType::kSimulate: return "Simulate";
    case MsgType::kSimulateDone: return "SimulateDone";
    case MsgType::kStatusQuery: return "StatusQuery";
    case MsgType::kStatusReply: return "StatusReply";
    case MsgType::kOpenControlRing: return "OpenControlRing";
    case MsgType::kPayloadChunk: return "PayloadChunk";
    case MsgType::kRankActivity: return "RankActivity";
    case MsgType::kRankOperators: return "RankOperators";
    case MsgType::kRankMemory: return "RankMemory";
    case MsgType::kGroupRanks: return "GroupRanks";
    case MsgType::kPeerMailbox: return "PeerMailbox";
  }
  return "Unknown";
}

const char* coll_type_name(CollType type) {
  switch (type) {
    case CollType::kAllReduce: return "AllReduce";
    case CollType::kBroadcast: return "Broadcast";
    case CollType::kReduce: return "Reduce";
    case CollType::kAllGather: return "AllGather";
    case CollType::kReduceScatter: return "ReduceScatter";
    case CollType::kAlltoAll: return "AlltoAll";
    case CollType::kGather: return "Gather";
    case CollType::kScatter: return "Scatter";
    case CollType::kSend: return "Send";
    case CollType::kRecv: return "Recv";
  }
  return "Unknown";
}

void encode_header(const FrameHeader& header, uint8_t out[kHeaderBytes]) {
  Writer w;
  w.u32(kFrameMagic);
  w.u32(static_cast<uint16_t>(header.type));
  w.u32(header.fields_bytes);
  w.u32(0);  // reserved
  w.u64(header.request_id);
  w.u64(header.body_bytes);
  std::memcpy(out, w.bytes().data(), kHeaderBytes);
}

FrameHeader decode_header(const uint8_t in[kHeaderBytes]) {
  Reader r(in, kHeaderBytes);
  if (r.u32() != kFrameMagic) throw WireError("bad frame magic: the peer does not speak the fakegpu protocol");
  uint32_t type = r.u32();
  FrameHeader header;
  header.fields_bytes = r.u32();
  r.u32();  // reserved
  header.request_id = r.u64();
  header.body_bytes = r.u64();
  if (type < static_cast<uint32_t>(MsgType::kHello) || type > static_cast<uint32_t>(kLastMsgType))
    throw WireError("unknown message type " + std::to_string(type));
  if (header.body_bytes > kMaxBodyBytes)
    throw WireError("frame body of " + std::to_string(header.body_bytes) + " bytes exceeds the limit of " +
                    std::to_string(kMaxBodyBytes));
  if (header.fields_bytes > kMaxFieldsBytes || header.fields_bytes > header.body_bytes)
    throw WireError("frame fields of " + std::to_string(header.fields_bytes) + " bytes do not fit its body of " +
                    std::to_string(header.body_bytes));
  header.type = static_cast<MsgType>(type);
  return header;
}

const char* activity_kind_name(ActivityKind kind) {
  switch (kind) {
    case ActivityKind::kKernel: return "kernels";
    case ActivityKind::kCopy: return "copies";
    case ActivityKind::kCollective: return "NCCL";
    case ActivityKind::kStepBegin: return "step begins";
    case ActivityKind::kStepEnd: return "step ends";
  }
  return "unknown";
}

}  // namespace fakegpu::wire
