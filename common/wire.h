// The one definition of every message exchanged between a rank (libnccl stub) and the
// coordinator. Both sides compile this file; nothing else encodes or decodes frames.
//
// A frame is a fixed 32-byte header followed by a body. The header layout never changes, so a
// peer speaking another protocol version can always be read far enough to be told so. The body
// is the message's fixed fields, then any bulk data (collective payloads). The header gives the
// length of the fields, so a receiver can read the bulk straight into its destination buffer.
#pragma once

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace fakegpu::wire {

// Bump whenever any message below changes shape.
constexpr uint32_t kProtocolVersion = 8;
constexpr uint32_t kFrameMagic = 0x55504746;  // "FGPU" in little-endian byte order
constexpr size_t kHeaderBytes = 32;
// Largest body accepted from a peer; anything bigger is treated as a corrupt frame.
constexpr uint64_t kMaxBodyBytes = uint64_t{16} << 30;
constexpr uint32_t kMaxFieldsBytes = 1 << 20;

class WireError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

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
};
constexpr MsgType kLastMsgType = MsgType::kRankActivity;
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

// Little-endian field encoder.
class Writer {
 public:
  Writer() { bytes_.reserve(128); }  // every fixed-field message but Hello's strings fits
  void u8(uint8_t v) { bytes_.push_back(v); }
  void u32(uint32_t v) { put(v); }
  void i32(int32_t v) { put(static_cast<uint32_t>(v)); }
  void u64(uint64_t v) { put(v); }
  void f64(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    put(bits);
  }
  void str(const std::string& s);
  void raw(const void* data, size_t n);
  void i32_list(const std::vector<int32_t>& v);
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  template <typename T>
  void put(T v) {
    uint8_t le[sizeof(T)];
    for (size_t i = 0; i < sizeof(T); ++i) le[i] = static_cast<uint8_t>(v >> (8 * i));
    bytes_.insert(bytes_.end(), le, le + sizeof(T));
  }
  std::vector<uint8_t> bytes_;
};

// Bounds-checked decoder; every read past the end throws WireError.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t u8() { return get<uint8_t>(); }
  uint32_t u32() { return get<uint32_t>(); }
  int32_t i32() { return static_cast<int32_t>(get<uint32_t>()); }
  uint64_t u64() { return get<uint64_t>(); }
  double f64() {
    uint64_t bits = u64();
    double v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  }
  std::string str();
  void raw(void* out, size_t n);
  std::vector<int32_t> i32_list();
  size_t offset() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

 private:
  template <typename T>
  T get() {
    need(sizeof(T));
    T v = 0;
    for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<T>(T(data_[pos_ + i]) << (8 * i));
    pos_ += sizeof(T);
    return v;
  }
  void need(size_t n) const;
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// ---- Messages ----------------------------------------------------------------------------
// Each has kType, encode() for its fixed fields and decode(). Bulk data, where a message has
// any, is the rest of the body after the fixed fields.

// Who is on the other end of a connection.
enum class ClientRole : uint8_t {
  kRank = 0,      // a process of the job (the libnccl stub)
  kObserver = 1,  // `fakegpu-coordinator status`: may only ask for the job's state
};

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
  void encode(Writer& w) const;
  static Hello decode(Reader& r);
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
  void encode(Writer& w) const;
  static Welcome decode(Reader& r);
};

// Error codes carried in ErrorReply, numbered exactly as ncclResult_t.
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

// Reply to any request that failed. code is a Status.
struct ErrorReply {
  static constexpr MsgType kType = MsgType::kError;
  int32_t code = 0;
  std::string message;
  void encode(Writer& w) const;
  static ErrorReply decode(Reader& r);
};

constexpr size_t kCommKeyBytes = 16;
struct CommKey {
  uint8_t bytes[kCommKeyBytes]{};
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
  void encode(Writer& w) const;
  static CommInit decode(Reader& r);
};

struct CommInitDone {
  static constexpr MsgType kType = MsgType::kCommInitDone;
  uint64_t comm_id = 0;
  int32_t global_rank = -1;  // this member's rank in the configured world, -1 if unknown
  void encode(Writer& w) const;
  static CommInitDone decode(Reader& r);
};

struct CommSplit {
  static constexpr MsgType kType = MsgType::kCommSplit;
  uint64_t parent_comm = 0;
  int32_t rank = 0;  // rank in the parent
  uint64_t split_index = 0;  // the n-th split of this parent: splits match by it
  int32_t color = 0;  // NCCL_SPLIT_NOCOLOR (-1): this rank takes no part in a child
  int32_t key = 0;
  void encode(Writer& w) const;
  static CommSplit decode(Reader& r);
};

struct CommSplitDone {
  static constexpr MsgType kType = MsgType::kCommSplitDone;
  uint64_t comm_id = 0;  // 0 when the rank asked for no colour
  int32_t nranks = 0;
  int32_t rank = 0;
  int32_t global_rank = -1;
  void encode(Writer& w) const;
  static CommSplitDone decode(Reader& r);
};

// ncclCommShrink: called by the ranks that stay; they must agree on who is excluded.
struct CommShrink {
  static constexpr MsgType kType = MsgType::kCommShrink;
  uint64_t parent_comm = 0;
  int32_t rank = 0;             // rank in the parent
  uint64_t shrink_index = 0;    // the n-th shrink of this parent: shrinks match by it
  int32_t flags = 0;            // NCCL_SHRINK_ABORT: fail the parent's pending operations first
  std::vector<int32_t> excluded;
  void encode(Writer& w) const;
  static CommShrink decode(Reader& r);
};

// ncclCommRevoke: fail the communicator's in-flight operations and refuse new ones. Ack reply.
struct CommRevoke {
  static constexpr MsgType kType = MsgType::kCommRevoke;
  uint64_t comm_id = 0;
  int32_t rank = 0;
  void encode(Writer& w) const;
  static CommRevoke decode(Reader& r);
};

struct CommDestroy {
  static constexpr MsgType kType = MsgType::kCommDestroy;
  uint64_t comm_id = 0;
  int32_t rank = 0;
  void encode(Writer& w) const;
  static CommDestroy decode(Reader& r);
};

struct Ack {
  static constexpr MsgType kType = MsgType::kAck;
  void encode(Writer&) const {}
  static Ack decode(Reader&) { return {}; }
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
const char* coll_type_name(CollType type);

// Where a rank's buffer is: in one of its shared device-memory segments, which the coordinator
// reads and writes directly, or (segment 0) in the frame itself: the send data as the request's
// bulk data, the result as the reply's.
struct BufferRef {
  uint64_t segment = 0;
  uint64_t offset = 0;
  bool shared() const { return segment != 0; }
};

// Gives the coordinator a segment of the rank's fake device memory. The segment's file
// descriptor travels with the frame (SCM_RIGHTS), so this works over unix sockets only. No reply:
// a segment that cannot be mapped makes the collectives that use it fail.
struct ShareSegment {
  static constexpr MsgType kType = MsgType::kShareSegment;
  uint64_t segment = 0;
  uint64_t size = 0;
  void encode(Writer& w) const;
  static ShareSegment decode(Reader& r);
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
  void encode(Writer& w) const;
  static Collective decode(Reader& r);
};

enum CollectiveFlags : uint8_t {
  // FAKEGPU_PAYLOAD=none: a timing-only run. Buffers are neither sent nor touched; the
  // operation is matched, checked and modeled as usual.
  kNoPayload = 1,
};

// The result for one rank; the receive buffer contents follow as bulk data.
struct CollectiveDone {
  static constexpr MsgType kType = MsgType::kCollectiveDone;
  uint64_t seq = 0;
  double modeled_us = 0;  // how long the operation takes on the modeled cluster; 0 if unmodeled
  double start_us = -1;   // when it starts on the modeled clock; -1 if unmodeled
  void encode(Writer& w) const;
  static CollectiveDone decode(Reader& r);
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
  void encode(Writer& w) const;
  static CommInfo decode(Reader& r);
};

// NCCL's debug subsystem bits (NCCL_DEBUG_SUBSYS) of the lines fakegpu prints.
enum NcclSubsys : uint32_t { kSubsysInit = 0x1, kSubsysGraph = 0x20, kSubsysAlloc = 0x100 };

struct InfoLine {
  uint32_t subsys = 0;  // NcclSubsys
  std::string text;
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
  void encode(Writer& w) const;
  static CommInfoReply decode(Reader& r);
};

// ncclGroupSimulateEnd: the calls a rank's group would have made, priced without running.
struct SimOp {
  uint64_t comm_id = 0;
  int32_t rank = 0;
  CollType coll = CollType::kAllReduce;
  int32_t root = -1;  // root, or the peer of a Send/Recv
  uint64_t bytes = 0; // as the cost model counts them (nccl-tests' size)
};

struct Simulate {
  static constexpr MsgType kType = MsgType::kSimulate;
  std::vector<SimOp> ops;
  void encode(Writer& w) const;
  static Simulate decode(Reader& r);
};

struct SimulateDone {
  static constexpr MsgType kType = MsgType::kSimulateDone;
  double time_us = 0;
  void encode(Writer& w) const;
  static SimulateDone decode(Reader& r);
};

// An observer's request for the job's live state: who waits where (the wavefront).
struct StatusQuery {
  static constexpr MsgType kType = MsgType::kStatusQuery;
  void encode(Writer&) const {}
  static StatusQuery decode(Reader&) { return {}; }
};

// The state as JSON text, carried as the bulk so a large job is not bound by the fields limit.
struct StatusReply {
  static constexpr MsgType kType = MsgType::kStatusReply;
  void encode(Writer&) const {}
  static StatusReply decode(Reader&) { return {}; }
};

// Moves the rest of the conversation onto a control ring (control_ring.h) whose area's
// descriptor travels with the frame (SCM_RIGHTS, unix sockets only). Answered over the socket
// with Ack, after which both sides use the ring, or with Error, after which both keep to the
// socket.
struct OpenControlRing {
  static constexpr MsgType kType = MsgType::kOpenControlRing;
  uint64_t capacity = 0;  // bytes in each of the two rings
  void encode(Writer& w) const;
  static OpenControlRing decode(Reader& r);
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
  void encode(Writer& w) const;
  static PayloadChunk decode(Reader& r);
};

// What a rank's GPU did on the modeled clock: kernels, copies and collectives on each of its
// streams, and the step marks its program made (an optimizer step, an NVTX range), for the
// report's step figures and the trace. Back-to-back work of one kind on one stream arrives as
// one slice. No reply.
enum class ActivityKind : uint8_t { kKernel = 0, kCopy = 1, kCollective = 2, kStepBegin = 3, kStepEnd = 4 };
constexpr uint8_t kNumActivityKinds = 5;
const char* activity_kind_name(ActivityKind kind);

// Also the record the rank's runtime hands its NCCL library, so it must stay plain data.
struct ActivitySlice {
  uint64_t track = 0;  // the stream, as in Collective::track
  double start_us = 0;
  double end_us = 0;   // a step mark has end_us == start_us
  uint32_t count = 0;  // pieces of work merged into this slice
  ActivityKind kind = ActivityKind::kKernel;
};

struct RankActivity {
  static constexpr MsgType kType = MsgType::kRankActivity;
  static constexpr size_t kMaxSlices = 16384;  // per frame, well inside kMaxFieldsBytes
  std::vector<ActivitySlice> slices;
  uint64_t dropped = 0;  // slices the rank could not keep since its last frame
  void encode(Writer& w) const;
  static RankActivity decode(Reader& r);
};

// Encodes a message's fixed fields.
template <typename Msg>
std::vector<uint8_t> encode_fields(const Msg& msg) {
  Writer w;
  msg.encode(w);
  return std::move(w.bytes());
}

// Decodes a message's fixed fields; they must be consumed exactly.
template <typename Msg>
Msg decode_fields(const uint8_t* fields, size_t size) {
  Reader r(fields, size);
  Msg msg = Msg::decode(r);
  if (r.remaining() != 0 && !msg_has_foreign_version(msg))
    throw WireError(std::string(msg_type_name(Msg::kType)) + " frame has " + std::to_string(r.remaining()) +
                    " unexpected trailing bytes");
  return msg;
}

}  // namespace fakegpu::wire
