// The one definition of every message exchanged between a rank (libnccl stub) and the
// coordinator. Both sides compile this file; nothing else encodes or decodes frames.
//
// A frame is a fixed 32-byte header followed by a body. The header layout never changes, so a
// peer speaking another protocol version can always be read far enough to be told so. The body
// is the message's fixed fields, then any bulk data (collective payloads). The header gives the
// length of the fields, so a receiver can read the bulk straight into its destination buffer.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "wire_codec.h"

namespace fakegpu::wire {

// Bump whenever any message below changes shape.
constexpr uint32_t kProtocolVersion = 14;
constexpr uint32_t kFrameMagic = 0x55504746;  // "FGPU" in little-endian byte order
constexpr size_t kHeaderBytes = 32;
// Largest body accepted from a peer; anything bigger is treated as a corrupt frame.
constexpr uint64_t kMaxBodyBytes = uint64_t{16} << 30;
constexpr uint32_t kMaxFieldsBytes = 1 << 20;

enum class MsgType : uint16_t {
  kHello = 1,
  kWelcome = 2,
  kError = 3,
  kCommInit = 4,
  kCommInitDone = 5,
  kCommSplit = 6,
  kCommSplitDone = 7,
  kCommDestroy = 8,
  kAck = 9,
  kCollective = 10,
  kCollectiveDone = 11,
  kShareSegment = 12,
  kCommShrink = 13,
  kCommRevoke = 14,
  kCommInfo = 15,
  kCommInfoReply = 16,
  kSimulate = 17,
  kSimulateDone = 18,
  kStatusQuery = 19,
  kStatusReply = 20,
  kOpenControlRing = 21,
  kPayloadChunk = 22,
  kRankActivity = 23,
  kPeerMailbox = 24,
  kRankOperators = 25,
  kRankMemory = 26,
  kGroupRanks = 27,
};
constexpr MsgType kLastMsgType = MsgType::kGroupRanks;
const char* msg_type_name(MsgType type);

struct FrameHeader {
  MsgType type{};
  uint64_t request_id = 0;  // echoed in the reply so a client can match it to its request
  uint32_t fields_bytes = 0;
  uint64_t body_bytes = 0;  // fields plus bulk
  uint64_t bulk_bytes() const { return body_bytes - fields_bytes; }
};
void encode_header(const FrameHeader& header, uint8_t out[kHeaderBytes]);
// Throws WireError on a bad magic, an unknown type or inconsistent sizes.
FrameHeader decode_header(const uint8_t in[kHeaderBytes]);

// ---- Messages ----------------------------------------------------------------------------
// Each has kType and fields(), its fixed fields in wire order (see wire_codec.h). Bulk data,
// where a message has any, is the rest of the body after the fixed fields.

// Who is on the other end of a connection.
enum class ClientRole : uint8_t {
  kRank = 0,      // a process of the job (the libnccl stub)
  kObserver = 1,  // `fakegpu-coordinator status`: may only ask for the job's state
};
constexpr uint32_t enum_count(ClientRole) { return static_cast<uint32_t>(ClientRole::kObserver) + 1; }

// First frame on every connection, client to coordinator.
struct Hello {
  static constexpr MsgType kType = MsgType::kHello;
  uint32_t protocol_version = kProtocolVersion;
  int32_t env_rank = -1;        // RANK / OMPI_COMM_WORLD_RANK / ... when the launcher set one
  int32_t env_world_size = -1;  // WORLD_SIZE / OMPI_COMM_WORLD_SIZE / ... when set
  uint32_t pid = 0;
  std::string hostname;
  ClientRole role = ClientRole::kRank;
  std::string token;  // FAKEGPU_COORDINATOR_TOKEN; required when the coordinator has one
  // Largest piece of bulk data the client takes in one frame (FAKEGPU_STAGING_CHUNK_BYTES); 0
  // when it reads only whole frames (an observer). See PayloadChunk.
  uint64_t chunk_bytes = 0;
  // In hybrid mode, the name of the GPU the rank computes on, as its CUDA runtime reports it;
  // empty where its devices are fakegpu's.
  std::string compute_gpu;
  template <typename Self, typename Visit>
  static void fields(Self& m, Visit& v) {
    v("protocol_version", m.protocol_version);
    // A peer of another version may lay out the rest differently: it is read no further, and
    // the coordinator answers it with a version error.
    if (Visit::kReading && m.protocol_version != kProtocolVersion) return;
    v("env_rank", m.env_rank);
    v("env_world_size", m.env_world_size);
    v("pid", m.pid);
    v("hostname", m.hostname);
    v("role", m.role);
    v("token", m.token);
    v("chunk_bytes", m.chunk_bytes);
    v("compute_gpu", m.compute_gpu);
  }
};

// A Hello from another protocol version is only read up to its version field.
template <typename Msg>
bool msg_has_foreign_version(const Msg& msg) {
  if constexpr (Msg::kType == MsgType::kHello) return msg.protocol_version != kProtocolVersion;
  return false;
}

struct Welcome {
  static constexpr MsgType kType = MsgType::kWelcome;
  uint32_t protocol_version = kProtocolVersion;
  uint32_t world_size = 0;
  uint64_t client_id = 0;
  std::string cluster_name;
  template <typename Self, typename Visit>
  static void fields(Self& m, Visit& v) {
    v("protocol_version", m.protocol_version);
    v("world_size", m.world_size);
    v("client_id", m.client_id);
    v("cluster_name", m.cluster_name);
  }
};

// Error codes carried in ErrorReply, numbered exactly as ncclResult_t (libnccl_stub/wire_codes.h
// asserts it and is where a code becomes one).
enum class Status : int32_t {
  kSuccess = 0,
  kUnhandledCudaError = 1,
  kSystemError = 2,
  kInternalError = 3,
  kInvalidArgument = 4,
  kInvalidUsage = 5,
  kRemoteError = 6,
  kInProgress = 7,
};

// Reply to any request that failed. code is a Status, sent as a plain number: a receiver checks
// it before trusting it.
struct ErrorReply {
  static constexpr MsgType kType = MsgType::kError;
  int32_t code = 0;
  std::string message;
  template <typename Self, typename Visit>
  static void fields(Self& m, Visit& v) {
    v("code", m.code);
    v("message", m.message);
  }
};

constexpr size_t kCommKeyBytes = 16;
struct CommKey {
  uint8_t bytes[kCommKeyBytes]{};
  template <typename Self, typename Visit>
  static void fields(Self& m, Visit& v) {
    v("bytes", m.bytes);
  }
  bool operator<(const CommKey& o) const { return std::memcmp(bytes, o.bytes, kCommKeyBytes) < 0; }
  bool operator==(const CommKey& o) const { return std::memcmp(bytes, o.bytes, kCommKeyBytes) == 0; }
};

struct CommInit {
  static constexpr MsgType kType = MsgType::kCommInit;
  CommKey key;  // the random part of the ncclUniqueId: ranks presenting the same key meet
  int32_t nranks = 0;
  int32_t rank = 0;
  int32_t cuda_device = 0;
  std::string comm_name;
  template <typename Self, typename Visit>
  static void fields(Self& m, Visit& v) {
    v("key", m.key);
    v("nranks", m.nranks);
    v("rank", m.rank);
    v("cuda_device", m.cuda_device);
    v("comm_name", m.comm_name);
  }
};

// The device memory NCCL would take on a rank for a communicator (planner/nccl_memory.h): at
// init, and the first time its algorithms connect each piece (CollectiveDone::connects). All 0
// when the communicator is not modeled.
struct NcclMemory {
  uint64_t init = 0;
  uint64_t ring = 0;
  uint64_t tree = 0;
  uint64_t nvls = 0;
  template <typename Self, typename Visit>
  static void fields(Self& m, Visit& v) {
    v("init", m.init);
    v("ring", m.ring);
    v("tree", m.tree);
    v("nvls", m.nvls);
  }
};

struct CommInitDone {
  static constexpr MsgType kType = MsgType::kCommInitDone;
  uint64_t comm_id = 0;
  int32_t global_rank = -1;  // this member's rank in the configured world, -1 if unknown
  NcclMemory memory;
  template <typename Self, typename Visit>
  static void fields(Self& m, Visit& v) {
    v("comm_id", m.comm_id);
    v("global_rank", m.global_rank);
    v("memory", m.memory);
  }
};

struct CommSplit {
  static constexpr MsgType kType = MsgType::kCommSplit;
  uint64_t parent_comm = 0;
  int32_t rank = 0;  // rank in the parent
  uint64_t split_index = 0;  // the n-th split of this parent: splits match by it
  int32_t color = 0;  // NCCL_SPLIT_NOCOLOR (-1): this rank takes no part in a child
  int32_t key = 0;
  template <typename Self, typename Visit>
  static void fields(Self& m, Visit& v) {
    v("parent_comm", m.parent_comm);
    v("rank", m.rank);
    v("split_index", m.split_index);
    v("color", m.color);
    v("key", m.key);
  }
};

struct CommSplitDone {
  static constexpr MsgType kType = MsgType::kCommSplitDone;
  uint64_t comm_id = 0;  // 0 when the rank asked for no colour
  int32_t nranks = 0;
  int32_t rank = 0;
  int32_t global_rank = -1;
  NcclMemory memory;
  template <typename Self, typename Visit>
  static void fields(Self& m, Visit& v) {
    v("comm_id", m.comm_id);
    v("nranks", m.nranks);
    v("rank", m.rank);
    v("global_rank", m.global_rank);
    v("memory", m.memory);
  }
};

// ncclCommShrink: called by the ranks that stay; they must agree on who is excluded.
struct CommShrink {
  static constexpr MsgType kType = MsgType::kCommShrink;
  uint64_t parent_comm = 0;
  int32_t rank = 0;             // rank in the parent
  uint64_t shrink_index = 0;    // the n-th shrink of this parent: shrinks match by it
  int32_t flags = 0;            // NCCL_SHRINK_ABORT: fail the parent's pending operations first
  std::vector<int32_t> excluded;
  template <typename Self, typename Visit>
  static void fields(Self& m, Visit& v) {
    v("parent_comm", m.parent_comm);
    v("rank", m.rank);
    v("shrink_index", m.shrink_index);
    v("flags", m.flags);
    v("excluded", m.excluded);
  }
};

// ncclCommRevoke: fail the communicator's in-flight operations and refuse new ones. Ack reply.
struct CommRevoke {
  static constexpr MsgType kType = MsgType::kCommRevoke;
  uint64_t comm_id = 0;
  int32_t rank = 0;
  template <typename Self, typename Visit>
  static void fields(Self& m, Visit& v) {
    v("comm_id", m.comm_id);
    v("rank", m.rank);
  }
};

struct CommDestroy {
  static constexpr MsgType kType = MsgType::kCommDestroy;
  uint64_t comm_id = 0;
  int32_t rank = 0;
  template <typename Self, typename Visit>
  static void fields(Self& m, Visit& v) {
    v("comm_id", m.comm_id);
    v("rank", m.rank);
  }
};

struct Ack {
  static constexpr MsgType kType = MsgType::kAck;
  template <typename Self, typename Visit>
  static void fields(Self&, Visit&) {}
};

enum class CollType : uint8_t {
  kAllReduce = 0,
  kBroadcast = 1,
  kReduce = 2,
  kAllGather = 3,
  kReduceScatter = 4,
  kAlltoAll = 5,
  kGather = 6,
  kScatter = 7,
  kSend = 8,
  kRecv = 9,
};
constexpr uint8_t kNumCollTypes = 10;
constexpr uint32_t enum_count(CollType) { return kNumCollTypes; }
const char* coll_type_name(CollType type);

// Where a rank's buffer is: in one of its shared device-memory segments, which the coordinator
// reads and writes directly, or (segment 0) in the frame itself: the send data as the request's
// bulk data, the result as the reply's.
struct BufferRef {
  uint64_t segment = 0;
  uint64_t offset = 0;
  bool shared() const { return segment != 0; }
  template <typename Self, typename Visit>
  static void fields(Self& m, Visit& v) {
    v("segment", m.segment);
    v("offset", m.offset);
  }
};

// Gives the coordinator a segment of the rank's fake device memory. The segment's file
// descriptor travels with the frame (SCM_RIGHTS), so this works over unix sockets only. No reply:
// a segment that cannot be mapped makes the collectives that use it fail.
struct ShareSegment {
  static constexpr MsgType kType = MsgType::kShareSegment;
  uint64_t segment = 0;
  uint64_t size = 0;
  template <typename Self, typename Visit>
  static void fields(Self& m, Visit& v) {
    v("segment", m.segment);
    v("size", m.size);
  }
};

// One rank's part of a collective.
struct Collective {
  static constexpr MsgType kType = MsgType::kCollective;
  uint64_t comm_id = 0;
  int32_t rank = 0;
  // Collectives match on (comm, seq) with seq counting the comm's collectives. Send and Recv
  // match on (comm, sender, receiver, seq) with seq counting that pair's messages.
  uint64_t seq = 0;
  CollType coll = CollType::kAllReduce;
  uint8_t dtype = 0;  // ncclDataType_t
  uint8_t op = 0;     // ncclRedOp_t; ignored by collectives that do not reduce
  int32_t root = -1;  // the root, or for Send/Recv the peer; -1 when the call has neither
  uint64_t count = 0;
  uint64_t scalar = 0;  // PreMulSum: this rank's scalar, raw little-endian bytes of the type
  BufferRef send;
  BufferRef recv;
  uint8_t flags = 0;  // CollectiveFlags
  // Where the call sits on the rank's modeled clock: the time its stream reaches it (-1 when
  // the rank's runtime keeps no modeled clock, as NVIDIA's does not), and which of the rank's
  // streams it is on (an id the rank's runtime gives; 0 when unknown). The operation starts
  // once every rank's stream has reached it.
  double ready_us = -1;
  uint64_t track = 0;
  template <typename Self, typename Visit>
  static void fields(Self& m, Visit& v) {
    v("comm_id", m.comm_id);
    v("rank", m.rank);
    v("seq", m.seq);
    v("coll", m.coll);
    v("dtype", m.dtype);
    v("op", m.op);
    v("root", m.root);
    v("count", m.count);
    v("scalar", m.scalar);
    v("send", m.send);
    v("recv", m.recv);
    v("flags", m.flags);
    v("ready_us", m.ready_us);
    v.check(std::isfinite(m.ready_us), "ready_us", "is not a finite number");
    v("track", m.track);
  }
};

enum CollectiveFlags : uint8_t {
  // FAKEGPU_PAYLOAD=none: a timing-only run. Buffers are neither sent nor touched; the
  // operation is matched, checked and modeled as usual.
  kNoPayload = 1,
  // The ranks exchange the data among themselves through their communicator's peer mailbox
  // (peer_exchange.h); the coordinator matches, checks and models the operation, and moves nothing.
  kPeerExchange = 2,
  // A Send whose rank also receives on the communicator in the same NCCL group (a ring or
  // pairwise exchange): each p2p channel's block then copies both ways, at half the rate each.
  kSendsAndReceives = 4,
  // A Send whose rank, on the communicator in the same NCCL group, sends to one peer and receives
  // from that peer alone: a pairwise exchange (a round of recursive doubling). In a
  // representative run the stood-in ranks pair up alike (job_stand_ins.cpp).
  kPairExchange = 8,
};

// The result for one rank; the receive buffer contents follow as bulk data.
struct CollectiveDone {
  static constexpr MsgType kType = MsgType::kCollectiveDone;
  uint64_t seq = 0;
  double modeled_us = 0;  // how long the operation takes on the modeled cluster; 0 if unmodeled
  double start_us = -1;   // when it starts on the modeled clock; -1 if unmodeled
  // What an operation of this shape costs on its communicator with no other traffic (-1 if
  // unmodeled), and whether it is latency-bound: then it never waits for other traffic, and
  // one of its shape exchanged among the ranks ends at its start plus this (peer_exchange.h).
  double uncontended_us = -1;
  uint8_t latency_bound = 0;
  // The pieces of the communicator's memory its algorithm connects (planner::NcclPiece bits),
  // charged by each rank the first time; for a send/recv, each side's connection bytes and,
  // across nodes, the shared pool each side makes once.
  uint8_t connects = 0;
  uint64_t p2p_send_bytes = 0;
  uint64_t p2p_recv_bytes = 0;
  uint64_t p2p_pool_bytes = 0;
  template <typename Self, typename Visit>
  static void fields(Self& m, Visit& v) {
    v("seq", m.seq);
    v("modeled_us", m.modeled_us);
    v("start_us", m.start_us);
    v("uncontended_us", m.uncontended_us);
    v("latency_bound", m.latency_bound);
    v("connects", m.connects);
    v("p2p_send_bytes", m.p2p_send_bytes);
    v("p2p_recv_bytes", m.p2p_recv_bytes);
    v("p2p_pool_bytes", m.p2p_pool_bytes);
  }
};

// What a rank wants to know about a communicator's channels, for NCCL_DEBUG and the dump
// files NCCL writes: asked for once per communicator, only when one of them is set.
enum CommInfoFlags : uint32_t {
  kInfoLines = 1,   // NCCL_DEBUG=INFO lines (channels, rings, trees, Init COMPLETE)
  kGraphXml = 2,    // NCCL_GRAPH_DUMP_FILE
  kTopologyXml = 4, // NCCL_TOPO_DUMP_FILE
};

struct CommInfo {
  static constexpr MsgType kType = MsgType::kCommInfo;
  uint64_t comm_id = 0;
  int32_t rank = 0;
  uint32_t flags = 0;  // CommInfoFlags
  template <typename Self, typename Visit>
  static void fields(Self& m, Visit& v) {
    v("comm_id", m.comm_id);
    v("rank", m.rank);
    v("flags", m.flags);
  }
};

// NCCL's debug subsystem bits (NCCL_DEBUG_SUBSYS) of the lines fakegpu prints.
enum NcclSubsys : uint32_t { kSubsysInit = 0x1, kSubsysGraph = 0x20, kSubsysAlloc = 0x100 };

struct InfoLine {
  uint32_t subsys = 0;  // NcclSubsys
  std::string text;
  template <typename Self, typename Visit>
  static void fields(Self& m, Visit& v) {
    v("subsys", m.subsys);
    v("text", m.text);
  }
};

struct CommInfoReply {
  static constexpr MsgType kType = MsgType::kCommInfoReply;
  int32_t nnodes = 1;       // where the rank sits, for NCCL's init line
  int32_t local_ranks = 1;
  int32_t local_rank = 0;
  std::string bus_id;       // of the rank's GPU, "0000:01:00.0"
  std::vector<InfoLine> lines;
  std::string graph_xml;
  std::string topology_xml;
  template <typename Self, typename Visit>
  static void fields(Self& m, Visit& v) {
    v("nnodes", m.nnodes);
    v("local_ranks", m.local_ranks);
    v("local_rank", m.local_rank);
    v("bus_id", m.bus_id);
    v("lines", m.lines);
    v("graph_xml", m.graph_xml);
    v("topology_xml", m.topology_xml);
  }
};

// ncclGroupSimulateEnd: the calls a rank's group would have made, priced without running.
struct SimOp {
  uint64_t comm_id = 0;
  int32_t rank = 0;
  CollType coll = CollType::kAllReduce;
  int32_t root = -1;  // root, or the peer of a Send/Recv
  uint64_t bytes = 0; // as the cost model counts them (nccl-tests' size)
  template <typename Self, typename Visit>
  static void fields(Self& m, Visit& v) {
    v("comm_id", m.comm_id);
    v("rank", m.rank);
    v("coll", m.coll);
    v("root", m.root);
    v("bytes", m.bytes);
  }
};

struct Simulate {
  static constexpr MsgType kType = MsgType::kSimulate;
  std::vector<SimOp> ops;
  template <typename Self, typename Visit>
  static void fields(Self& m, Visit& v) {
    v("ops", m.ops);
  }
};

struct SimulateDone {
  static constexpr MsgType kType = MsgType::kSimulateDone;
  double time_us = 0;
  template <typename Self, typename Visit>
  static void fields(Self& m, Visit& v) {
    v("time_us", m.time_us);
  }
};

// An observer's request for the job's live state: who waits where (the wavefront).
struct StatusQuery {
  static constexpr MsgType kType = MsgType::kStatusQuery;
  template <typename Self, typename Visit>
  static void fields(Self&, Visit&) {}
};

// The state as JSON text, carried as the bulk so a large job is not bound by the fields limit.
struct StatusReply {
  static constexpr MsgType kType = MsgType::kStatusReply;
  template <typename Self, typename Visit>
  static void fields(Self&, Visit&) {}
};

// Moves the rest of the conversation onto a control ring (control_ring.h) whose area's
// descriptor travels with the frame (SCM_RIGHTS, unix sockets only). Answered over the socket
// with Ack, after which both sides use the ring, or with Error, after which both keep to the
// socket.
struct OpenControlRing {
  static constexpr MsgType kType = MsgType::kOpenControlRing;
  uint64_t capacity = 0;  // bytes in each of the two rings
  // The rank can exchange small collectives with its peers through shared memory (its buffers
  // are host memory and FAKEGPU_PEER_EXCHANGE is on): its communicators may get a PeerMailbox.
  uint8_t peer_exchange = 0;
  template <typename Self, typename Visit>
  static void fields(Self& m, Visit& v) {
    v("capacity", m.capacity);
    v("peer_exchange", m.peer_exchange);
  }
};

// Coordinator to rank, unasked, ahead of a communicator's CommInitDone or CommSplitDone: the
// communicator's peer mailbox (peer_exchange.h), whose descriptor went ahead on the socket with
// one byte, as a rank's descriptors do the other way. Only to ranks on a control ring that
// offered peer_exchange, and only when every member of the communicator did.
struct PeerMailbox {
  static constexpr MsgType kType = MsgType::kPeerMailbox;
  uint64_t comm_id = 0;
  int32_t nranks = 0;
  uint64_t bytes = 0;  // of the mapping
  template <typename Self, typename Visit>
  static void fields(Self& m, Visit& v) {
    v("comm_id", m.comm_id);
    v("nranks", m.nranks);
    v("bytes", m.bytes);
  }
};

// Bulk data larger than the receiver's chunk size (Hello::chunk_bytes) is streamed: the sender
// writes all but the last piece as PayloadChunk frames carrying the request id of the message
// they belong to, in order, then the message itself with the last piece as its bulk. Every
// other frame still arrives whole, and frames of other requests may come between the pieces.
// The receiver reads each piece straight into place.
constexpr uint64_t kMinChunkBytes = 4096;
constexpr uint64_t kDefaultChunkBytes = uint64_t{1} << 20;
struct PayloadChunk {
  static constexpr MsgType kType = MsgType::kPayloadChunk;
  uint64_t offset = 0;  // of this piece in the message's bulk data
  uint64_t total = 0;   // bytes of bulk data in the whole message, the last piece included
  template <typename Self, typename Visit>
  static void fields(Self& m, Visit& v) {
    v("offset", m.offset);
    v("total", m.total);
  }
};

// What a rank's GPU did on the modeled clock: kernels, copies and collectives on each of its
// streams, and the step marks its program made (an optimizer step, an NVTX range), for the
// report's step figures and the trace. Back-to-back work of one kind on one stream arrives as
// one slice. No reply.
enum class ActivityKind : uint8_t { kKernel = 0, kCopy = 1, kCollective = 2, kStepBegin = 3, kStepEnd = 4 };
constexpr uint8_t kNumActivityKinds = 5;
constexpr uint32_t enum_count(ActivityKind) { return kNumActivityKinds; }
const char* activity_kind_name(ActivityKind kind);

// Also the record the rank's runtime hands its NCCL library, so it must stay plain data.
struct ActivitySlice {
  uint64_t track = 0;  // the stream, as in Collective::track
  double start_us = 0;
  double end_us = 0;   // a step mark has end_us == start_us
  uint32_t count = 0;  // pieces of work merged into this slice
  ActivityKind kind = ActivityKind::kKernel;
  template <typename Self, typename Visit>
  static void fields(Self& m, Visit& v) {
    v("track", m.track);
    v("start_us", m.start_us);
    v("end_us", m.end_us);
    v.check(m.end_us >= m.start_us, "end_us", "is before start_us");
    v("count", m.count);
    v("kind", m.kind);
  }
};

struct RankActivity {
  static constexpr MsgType kType = MsgType::kRankActivity;
  static constexpr size_t kMaxSlices = 16384;  // per frame, well inside kMaxFieldsBytes
  std::vector<ActivitySlice> slices;
  uint64_t dropped = 0;  // slices the rank could not keep since its last frame
  template <typename Self, typename Visit>
  static void fields(Self& m, Visit& v) {
    v("dropped", m.dropped);
    v("slices", m.slices, kMaxSlices);
  }
};

// One operator's totals over a rank's run (fakegpu_op_total in op_facts.h), for the report's
// table of operators.
struct OperatorTotal {
  std::string name;
  uint64_t calls = 0;
  uint64_t kernels = 0;
  double gpu_us = 0;
  double host_us = 0;
  double memory_us = 0;   // of gpu_us, in calls bound by memory
  double compute_us = 0;  // ... by compute
  double launch_us = 0;   // ... by kernels' fixed costs
  double host_bound_us = 0;  // ... in calls whose host launch took longer than their kernels
  uint8_t kind = 0;       // fakegpu_op_kind
  double measured_us = 0;  // of gpu_us, in calls priced at kernel times measured on a GPU
  template <typename Self, typename Visit>
  static void fields(Self& m, Visit& v) {
    v("name", m.name);
    v("calls", m.calls);
    v("kernels", m.kernels);
    v("gpu_us", m.gpu_us);
    v("host_us", m.host_us);
    v("memory_us", m.memory_us);
    v("compute_us", m.compute_us);
    v("launch_us", m.launch_us);
    v("host_bound_us", m.host_bound_us);
    v("kind", m.kind);
    v("measured_us", m.measured_us);
  }
};

// A rank's operator totals so far (each frame replaces the last): sent with its activity log.
struct RankOperators {
  static constexpr MsgType kType = MsgType::kRankOperators;
  static constexpr size_t kMaxRows = 1024;  // the largest by GPU time
  std::vector<OperatorTotal> rows;
  template <typename Self, typename Visit>
  static void fields(Self& m, Visit& v) {
    v("rows", m.rows, kMaxRows);
  }
};

// A device's memory by part (fake_cuda_bridge.h's fakegpu_memory_part).
struct MemoryParts {
  uint64_t context = 0;
  uint64_t program = 0;  // cudaMalloc and friends: PyTorch's reserved pool in a PyTorch job
  uint64_t nccl = 0;
  uint64_t libraries = 0;
  uint64_t total() const { return context + program + nccl + libraries; }
  template <typename Self, typename Visit>
  static void fields(Self& m, Visit& v) {
    v("context", m.context);
    v("program", m.program);
    v("nccl", m.nccl);
    v("libraries", m.libraries);
  }
};

// A point of a device's memory in use over the modeled time, for the trace's counter.
struct MemorySample {
  double us = 0;
  uint64_t bytes = 0;
  template <typename Self, typename Visit>
  static void fields(Self& m, Visit& v) {
    v("us", m.us);
    v("bytes", m.bytes);
  }
};

// A live block of PyTorch's allocator when it ran out of memory.
struct LiveBlock {
  uint64_t bytes = 0;
  template <typename Self, typename Visit>
  static void fields(Self& m, Visit& v) {
    v("bytes", m.bytes);
  }
};

// One device's memory over a rank's run so far (fakegpu_memory_figures; each frame replaces
// the last for its device): sent with its activity log, and at once when it runs out.
struct RankMemory {
  static constexpr MsgType kType = MsgType::kRankMemory;
  static constexpr size_t kMaxSamples = 2048;
  static constexpr size_t kMaxBlocks = 8;
  int32_t device = 0;
  uint64_t capacity = 0;
  MemoryParts in_use;
  uint64_t peak = 0;
  MemoryParts peak_parts;
  double peak_us = 0;
  int32_t peak_step = 0;  // the training step under way, from 1
  uint64_t failures = 0;  // allocations refused for want of memory; the last one's figures follow
  uint64_t failed_bytes = 0;
  MemoryParts failed_parts;
  double failed_us = 0;
  int32_t failed_step = 0;
  uint8_t failed_part = 0;  // fakegpu_memory_part
  uint64_t torch_peak_allocated = 0;
  uint64_t torch_peak_reserved = 0;
  uint64_t torch_oom_bytes = 0;  // PyTorch raised OutOfMemoryError for this request
  std::vector<LiveBlock> torch_oom_largest;
  std::vector<MemorySample> samples;
  template <typename Self, typename Visit>
  static void fields(Self& m, Visit& v) {
    v("device", m.device);
    v("capacity", m.capacity);
    v("in_use", m.in_use);
    v("peak", m.peak);
    v("peak_parts", m.peak_parts);
    v("peak_us", m.peak_us);
    v("peak_step", m.peak_step);
    v("failures", m.failures);
    v("failed_bytes", m.failed_bytes);
    v("failed_parts", m.failed_parts);
    v("failed_us", m.failed_us);
    v("failed_step", m.failed_step);
    v("failed_part", m.failed_part);
    v("torch_peak_allocated", m.torch_peak_allocated);
    v("torch_peak_reserved", m.torch_peak_reserved);
    v("torch_oom_bytes", m.torch_oom_bytes);
    v("torch_oom_largest", m.torch_oom_largest, kMaxBlocks);
    v("samples", m.samples, kMaxSamples);
  }
};

// A process group the program made (PyTorch's new_group, every rank calls it for every group,
// member or not): its name, which its NCCL communicators carry after the last ':' of their
// comm_name, and its global ranks in group-rank order (empty: the whole world). Sent only under
// FAKEGPU_REPRESENTATIVE, where the coordinator stands in for the ranks no process runs and needs
// to know who their communicators hold.
struct GroupRanks {
  static constexpr MsgType kType = MsgType::kGroupRanks;
  std::string name;
  std::vector<int32_t> ranks;
  template <typename Self, typename Visit>
  static void fields(Self& m, Visit& v) {
    v("name", m.name);
    v("ranks", m.ranks);
  }
};

// Encodes a message's fixed fields.
template <typename Msg>
std::vector<uint8_t> encode_fields(const Msg& msg) {
  Writer w;
  Msg::fields(msg, w);
  return std::move(w.bytes());
}

// Decodes a message's fixed fields; they must be consumed exactly.
template <typename Msg>
Msg decode_fields(const uint8_t* fields, size_t size) {
  Reader r(fields, size, msg_type_name(Msg::kType));
  Msg msg;
  Msg::fields(msg, r);
  if (r.remaining() != 0 && !msg_has_foreign_version(msg))
    throw WireError(std::string(msg_type_name(Msg::kType)) + " frame has " + std::to_string(r.remaining()) +
                    " unexpected trailing bytes");
  return msg;
}

}  // namespace fakegpu::wire
