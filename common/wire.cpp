#include "wire.h"

#include <cmath>

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

void Writer::str(const std::string& s) {
  u32(static_cast<uint32_t>(s.size()));
  raw(s.data(), s.size());
}

void Writer::raw(const void* data, size_t n) {
  auto* p = static_cast<const uint8_t*>(data);
  bytes_.insert(bytes_.end(), p, p + n);
}

void Reader::need(size_t n) const {
  if (n > size_ - pos_)
    throw WireError("truncated frame: needed " + std::to_string(n) + " more bytes at offset " +
                    std::to_string(pos_) + " of " + std::to_string(size_));
}

std::string Reader::str() {
  uint32_t n = u32();
  need(n);
  std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
  pos_ += n;
  return s;
}

void Writer::i32_list(const std::vector<int32_t>& v) {
  u32(static_cast<uint32_t>(v.size()));
  for (int32_t x : v) i32(x);
}

std::vector<int32_t> Reader::i32_list() {
  uint32_t n = u32();
  need(size_t{n} * 4);
  std::vector<int32_t> v(n);
  for (auto& x : v) x = i32();
  return v;
}

void Reader::raw(void* out, size_t n) {
  need(n);
  std::memcpy(out, data_ + pos_, n);
  pos_ += n;
}

void Hello::encode(Writer& w) const {
  w.u32(protocol_version);
  w.i32(env_rank);
  w.i32(env_world_size);
  w.u32(pid);
  w.str(hostname);
  w.u8(static_cast<uint8_t>(role));
  w.str(token);
  w.u64(chunk_bytes);
}
Hello Hello::decode(Reader& r) {
  Hello m;
  m.protocol_version = r.u32();
  // A peer of another version may lay out the rest differently: stop reading here and let
  // the coordinator answer with a version error.
  if (m.protocol_version != kProtocolVersion) return m;
  m.env_rank = r.i32();
  m.env_world_size = r.i32();
  m.pid = r.u32();
  m.hostname = r.str();
  uint8_t role = r.u8();
  if (role > static_cast<uint8_t>(ClientRole::kObserver)) throw WireError("Hello names unknown role " + std::to_string(role));
  m.role = static_cast<ClientRole>(role);
  m.token = r.str();
  m.chunk_bytes = r.u64();
  return m;
}

void Welcome::encode(Writer& w) const {
  w.u32(protocol_version);
  w.u32(world_size);
  w.u64(client_id);
  w.str(cluster_name);
}
Welcome Welcome::decode(Reader& r) {
  Welcome m;
  m.protocol_version = r.u32();
  m.world_size = r.u32();
  m.client_id = r.u64();
  m.cluster_name = r.str();
  return m;
}

void ErrorReply::encode(Writer& w) const {
  w.i32(code);
  w.str(message);
}
ErrorReply ErrorReply::decode(Reader& r) {
  ErrorReply m;
  m.code = r.i32();
  m.message = r.str();
  return m;
}

void CommInit::encode(Writer& w) const {
  w.raw(key.bytes, kCommKeyBytes);
  w.i32(nranks);
  w.i32(rank);
  w.i32(cuda_device);
  w.str(comm_name);
}
CommInit CommInit::decode(Reader& r) {
  CommInit m;
  r.raw(m.key.bytes, kCommKeyBytes);
  m.nranks = r.i32();
  m.rank = r.i32();
  m.cuda_device = r.i32();
  m.comm_name = r.str();
  return m;
}

void CommInitDone::encode(Writer& w) const {
  w.u64(comm_id);
  w.i32(global_rank);
}
CommInitDone CommInitDone::decode(Reader& r) {
  CommInitDone m;
  m.comm_id = r.u64();
  m.global_rank = r.i32();
  return m;
}

void CommSplit::encode(Writer& w) const {
  w.u64(parent_comm);
  w.i32(rank);
  w.u64(split_index);
  w.i32(color);
  w.i32(key);
}
CommSplit CommSplit::decode(Reader& r) {
  CommSplit m;
  m.parent_comm = r.u64();
  m.rank = r.i32();
  m.split_index = r.u64();
  m.color = r.i32();
  m.key = r.i32();
  return m;
}

void CommSplitDone::encode(Writer& w) const {
  w.u64(comm_id);
  w.i32(nranks);
  w.i32(rank);
  w.i32(global_rank);
}
CommSplitDone CommSplitDone::decode(Reader& r) {
  CommSplitDone m;
  m.comm_id = r.u64();
  m.nranks = r.i32();
  m.rank = r.i32();
  m.global_rank = r.i32();
  return m;
}

void CommShrink::encode(Writer& w) const {
  w.u64(parent_comm);
  w.i32(rank);
  w.u64(shrink_index);
  w.i32(flags);
  w.i32_list(excluded);
}
CommShrink CommShrink::decode(Reader& r) {
  CommShrink m;
  m.parent_comm = r.u64();
  m.rank = r.i32();
  m.shrink_index = r.u64();
  m.flags = r.i32();
  m.excluded = r.i32_list();
  return m;
}

void CommRevoke::encode(Writer& w) const {
  w.u64(comm_id);
  w.i32(rank);
}
CommRevoke CommRevoke::decode(Reader& r) {
  CommRevoke m;
  m.comm_id = r.u64();
  m.rank = r.i32();
  return m;
}

void CommInfo::encode(Writer& w) const {
  w.u64(comm_id);
  w.i32(rank);
  w.u32(flags);
}
CommInfo CommInfo::decode(Reader& r) {
  CommInfo m;
  m.comm_id = r.u64();
  m.rank = r.i32();
  m.flags = r.u32();
  return m;
}

void CommInfoReply::encode(Writer& w) const {
  w.i32(nnodes);
  w.i32(local_ranks);
  w.i32(local_rank);
  w.str(bus_id);
  w.u32(static_cast<uint32_t>(lines.size()));
  for (const InfoLine& l : lines) {
    w.u32(l.subsys);
    w.str(l.text);
  }
  w.str(graph_xml);
  w.str(topology_xml);
}
CommInfoReply CommInfoReply::decode(Reader& r) {
  CommInfoReply m;
  m.nnodes = r.i32();
  m.local_ranks = r.i32();
  m.local_rank = r.i32();
  m.bus_id = r.str();
  uint32_t n = r.u32();
  for (uint32_t i = 0; i < n; ++i) {
    InfoLine l;
    l.subsys = r.u32();
    l.text = r.str();
    m.lines.push_back(std::move(l));
  }
  m.graph_xml = r.str();
  m.topology_xml = r.str();
  return m;
}

void Simulate::encode(Writer& w) const {
  w.u32(static_cast<uint32_t>(ops.size()));
  for (const SimOp& op : ops) {
    w.u64(op.comm_id);
    w.i32(op.rank);
    w.u8(static_cast<uint8_t>(op.coll));
    w.i32(op.root);
    w.u64(op.bytes);
  }
}
Simulate Simulate::decode(Reader& r) {
  Simulate m;
  uint32_t n = r.u32();
  for (uint32_t i = 0; i < n; ++i) {
    SimOp op;
    op.comm_id = r.u64();
    op.rank = r.i32();
    uint8_t coll = r.u8();
    if (coll >= kNumCollTypes) throw WireError("Simulate: unknown collective type " + std::to_string(coll));
    op.coll = static_cast<CollType>(coll);
    op.root = r.i32();
    op.bytes = r.u64();
    m.ops.push_back(op);
  }
  return m;
}

void SimulateDone::encode(Writer& w) const { w.f64(time_us); }
SimulateDone SimulateDone::decode(Reader& r) {
  SimulateDone m;
  m.time_us = r.f64();
  return m;
}

void CommDestroy::encode(Writer& w) const {
  w.u64(comm_id);
  w.i32(rank);
}
CommDestroy CommDestroy::decode(Reader& r) {
  CommDestroy m;
  m.comm_id = r.u64();
  m.rank = r.i32();
  return m;
}

void Collective::encode(Writer& w) const {
  w.u64(comm_id);
  w.i32(rank);
  w.u64(seq);
  w.u8(static_cast<uint8_t>(coll));
  w.u8(dtype);
  w.u8(op);
  w.i32(root);
  w.u64(count);
  w.u64(scalar);
  w.u64(send.segment);
  w.u64(send.offset);
  w.u64(recv.segment);
  w.u64(recv.offset);
  w.u8(flags);
  w.f64(ready_us);
  w.u64(track);
}
Collective Collective::decode(Reader& r) {
  Collective m;
  m.comm_id = r.u64();
  m.rank = r.i32();
  m.seq = r.u64();
  uint8_t coll = r.u8();
  if (coll >= kNumCollTypes) throw WireError("unknown collective type " + std::to_string(coll));
  m.coll = static_cast<CollType>(coll);
  m.dtype = r.u8();
  m.op = r.u8();
  m.root = r.i32();
  m.count = r.u64();
  m.scalar = r.u64();
  m.send.segment = r.u64();
  m.send.offset = r.u64();
  m.recv.segment = r.u64();
  m.recv.offset = r.u64();
  m.flags = r.u8();
  m.ready_us = r.f64();
  if (!std::isfinite(m.ready_us)) throw WireError("collective ready time is not a finite number");
  m.track = r.u64();
  return m;
}

void OpenControlRing::encode(Writer& w) const { w.u64(capacity); }

OpenControlRing OpenControlRing::decode(Reader& r) {
  OpenControlRing m;
  m.capacity = r.u64();
  return m;
}

void PayloadChunk::encode(Writer& w) const {
  w.u64(offset);
  w.u64(total);
}
PayloadChunk PayloadChunk::decode(Reader& r) {
  PayloadChunk m;
  m.offset = r.u64();
  m.total = r.u64();
  return m;
}

void ShareSegment::encode(Writer& w) const {
  w.u64(segment);
  w.u64(size);
}
ShareSegment ShareSegment::decode(Reader& r) {
  ShareSegment m;
  m.segment = r.u64();
  m.size = r.u64();
  return m;
}

void CollectiveDone::encode(Writer& w) const {
  w.u64(seq);
  w.f64(modeled_us);
  w.f64(start_us);
}
CollectiveDone CollectiveDone::decode(Reader& r) {
  CollectiveDone m;
  m.seq = r.u64();
  m.modeled_us = r.f64();
  m.start_us = r.f64();
  return m;
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

void RankActivity::encode(Writer& w) const {
  w.u64(dropped);
  w.u32(static_cast<uint32_t>(slices.size()));
  for (const ActivitySlice& s : slices) {
    w.u64(s.track);
    w.f64(s.start_us);
    w.f64(s.end_us);
    w.u32(s.count);
    w.u8(static_cast<uint8_t>(s.kind));
  }
}
RankActivity RankActivity::decode(Reader& r) {
  RankActivity m;
  m.dropped = r.u64();
  uint32_t n = r.u32();
  if (n > kMaxSlices) throw WireError("RankActivity with " + std::to_string(n) + " slices, more than " +
                                      std::to_string(kMaxSlices));
  m.slices.resize(n);
  for (ActivitySlice& s : m.slices) {
    s.track = r.u64();
    s.start_us = r.f64();
    s.end_us = r.f64();
    s.count = r.u32();
    uint8_t kind = r.u8();
    if (kind >= kNumActivityKinds) throw WireError("unknown activity kind " + std::to_string(kind));
    s.kind = static_cast<ActivityKind>(kind);
    if (!(s.end_us >= s.start_us)) throw WireError("activity slice ends before it starts");
  }
  return m;
}

}  // namespace fakegpu::wire
