#include <gtest/gtest.h>

#include <limits>
#include <set>
#include <tuple>
#include <utility>

#include "endpoint.h"
#include "wire.h"

using namespace fakegpu;
using namespace fakegpu::wire;

template <typename Msg>
Msg round_trip(const Msg& msg) {
  auto bytes = encode_fields(msg);
  return decode_fields<Msg>(bytes.data(), bytes.size());
}

// ---- Every member of every message -------------------------------------------------------
// Each struct's members as a tuple, taken apart with a structured binding. The binding must
// name every member, so a member added to a struct but not here does not compile; once here,
// the test below makes it get a value and checks that the value travels.
namespace fakegpu::wire {
#define MEMBERS(Type, ...)                        \
  static auto members(const Type& m) {            \
    const auto& [__VA_ARGS__] = m;                \
    return std::tie(__VA_ARGS__);                 \
  }
MEMBERS(Hello, a, b, c, d, e, f, g, h, i)
MEMBERS(Welcome, a, b, c, d)
MEMBERS(ErrorReply, a, b)
MEMBERS(CommInit, a, b, c, d, e)
MEMBERS(CommInitDone, a, b, c)
MEMBERS(NcclMemory, a, b, c, d)
MEMBERS(CommSplit, a, b, c, d, e)
MEMBERS(CommSplitDone, a, b, c, d, e)
MEMBERS(CommShrink, a, b, c, d, e)
MEMBERS(CommRevoke, a, b)
MEMBERS(CommDestroy, a, b)
MEMBERS(BufferRef, a, b)
MEMBERS(ShareSegment, a, b)
MEMBERS(Collective, a, b, c, d, e, f, g, h, i, j, k, l, n, o)
MEMBERS(CollectiveDone, a, b, c, d, e, f, g, h, i)
MEMBERS(CommInfo, a, b, c)
MEMBERS(InfoLine, a, b)
MEMBERS(CommInfoReply, a, b, c, d, e, f, g)
MEMBERS(SimOp, a, b, c, d, e)
MEMBERS(Simulate, a)
MEMBERS(SimulateDone, a)
MEMBERS(OpenControlRing, a, b)
MEMBERS(PayloadChunk, a, b)
MEMBERS(ActivitySlice, a, b, c, d, e)
MEMBERS(RankActivity, a, b)
MEMBERS(PeerMailbox, a, b, c)
MEMBERS(OperatorTotal, a, b, c, d, e, f, g, h, i, j, k)
MEMBERS(RankOperators, a)
MEMBERS(MemoryParts, a, b, c, d)
MEMBERS(MemorySample, a, b)
MEMBERS(LiveBlock, a)
MEMBERS(RankMemory, a, b, c, d, e, f, g, h, i, j, k, l, n, o, p, q, r, s)
MEMBERS(GroupRanks, a, b)
#undef MEMBERS
// Messages without fields.
static std::tuple<> members(const Ack&) { return {}; }
static std::tuple<> members(const StatusQuery&) { return {}; }
static std::tuple<> members(const StatusReply&) { return {}; }

// Nested structs compare member by member, so lists of them compare too.
static bool operator==(const BufferRef& a, const BufferRef& b) { return members(a) == members(b); }
static bool operator==(const InfoLine& a, const InfoLine& b) { return members(a) == members(b); }
static bool operator==(const SimOp& a, const SimOp& b) { return members(a) == members(b); }
static bool operator==(const ActivitySlice& a, const ActivitySlice& b) { return members(a) == members(b); }
static bool operator==(const OperatorTotal& a, const OperatorTotal& b) { return members(a) == members(b); }
static bool operator==(const NcclMemory& a, const NcclMemory& b) { return members(a) == members(b); }
static bool operator==(const MemoryParts& a, const MemoryParts& b) { return members(a) == members(b); }
static bool operator==(const MemorySample& a, const MemorySample& b) { return members(a) == members(b); }
static bool operator==(const LiveBlock& a, const LiveBlock& b) { return members(a) == members(b); }
}  // namespace fakegpu::wire

namespace {

template <typename Tuple, size_t... I>
std::vector<bool> matches(const Tuple& a, const Tuple& b, std::index_sequence<I...>) {
  return {(std::get<I>(a) == std::get<I>(b))...};
}

// Which members of a and b are equal, by index.
template <typename T>
std::vector<bool> equal_members(const T& a, const T& b) {
  const auto ta = members(a);
  const auto tb = members(b);
  return matches(ta, tb, std::make_index_sequence<std::tuple_size_v<decltype(ta)>>());
}

// Fails for each member of value that still has its default value, but those listed.
template <typename T>
void expect_all_set(const T& value, const std::set<size_t>& may_be_default = {}) {
  const std::vector<bool> like_default = equal_members(value, T{});
  for (size_t i = 0; i < like_default.size(); ++i) {
    if (!may_be_default.count(i)) {
      EXPECT_FALSE(like_default[i]) << "member " << i << " is left at its default";
    }
  }
}

// Every member set, round trip, every member back.
template <typename Msg>
void expect_every_field_travels(const Msg& full, const std::set<size_t>& may_be_default = {}) {
  SCOPED_TRACE(msg_type_name(Msg::kType));
  expect_all_set(full, may_be_default);
  const std::vector<bool> same = equal_members(round_trip(full), full);
  for (size_t i = 0; i < same.size(); ++i) EXPECT_TRUE(same[i]) << "member " << i << " did not survive the round trip";
}

constexpr uint64_t kBig = 0x0123456789abcdefull;  // every byte different, past 32 bits

Hello full_hello() {
  Hello m;
  // protocol_version stays ours: with another, nothing after it is read.
  m.env_rank = 3;
  m.env_world_size = 8;
  m.pid = 4242;
  m.hostname = "node-a";
  m.role = ClientRole::kObserver;
  m.token = "s3cret";
  m.chunk_bytes = kBig;
  m.compute_gpu = "NVIDIA H200";
  return m;
}

CommInit full_comm_init() {
  CommInit m;
  for (size_t i = 0; i < kCommKeyBytes; ++i) m.key.bytes[i] = static_cast<uint8_t>(i * 7 + 1);
  m.nranks = 8;
  m.rank = 5;
  m.cuda_device = 2;
  m.comm_name = "tp";
  return m;
}

Collective full_collective() {
  Collective m;
  m.comm_id = kBig;
  m.rank = 6;
  m.seq = kBig + 1;
  m.coll = CollType::kReduceScatter;
  m.dtype = 9;
  m.op = 3;
  m.root = -7;
  m.count = kBig + 2;
  m.scalar = kBig + 3;
  m.send = {kBig + 4, kBig + 5};
  m.recv = {kBig + 6, kBig + 7};
  expect_all_set(m.send);
  expect_all_set(m.recv);
  m.flags = kNoPayload;
  m.ready_us = 1234.5;
  m.track = kBig + 8;
  return m;
}

CommInfoReply full_comm_info_reply() {
  CommInfoReply m;
  m.nnodes = 2;
  m.local_ranks = 8;
  m.local_rank = 5;
  m.bus_id = "0001:06:00.0";
  m.lines = {{kSubsysGraph, "Ring 00 : 7 -> 0 -> 1"}};
  expect_all_set(m.lines[0]);
  m.graph_xml = "<graphs/>";
  m.topology_xml = "<system/>";
  return m;
}

Simulate full_simulate() {
  Simulate m;
  m.ops = {{kBig, 3, CollType::kSend, 2, kBig + 1}};
  expect_all_set(m.ops[0]);
  return m;
}

RankActivity full_rank_activity() {
  RankActivity m;
  m.slices = {{kBig, 1.5, 2.25, 4, ActivityKind::kStepEnd}};
  expect_all_set(m.slices[0]);
  m.dropped = kBig + 1;
  return m;
}

RankOperators full_rank_operators() {
  RankOperators m;
  m.rows = {{"aten::mm", kBig, kBig + 1, 1.5, 2.25, 0.5, 0.75, 0.125, 0.0625, 3, 1.25}};
  expect_all_set(m.rows[0]);
  return m;
}

RankMemory full_rank_memory() {
  RankMemory m;
  m.device = 3;
  m.capacity = kBig;
  m.in_use = {kBig + 1, kBig + 2, kBig + 3, kBig + 4};
  m.peak = kBig + 5;
  m.peak_parts = {kBig + 6, kBig + 7, kBig + 8, kBig + 9};
  m.peak_us = 12.5;
  m.peak_step = 2;
  m.failures = 1;
  m.failed_bytes = kBig + 10;
  m.failed_parts = {kBig + 11, kBig + 12, kBig + 13, kBig + 14};
  m.failed_us = 40.25;
  m.failed_step = 3;
  m.failed_part = 2;
  m.torch_peak_allocated = kBig + 15;
  m.torch_peak_reserved = kBig + 16;
  m.torch_oom_bytes = kBig + 17;
  m.torch_oom_largest = {{kBig + 18}};
  m.samples = {{1.5, kBig + 19}};
  for (const MemoryParts& parts : {m.in_use, m.peak_parts, m.failed_parts}) expect_all_set(parts);
  expect_all_set(m.samples[0]);
  return m;
}

// One message of the type with every field set. No default: -Wswitch names a type added to
// wire.h and forgotten here.
void expect_full_round_trip(MsgType type) {
  switch (type) {
    case MsgType::kHello: return expect_every_field_travels(full_hello(), {0});  // the version, see above
    case MsgType::kWelcome: return expect_every_field_travels(Welcome{kProtocolVersion + 1, 16, kBig, "dev"});
    case MsgType::kError: return expect_every_field_travels(ErrorReply{-5, "bad things"});
    case MsgType::kCommInit: return expect_every_field_travels(full_comm_init());
    case MsgType::kCommInitDone: {
      const NcclMemory memory{kBig, kBig + 1, kBig + 2, kBig + 3};
      expect_all_set(memory);
      return expect_every_field_travels(CommInitDone{kBig, 4, memory});
    }
    case MsgType::kCommSplit: return expect_every_field_travels(CommSplit{kBig, 1, kBig + 1, -1, 17});
    case MsgType::kCommSplitDone:
      return expect_every_field_travels(CommSplitDone{kBig, 4, 2, 9, {kBig, kBig + 1, kBig + 2, kBig + 3}});
    case MsgType::kCommDestroy: return expect_every_field_travels(CommDestroy{kBig, 3});
    case MsgType::kAck: return expect_every_field_travels(Ack{});
    case MsgType::kCollective: return expect_every_field_travels(full_collective());
    case MsgType::kCollectiveDone:
      return expect_every_field_travels(CollectiveDone{kBig, 12.5, 300.25, 7.75, 1, 5, kBig + 1, kBig + 2, kBig + 3});
    case MsgType::kShareSegment: return expect_every_field_travels(ShareSegment{kBig, kBig + 1});
    case MsgType::kCommShrink: return expect_every_field_travels(CommShrink{kBig, 2, kBig + 1, 1, {3, -7}});
    case MsgType::kCommRevoke: return expect_every_field_travels(CommRevoke{kBig, 1});
    case MsgType::kCommInfo: return expect_every_field_travels(CommInfo{kBig, 3, kInfoLines | kTopologyXml});
    case MsgType::kCommInfoReply: return expect_every_field_travels(full_comm_info_reply());
    case MsgType::kSimulate: return expect_every_field_travels(full_simulate());
    case MsgType::kSimulateDone: return expect_every_field_travels(SimulateDone{12.75});
    case MsgType::kStatusQuery: return expect_every_field_travels(StatusQuery{});
    case MsgType::kStatusReply: return expect_every_field_travels(StatusReply{});
    case MsgType::kOpenControlRing: return expect_every_field_travels(OpenControlRing{kBig, 1});
    case MsgType::kPayloadChunk: return expect_every_field_travels(PayloadChunk{kBig, kBig + 1});
    case MsgType::kRankActivity: return expect_every_field_travels(full_rank_activity());
    case MsgType::kPeerMailbox: return expect_every_field_travels(PeerMailbox{kBig, 16, kBig + 1});
    case MsgType::kRankOperators: return expect_every_field_travels(full_rank_operators());
    case MsgType::kRankMemory: return expect_every_field_travels(full_rank_memory());
    case MsgType::kGroupRanks: return expect_every_field_travels(GroupRanks{"7", {0, 4, 8, -1}});
  }
  ADD_FAILURE() << "no test message for type " << static_cast<int>(type);
}

// The decode error for msg's encoding with byte at set to value ("" when it decodes).
template <typename Msg>
std::string error_with_byte(const Msg& msg, size_t at, uint8_t value) {
  auto bytes = encode_fields(msg);
  bytes.at(at) = value;
  try {
    decode_fields<Msg>(bytes.data(), bytes.size());
  } catch (const WireError& e) {
    return e.what();
  }
  return "";
}

// Where an enum field sits: the first byte at which two encodings differing only in it differ.
template <typename Msg>
size_t first_difference(const Msg& a, const Msg& b) {
  const auto x = encode_fields(a);
  const auto y = encode_fields(b);
  return std::mismatch(x.begin(), x.end(), y.begin()).first - x.begin();
}

// Both the first value past the enum and the largest byte are refused, naming message and field.
template <typename Msg>
void expect_unknown_values_rejected(const Msg& msg, const Msg& other, uint32_t count, const std::string& field) {
  SCOPED_TRACE(field);
  const size_t at = first_difference(msg, other);
  EXPECT_EQ(error_with_byte(msg, at, static_cast<uint8_t>(count - 1)), "");  // the last known value decodes
  for (uint32_t bad : {count, 255u})
    EXPECT_EQ(error_with_byte(msg, at, static_cast<uint8_t>(bad)),
              std::string(msg_type_name(Msg::kType)) + " field " + field + " has unknown value " + std::to_string(bad));
}

}  // namespace

TEST(Wire, EveryFieldOfEveryMessageRoundTrips) {
  for (uint32_t t = static_cast<uint32_t>(MsgType::kHello); t <= static_cast<uint32_t>(kLastMsgType); ++t)
    expect_full_round_trip(static_cast<MsgType>(t));
}

TEST(Wire, UnknownEnumValuesAreRejected) {
  Hello observer = full_hello();
  Hello rank = observer;
  rank.role = ClientRole::kRank;
  expect_unknown_values_rejected(observer, rank, enum_count(ClientRole{}), "role");

  Collective broadcast = full_collective();
  broadcast.coll = CollType::kBroadcast;
  expect_unknown_values_rejected(broadcast, full_collective(), kNumCollTypes, "coll");

  Simulate sim = full_simulate();
  sim.ops.insert(sim.ops.begin(), sim.ops[0]);  // the second op is the one changed
  Simulate other = sim;
  other.ops[1].coll = CollType::kAllReduce;
  expect_unknown_values_rejected(sim, other, kNumCollTypes, "ops[1].coll");

  RankActivity activity = full_rank_activity();
  RankActivity kernel = activity;
  kernel.slices[0].kind = ActivityKind::kKernel;
  expect_unknown_values_rejected(activity, kernel, kNumActivityKinds, "slices[0].kind");
}

TEST(Wire, ImpossibleValuesAreRejected) {
  Collective c = full_collective();
  c.ready_us = std::numeric_limits<double>::infinity();
  auto bytes = encode_fields(c);
  try {
    decode_fields<Collective>(bytes.data(), bytes.size());
    ADD_FAILURE() << "an infinite ready time was accepted";
  } catch (const WireError& e) {
    EXPECT_STREQ(e.what(), "Collective field ready_us is not a finite number");
  }

  RankActivity many;
  many.slices.resize(RankActivity::kMaxSlices + 1);
  bytes = encode_fields(many);
  try {
    decode_fields<RankActivity>(bytes.data(), bytes.size());
    ADD_FAILURE() << "a RankActivity with too many slices was accepted";
  } catch (const WireError& e) {
    EXPECT_NE(std::string(e.what()).find("RankActivity field slices has 16385 items"), std::string::npos) << e.what();
  }
}

TEST(Wire, HeaderRoundTrip) {
  FrameHeader h{MsgType::kCollective, 0x1122334455667788ull, 40, 1000};
  uint8_t raw[kHeaderBytes];
  encode_header(h, raw);
  FrameHeader back = decode_header(raw);
  EXPECT_EQ(back.type, MsgType::kCollective);
  EXPECT_EQ(back.request_id, h.request_id);
  EXPECT_EQ(back.fields_bytes, 40u);
  EXPECT_EQ(back.body_bytes, 1000u);
  EXPECT_EQ(back.bulk_bytes(), 960u);
}

TEST(Wire, HeaderRejectsGarbage) {
  uint8_t raw[kHeaderBytes];
  encode_header({MsgType::kHello, 1, 0, 0}, raw);
  raw[0] ^= 0xff;
  EXPECT_THROW(decode_header(raw), WireError);

  encode_header({static_cast<MsgType>(999), 1, 0, 0}, raw);
  EXPECT_THROW(decode_header(raw), WireError);

  encode_header({MsgType::kHello, 1, 0, kMaxBodyBytes + 1}, raw);
  EXPECT_THROW(decode_header(raw), WireError);

  encode_header({MsgType::kHello, 1, 10, 5}, raw);  // fields larger than the body
  EXPECT_THROW(decode_header(raw), WireError);
}

TEST(Wire, MessagesRoundTrip) {
  Hello hello;
  hello.env_rank = 3;
  hello.env_world_size = 8;
  hello.pid = 4242;
  hello.hostname = "node-a";
  hello.role = ClientRole::kObserver;
  hello.token = "s3cret";
  hello.chunk_bytes = 65536;
  Hello h2 = round_trip(hello);
  EXPECT_EQ(h2.protocol_version, kProtocolVersion);
  EXPECT_EQ(h2.env_rank, 3);
  EXPECT_EQ(h2.env_world_size, 8);
  EXPECT_EQ(h2.pid, 4242u);
  EXPECT_EQ(h2.hostname, "node-a");
  EXPECT_EQ(h2.role, ClientRole::kObserver);
  EXPECT_EQ(h2.token, "s3cret");
  EXPECT_EQ(h2.chunk_bytes, 65536u);

  Welcome w{kProtocolVersion, 16, 7, "dev-cluster"};
  Welcome w2 = round_trip(w);
  EXPECT_EQ(w2.world_size, 16u);
  EXPECT_EQ(w2.client_id, 7u);
  EXPECT_EQ(w2.cluster_name, "dev-cluster");

  ErrorReply e = round_trip(ErrorReply{5, "bad things"});
  EXPECT_EQ(e.code, 5);
  EXPECT_EQ(e.message, "bad things");

  CommInit init;
  for (size_t i = 0; i < kCommKeyBytes; ++i) init.key.bytes[i] = static_cast<uint8_t>(i * 7);
  init.nranks = 8;
  init.rank = 5;
  init.cuda_device = 2;
  init.comm_name = "tp";
  CommInit i2 = round_trip(init);
  EXPECT_TRUE(i2.key == init.key);
  EXPECT_EQ(i2.nranks, 8);
  EXPECT_EQ(i2.rank, 5);
  EXPECT_EQ(i2.cuda_device, 2);
  EXPECT_EQ(i2.comm_name, "tp");

  CommInitDone d = round_trip(CommInitDone{99, 4});
  EXPECT_EQ(d.comm_id, 99u);
  EXPECT_EQ(d.global_rank, 4);

  CommSplit s = round_trip(CommSplit{3, 1, 2, -1, 17});
  EXPECT_EQ(s.parent_comm, 3u);
  EXPECT_EQ(s.rank, 1);
  EXPECT_EQ(s.split_index, 2u);
  EXPECT_EQ(s.color, -1);
  EXPECT_EQ(s.key, 17);

  CommSplitDone sd = round_trip(CommSplitDone{5, 4, 2, 9});
  EXPECT_EQ(sd.comm_id, 5u);
  EXPECT_EQ(sd.nranks, 4);
  EXPECT_EQ(sd.rank, 2);
  EXPECT_EQ(sd.global_rank, 9);

  CommShrink sh;
  sh.parent_comm = 4;
  sh.rank = 2;
  sh.shrink_index = 1;
  sh.flags = 1;
  sh.excluded = {3, 7};
  CommShrink sh2 = round_trip(sh);
  EXPECT_EQ(sh2.parent_comm, 4u);
  EXPECT_EQ(sh2.rank, 2);
  EXPECT_EQ(sh2.shrink_index, 1u);
  EXPECT_EQ(sh2.flags, 1);
  EXPECT_EQ(sh2.excluded, (std::vector<int32_t>{3, 7}));
  CommRevoke rv = round_trip(CommRevoke{6, 1});
  EXPECT_EQ(rv.comm_id, 6u);
  EXPECT_EQ(rv.rank, 1);

  CommDestroy cd = round_trip(CommDestroy{8, 3});
  EXPECT_EQ(cd.comm_id, 8u);
  EXPECT_EQ(cd.rank, 3);

  Collective c;
  c.comm_id = 12;
  c.rank = 6;
  c.seq = 1ull << 40;
  c.dtype = 7;
  c.op = 4;
  c.root = -1;
  c.count = (1ull << 33) + 5;
  c.ready_us = 1234.5;
  c.track = 0xfeedull << 32;
  Collective c2 = round_trip(c);
  EXPECT_EQ(c2.ready_us, 1234.5);
  EXPECT_EQ(c2.track, 0xfeedull << 32);
  EXPECT_EQ(c2.comm_id, 12u);
  EXPECT_EQ(c2.rank, 6);
  EXPECT_EQ(c2.seq, 1ull << 40);
  EXPECT_EQ(c2.dtype, 7);
  EXPECT_EQ(c2.op, 4);
  EXPECT_EQ(c2.root, -1);
  EXPECT_EQ(c2.count, (1ull << 33) + 5);

  CollectiveDone done = round_trip(CollectiveDone{77, 12.5, 300.25});
  EXPECT_EQ(done.seq, 77u);
  EXPECT_EQ(done.modeled_us, 12.5);
  EXPECT_EQ(done.start_us, 300.25);
  RankActivity activity;
  activity.dropped = 3;
  activity.slices = {{9, 1.5, 2.5, 4, ActivityKind::kKernel}, {9, 7, 7, 1, ActivityKind::kStepEnd}};
  RankActivity a2 = round_trip(activity);
  EXPECT_EQ(a2.dropped, 3u);
  ASSERT_EQ(a2.slices.size(), 2u);
  EXPECT_EQ(a2.slices[0].track, 9u);
  EXPECT_EQ(a2.slices[0].end_us, 2.5);
  EXPECT_EQ(a2.slices[0].count, 4u);
  EXPECT_EQ(a2.slices[1].kind, ActivityKind::kStepEnd);
  // A slice that ends before it starts, or an unknown kind, is a corrupt frame.
  RankActivity backwards;
  backwards.slices = {{9, 5, 4, 1, ActivityKind::kKernel}};
  auto bytes = encode_fields(backwards);
  EXPECT_THROW(decode_fields<RankActivity>(bytes.data(), bytes.size()), WireError);
  bytes = encode_fields(activity);
  bytes.back() = kNumActivityKinds;
  EXPECT_THROW(decode_fields<RankActivity>(bytes.data(), bytes.size()), WireError);
  PayloadChunk chunk = round_trip(PayloadChunk{8192, 20000});
  EXPECT_EQ(chunk.offset, 8192u);
  EXPECT_EQ(chunk.total, 20000u);
}

TEST(Wire, ModelMessagesRoundTrip) {
  CommInfo ci = round_trip(CommInfo{9, 3, kInfoLines | kTopologyXml});
  EXPECT_EQ(ci.comm_id, 9u);
  EXPECT_EQ(ci.rank, 3);
  EXPECT_EQ(ci.flags, uint32_t{kInfoLines | kTopologyXml});

  CommInfoReply reply;
  reply.nnodes = 2;
  reply.local_ranks = 8;
  reply.local_rank = 5;
  reply.bus_id = "0001:06:00.0";
  reply.lines = {{0x1, "Channel 00/24 : 0 1"}, {0x20, "Ring 00 : 7 -> 0 -> 1"}};
  reply.graph_xml = "<graphs/>";
  reply.topology_xml = "<system/>";
  CommInfoReply r2 = round_trip(reply);
  EXPECT_EQ(r2.nnodes, 2);
  EXPECT_EQ(r2.local_ranks, 8);
  EXPECT_EQ(r2.local_rank, 5);
  EXPECT_EQ(r2.bus_id, "0001:06:00.0");
  ASSERT_EQ(r2.lines.size(), 2u);
  EXPECT_EQ(r2.lines[1].subsys, 0x20u);
  EXPECT_EQ(r2.lines[1].text, "Ring 00 : 7 -> 0 -> 1");
  EXPECT_EQ(r2.graph_xml, "<graphs/>");
  EXPECT_EQ(r2.topology_xml, "<system/>");

  Simulate sim;
  sim.ops = {{4, 1, CollType::kAllGather, -1, 1u << 20}, {4, 1, CollType::kSend, 2, 64}};
  Simulate s2 = round_trip(sim);
  ASSERT_EQ(s2.ops.size(), 2u);
  EXPECT_EQ(s2.ops[0].coll, CollType::kAllGather);
  EXPECT_EQ(s2.ops[0].bytes, 1u << 20);
  EXPECT_EQ(s2.ops[1].root, 2);
  EXPECT_DOUBLE_EQ(round_trip(SimulateDone{12.75}).time_us, 12.75);

  // A collective type past the enum is a wire error, not a cast.
  auto bytes = encode_fields(sim);
  bytes[4 + 8 + 4] = 200;
  EXPECT_THROW(decode_fields<Simulate>(bytes.data(), bytes.size()), WireError);
}

TEST(Wire, TruncatedAndTrailingFieldsAreErrors) {
  auto bytes = encode_fields(CommInit{});
  EXPECT_THROW(decode_fields<CommInit>(bytes.data(), bytes.size() - 1), WireError);
  bytes.push_back(0);
  EXPECT_THROW(decode_fields<CommInit>(bytes.data(), bytes.size()), WireError);
  // A list whose count runs past the end.
  Writer lw;
  lw.u64(1);
  lw.i32(0);
  lw.u64(0);
  lw.i32(0);
  lw.u32(1u << 30);
  EXPECT_THROW(decode_fields<CommShrink>(lw.bytes().data(), lw.bytes().size()), WireError);
  // A string whose length runs past the end.
  Writer w;
  w.u32(1000);
  EXPECT_THROW(decode_fields<ErrorReply>(w.bytes().data(), w.bytes().size()), WireError);
}

TEST(Wire, HelloWithUnknownRoleIsRejected) {
  Hello hello;
  auto bytes = encode_fields(hello);
  // The role byte follows the hostname, which is empty here: version, rank, world, pid, length.
  bytes[4 + 4 + 4 + 4 + 4] = 7;
  EXPECT_THROW(decode_fields<Hello>(bytes.data(), bytes.size()), WireError);
}

TEST(Wire, ForeignHelloStopsAtVersion) {
  Writer w;
  w.u32(kProtocolVersion + 1);
  w.str("whatever a future version sends");
  Hello h = decode_fields<Hello>(w.bytes().data(), w.bytes().size());
  EXPECT_EQ(h.protocol_version, kProtocolVersion + 1);
}

TEST(UniqueId, PackUnpack) {
  UniqueIdContents c;
  c.endpoint.transport = Transport::kTcp;
  c.endpoint.address = "127.0.0.1:29591";
  c.key = random_comm_key();
  char raw[kUniqueIdBytes];
  pack_unique_id(c, raw);
  UniqueIdContents back = unpack_unique_id(raw);
  EXPECT_EQ(back.endpoint.transport, Transport::kTcp);
  EXPECT_EQ(back.endpoint.address, "127.0.0.1:29591");
  EXPECT_TRUE(back.key == c.key);
}

// The 128-bit key is all that admits a rank to a communicator: it must come from a real random
// source, every bit of it. With 512 keys each bit is set in 256 +- 11 of them; a counter, a
// clock or a constant leaves bits far outside 160..352 (over 8 standard deviations).
TEST(UniqueId, KeysAreUnguessable) {
  constexpr int kKeys = 512;
  std::set<std::string> seen;
  int ones[kCommKeyBytes * 8] = {};
  for (int i = 0; i < kKeys; ++i) {
    CommKey key = random_comm_key();
    seen.insert(std::string(reinterpret_cast<const char*>(key.bytes), kCommKeyBytes));
    for (size_t bit = 0; bit < kCommKeyBytes * 8; ++bit) ones[bit] += (key.bytes[bit / 8] >> (bit % 8)) & 1;
  }
  EXPECT_EQ(seen.size(), size_t{kKeys});
  for (size_t bit = 0; bit < kCommKeyBytes * 8; ++bit) {
    EXPECT_GT(ones[bit], 160) << "bit " << bit;
    EXPECT_LT(ones[bit], 352) << "bit " << bit;
  }
}

TEST(UniqueId, KeysAreRandomAndForeignIdsRejected) {
  EXPECT_FALSE(random_comm_key() == random_comm_key());
  char raw[kUniqueIdBytes] = {};
  EXPECT_THROW(unpack_unique_id(raw), EndpointError);
  UniqueIdContents zeroed;
  zeroed.endpoint.address = "/tmp/x.sock";
  pack_unique_id(zeroed, raw);
  std::memset(raw + 24, 0, 4);  // what a truncating copy leaves behind
  EXPECT_THROW(unpack_unique_id(raw), EndpointError);
  UniqueIdContents c;
  c.endpoint.address = std::string(kUniqueIdMaxAddress + 1, 'a');
  EXPECT_THROW(pack_unique_id(c, raw), EndpointError);
}

TEST(Endpoint, Validation) {
  EXPECT_NO_THROW(parse_endpoint("unix", "/tmp/x.sock"));
  EXPECT_THROW(parse_endpoint("unix", "relative.sock"), EndpointError);
  EXPECT_THROW(parse_endpoint("unix", "/" + std::string(200, 'x')), EndpointError);
  EXPECT_THROW(parse_endpoint("udp", "/tmp/x"), EndpointError);
  EXPECT_THROW(parse_endpoint("tcp", "127.0.0.1"), EndpointError);
  EXPECT_THROW(parse_endpoint("tcp", "127.0.0.1:99999"), EndpointError);
  EXPECT_THROW(parse_endpoint("tcp", ""), EndpointError);
  TcpAddress a = parse_tcp_address(":29591");
  EXPECT_EQ(a.host, "");
  EXPECT_EQ(a.port, 29591);
  TcpAddress b = parse_tcp_address("[::1]:80");
  EXPECT_EQ(b.host, "::1");
}
