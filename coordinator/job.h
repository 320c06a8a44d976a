// The coordinator's view of one job: connected ranks, communicators, and the operations in
// flight on them. Pure logic, no sockets: frames come in through on_frame and go out through
// an Outbox, so tests can drive it directly. Job is the façade; the communicators
// (CommRegistry), the rendezvous that make them (Rendezvous) and the report's counters
// (JobStats) are its parts, and its member functions are spread over job_*.cpp by concern.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cluster_config.h"
#include "comm_state.h"
#include "comm_registry.h"
#include "comm_model.h"
#include "data_plane.h"
#include "executor.h"
#include "job_stats.h"
#include "link_timeline.h"
#include "op_match.h"
#include "rendezvous.h"
#include "trace.h"
#include "wire.h"

namespace fakegpu::coord {

// A slice of a shared buffer, so one reduced result can go to every rank without a copy.
struct Bulk {
  std::shared_ptr<const std::vector<uint8_t>> buffer;
  size_t offset = 0;
  size_t size = 0;
};

// A file descriptor that goes to clients ahead of a frame, closed once no frame holds it.
struct SharedFd {
  explicit SharedFd(int fd) : fd(fd) {}
  ~SharedFd();
  SharedFd(const SharedFd&) = delete;
  SharedFd& operator=(const SharedFd&) = delete;
  const int fd;
};

struct OutFrame {
  wire::MsgType type{};
  uint64_t request_id = 0;
  std::vector<uint8_t> fields;
  std::vector<Bulk> bulk;  // written back to back: a gather's reply points into every rank's data
  uint64_t chunk_bytes = 0;  // the client's Hello::chunk_bytes: more bulk than this goes in pieces
  // Sent on the socket (SCM_RIGHTS, with one byte) just before the frame goes into the client's
  // control ring; only clients on a control ring are sent one (wire::PeerMailbox).
  std::shared_ptr<const SharedFd> descriptor;
  uint64_t bulk_bytes() const;
};

class Outbox {
 public:
  virtual ~Outbox() = default;
  virtual void send(ClientId client, OutFrame frame) = 0;
  // Closes the connection once what was queued for it has been written.
  virtual void disconnect(ClientId client) = 0;
};

struct ServerInfo {
  std::string transport;
  std::string address;
  std::string cluster_config_path;
  std::string token;  // FAKEGPU_COORDINATOR_TOKEN: when set, every client must present it
};

class Job {
 public:
  Job(ClusterConfig cluster, ServerInfo server, Outbox& out);

  void on_connect(ClientId client);
  // Takes the body by value: a collective's socket-path data is used in place. fd is the file
  // descriptor that came with the frame (ShareSegment), or -1; the Job takes ownership of it.
  // A message whose bulk data came in PayloadChunk pieces has only its fields in the body, and
  // its bulk data in `payload`.
  void on_frame(ClientId client, const wire::FrameHeader& header, std::vector<uint8_t> body, int fd = -1,
                std::shared_ptr<std::vector<uint8_t>> payload = nullptr);
  // A frame whose body exceeded max_buffer_bytes(): only its fields were kept, the rest dropped.
  void on_oversized_frame(ClientId client, const wire::FrameHeader& header, std::vector<uint8_t> fields);
  // The most the coordinator buffers for one frame or one reply: half the memory available at
  // start, or FAKEGPU_COORDINATOR_MAX_BUFFER.
  uint64_t max_buffer_bytes() const { return max_buffer_bytes_; }
  void on_disconnect(ClientId client);
  // Until a client has said a valid Hello it may only send small frames.
  bool greeted(ClientId client) const;
  // The transport moved this client's frames onto a control ring in shared memory.
  // peer_exchange: it offered to exchange small collectives with its peers (OpenControlRing).
  void on_control_ring(ClientId client, bool peer_exchange) {
    ++stats_.data.control_ring_clients;
    clients_[client].peer_exchange = peer_exchange;
  }
  // PayloadChunk frames that came in, or went out, for the report.
  void count_payload_chunks(uint64_t in, uint64_t out) {
    stats_.data.payload_chunks_in += in;
    stats_.data.payload_chunks_out += out;
  }
  // Where operations that move at least kAsyncDataBytes run (the server's own thread); by
  // default, and for smaller ones always, on the calling thread.
  void use_data_plane(DataPlane& plane) { data_plane_ = &plane; }
  static constexpr uint64_t kAsyncDataBytes = uint64_t{1} << 20;

  uint64_t completed_operations() const { return completed_ops_; }
  // Frames taken so far whose sender waits for the answer: all but RankActivity and the
  // collectives ranks exchange among themselves. The server polls for frames only while these
  // keep coming.
  uint64_t awaited_frames() const { return awaited_frames_; }
  size_t ranks_seen() const;
  double modeled_makespan_us() const { return timeline_.makespan_us(); }
  nlohmann::json report() const;
  // The modeled timeline as a Chrome / Perfetto trace.
  nlohmann::json trace() const;
  // Fails the operations some of whose ranks have waited longer than the rendezvous timeout
  // (FAKEGPU_COORDINATOR_TIMEOUT_MS) for the others, naming who is missing and where each
  // missing rank was last seen. The server calls it periodically.
  void check_timeouts(std::chrono::steady_clock::time_point now);
  std::chrono::milliseconds rendezvous_timeout() const { return rendezvous_timeout_; }
  // How often check_timeouts should run: a few times per the shorter of the two timeouts.
  std::chrono::milliseconds watch_period() const;
  // The live picture `fakegpu-coordinator status` prints: per communicator, which ranks wait in
  // which operation and for whom; per rank, what it is doing; any deadlock found.
  nlohmann::json status(std::chrono::steady_clock::time_point now) const;

 private:
  enum class Posted : uint8_t { kNothing, kCollective, kInit, kSplit, kShrink };
  struct Client {
    std::map<uint64_t, std::shared_ptr<const SegmentMapping>> segments;
    std::map<uint64_t, std::string> segment_errors;  // why a segment could not be mapped
    bool greeted = false;
    bool observer = false;  // a status query, not a rank: left out of the report
    bool disconnected = false;
    bool peer_exchange = false;  // on a control ring, and offered to exchange with its peers
    wire::Hello hello;
    int global_rank = -1;  // learned from the environment or the first world-spanning comm
    uint64_t comm_inits = 0;
    uint64_t collectives = 0;
    uint64_t errors = 0;
    double wait_us = 0;  // wall-clock time on this host its calls waited for slower peers to arrive
    double modeled_wait_us = 0;  // modeled time its calls waited for slower peers' streams
    uint64_t bytes = 0;  // the sizes of the calls it took part in
    uint64_t timeouts = 0;  // its operations failed by the rendezvous timeout
    // The last call it posted, for "where is the missing rank" diagnoses and the report.
    Posted last_posted = Posted::kNothing;
    uint64_t last_comm = 0, last_seq = 0;  // the communicator (the parent for a split) and number
    wire::CollType last_coll{};
    std::chrono::steady_clock::time_point last_post_at;
    // What its GPU did on the modeled clock (wire::RankActivity), for step figures and the trace.
    std::vector<wire::ActivitySlice> activity;
    uint64_t activity_dropped = 0;  // slices lost on the rank, or beyond kMaxActivity here
    // Its PyTorch operators' modeled totals (wire::RankOperators), the latest it sent.
    std::vector<wire::OperatorTotal> operators;
    // Its GPUs' memory (wire::RankMemory) by device, the latest it sent.
    std::map<int32_t, wire::RankMemory> memory;
    // Under FAKEGPU_REPRESENTATIVE, a rank no process runs: the coordinator posts for it the calls
    // of a process (on each communicator, Member::follows: mostly its representative, the client
    // below, whose figures are its own), and nothing is ever sent to it.
    bool stood_in = false;
    ClientId representative = 0;
    // Under FAKEGPU_REPRESENTATIVE, the process group it named last (wire::GroupRanks): PyTorch
    // names the group it is making just before it splits a communicator for it.
    std::string last_group;
    // Under FAKEGPU_REPRESENTATIVE, the NCCL buffers the rank's library charged (as
    // libnccl_stub/comm_memory.cpp does), kept for representatives and stand-ins alike: a
    // stand-in's memory is its representative's, corrected by the difference of the two.
    struct NcclLedger {
      uint64_t bytes = 0;
      std::map<uint64_t, wire::NcclMemory> plans;  // by communicator
      std::map<uint64_t, uint8_t> connected;       // pieces connected, by communicator
      std::set<std::tuple<uint64_t, int, bool>> peers;  // (communicator, peer, sending)
      std::set<std::pair<uint64_t, bool>> pools;         // (communicator, sending)
    } nccl;
  };
  static constexpr size_t kMaxActivity = size_t{1} << 18;  // slices kept per rank
  // An init's ranks meet by the key of their ncclUniqueId; the name is the communicator's.
  struct PendingInit : Rendezvous {
    std::string name;
    // Under FAKEGPU_REPRESENTATIVE, an ncclCommSplit of this communicator made as an init of the
    // group it is for (split_for_group); 0 for an ncclCommInitRank.
    uint64_t split_parent = 0;
  };
  // One operation (or init, split, shrink) a rank has joined and that still waits for others.
  struct Wait {
    uint64_t comm = 0;  // whose ranks `missing` counts; 0 for an init, whose communicator is not made yet
    std::string where;  // "AllReduce(count=4, int32, sum) #2 on communicator 1"
    std::vector<int> missing;  // comm ranks not there yet
    std::chrono::steady_clock::time_point since;
  };

  // Handlers get the decoded fixed fields; a collective also gets the whole body, whose bulk
  // part (after bulk_offset) holds the rank's data.

  // ---- Frames, clients and replies (job.cpp)
  void handle_hello(ClientId id, Client& client, const wire::Hello& msg, uint64_t request_id);
  void handle_comm_destroy(ClientId id, const wire::CommDestroy& msg, uint64_t request_id);
  void handle_comm_revoke(ClientId id, const wire::CommRevoke& msg, uint64_t request_id);
  // Finds the comm and checks that `client` really owns `rank` in it; replies with an error
  // and returns nullptr otherwise. op_seq names the collective being joined, if any.
  Comm* member_comm(ClientId client, uint64_t comm_id, int rank, uint64_t request_id,
                    const uint64_t* op_seq = nullptr, bool allow_failed = false);
  std::string too_big(uint64_t bytes, const std::string& what) const;
  template <typename Msg>
  void reply(ClientId client, uint64_t request_id, const Msg& msg, std::vector<Bulk> bulk = {});
  void reply_error(ClientId client, uint64_t request_id, wire::Status code, const std::string& message);
  std::string describe_client(ClientId id) const;
  uint64_t chunk_bytes_of(ClientId id) const;

  // ---- Inits, splits and shrinks (job_rendezvous.cpp)
  void handle_comm_init(ClientId id, Client& client, const wire::CommInit& msg, uint64_t request_id);
  void handle_comm_split(ClientId id, const wire::CommSplit& msg, uint64_t request_id);
  void handle_comm_shrink(ClientId id, const wire::CommShrink& msg, uint64_t request_id);
  void complete_init(const wire::CommKey& key, const PendingInit& pending);
  void complete_split(Comm& parent, uint64_t split_index, const Rendezvous& pending);
  void complete_shrink(Comm& parent, uint64_t shrink_index, const Rendezvous& pending);
  // Gives a new communicator a peer mailbox (peer_exchange.h) when every member offered to use
  // one; sent ahead of the replies that complete the communicator.
  void offer_peer_mailbox(Comm& comm);
  // Fails the splits and shrinks of the comm that wait for `rank`, which is gone.
  void fail_regrouping(Comm& comm, int rank, const std::string& why);
  // Fails a pending init, split or shrink: every rank that arrived gets `why`.
  void fail_rendezvous(Rendezvous& pending, wire::Status code, const std::string& why);

  // ---- Operation matching and data movement (job_ops.cpp)
  void handle_share_segment(Client& client, const wire::ShareSegment& msg, int fd);
  // Points into one of the client's shared segments, which `keep` then holds; throws RefError
  // when the range is not there.
  uint8_t* resolve(Client& client, const wire::BufferRef& ref, uint64_t bytes, std::shared_ptr<const SegmentMapping>* keep);
  // The send data, when the frame carries it, is in `data` from bulk_offset to the end.
  void handle_collective(ClientId id, const wire::Collective& msg, std::shared_ptr<std::vector<uint8_t>> data,
                         size_t bulk_offset, uint64_t request_id);
  // `now` is when the frame arrived, read once for the whole arrival.
  void handle_collective_arrival(Comm& comm, ClientId id, const wire::Collective& msg, RankData data,
                                 uint64_t request_id, std::chrono::steady_clock::time_point now);
  void handle_p2p(Comm& comm, ClientId id, const wire::Collective& msg, RankData data, uint64_t request_id,
                  std::chrono::steady_clock::time_point now);
  void complete_op(Comm& comm, PendingOp& op);
  // The ranks an operation answers: (client, request id) each.
  using Replyees = std::vector<std::pair<ClientId, uint64_t>>;
  // Moves an operation's data, work(Executor&), on the data plane (small ones on the calling
  // thread), then runs then(to); if the work throws, tells `to` why instead.
  template <typename Work, typename Then>
  void move_data(uint64_t bytes, Work work, Then then, Replyees to, const wire::Collective& call);
  void fail_moved(const Replyees& to, const wire::Collective& call, const std::string& why);
  // Counts a rank's part in a completed operation: its size, and the modeled time its stream,
  // ready at ready_us, waited for the operation to start.
  void count_rank_part(ClientId client, uint64_t bytes, double ready_us, const wire::CollectiveDone& done);
  void fail_op(Comm& comm, PendingOp& op, wire::Status code, const std::string& why);
  // Fails an operation that `rank`, which destroyed the communicator, will never join.
  void fail_departed(Comm& comm, uint64_t seq, PendingOp& op, int rank);
  // Fails every operation still waiting on the comm, so no rank stays blocked in one.
  void fail_pending(Comm& comm, wire::Status code, const std::string& why);

  // ---- The cost model (job_model.cpp) and the ranks' activity (job_steps.cpp)
  // Counts and models a completed operation that every rank's stream reached by ready_us, with
  // each rank's (global rank, track) for the trace. Returns its modeled time: start -1 and
  // duration 0 if unmodeled.
  wire::CollectiveDone count_completed(const wire::Collective& call, uint64_t bytes, Comm& comm, double ready_us,
                                       std::vector<Trace::RankTrack> tracks);
  // The device memory NCCL would take on comm rank `rank` (planner/nccl_memory.h); zeros when
  // the communicator is not modeled.
  wire::NcclMemory nccl_memory(Comm& comm, int rank);
  const planner::CommModel* model_of(Comm& comm);
  void handle_comm_info(ClientId id, const wire::CommInfo& msg, uint64_t request_id);
  void handle_simulate(ClientId id, const wire::Simulate& msg, uint64_t request_id);
  void handle_rank_activity(Client& client, const wire::RankActivity& msg);
  void handle_rank_operators(Client& client, wire::RankOperators msg);
  void handle_rank_memory(Client& client, wire::RankMemory msg);
  // The rank's own GPU: of the devices it used, the one whose memory peaked highest.
  static const wire::RankMemory* rank_gpu_memory(const Client& client);
  // The report's "operators" section (job_operators.cpp); null when no rank sent any.
  nlohmann::json operators_report() const;
  nlohmann::json memory_report() const;
  // Step figures per rank, and the job's steps (each as its slowest rank took it).
  nlohmann::json steps_report() const;

  // ---- Stand-ins (job_stand_ins.cpp): under FAKEGPU_REPRESENTATIVE only some ranks run as
  // processes; the coordinator posts each of their calls for the ranks they stand for too.
  struct Group {  // a process group the program made (wire::GroupRanks)
    std::string name;
    std::vector<int> ranks;  // global ranks, in group-rank order
  };
  bool stands_in() const { return !representatives_.empty(); }
  // Whether a client id is a stand-in's (stand_in() numbers them from kStandInClientBase).
  static bool is_stand_in(ClientId id) { return id >= kStandInClientBase; }
  void handle_group_ranks(Client& client, const wire::GroupRanks& msg);
  // An ncclCommSplit when ranks are stood in for: they post no split of their own, so the child
  // is made as an init of the group the process named last (its DeviceMesh dimension's, from
  // split_group, or new_group's), which brings its stand-ins and mirrors the groups of its kind.
  void split_for_group(ClientId id, Client& client, const Comm& parent, const wire::CommSplit& msg,
                       uint64_t request_id);
  // The group a communicator was made for, by the group name its comm_name ends with; null when
  // none is known.
  const Group* group_of(const std::string& comm_name) const;
  const Group* group_named(const std::string& name) const;
  // The process whose calls global rank `rank` repeats: the nearest representative below it.
  int representative_of(int rank) const;
  // The connected process of a representative's global rank; throws when it has none.
  ClientId process_of(int rank) const;
  // The client that stands for global rank `rank`, made at its first use; `bringer`, the process
  // that needs it, saves looking up its representative when it is that.
  ClientId stand_in(int rank, ClientId bringer);
  bool is_process(int rank) const {
    return std::binary_search(representatives_.begin(), representatives_.end(), rank);
  }
  // A rank's figures (activity, operators, memory): a stand-in's are its representative's.
  const Client& figures_of(const Client& client) const;
  // Arrives, at an init the client `id` just joined, the ranks the communicator's group holds
  // that no process runs. "" or what is wrong (the group is unknown, or does not hold the rank).
  std::string arrive_stand_ins(PendingInit& pending, const wire::CommInit& msg, ClientId id,
                               std::chrono::steady_clock::time_point now);
  // Makes the communicators of the new one's kind that no process holds (its mirrors).
  void make_mirrors(Comm& comm);
  // Joins, to an operation `msg` of a representative just joined, the ranks that repeat its calls.
  // Returns whether the operation is now complete.
  bool join_stand_ins(Comm& comm, PendingOp& op, const wire::Collective& msg, const RankData& data,
                      std::chrono::steady_clock::time_point now);
  // A representative's Send or Recv `msg` whose peer no process runs: posts the side that peer's
  // program would, so that it is matched and modeled (what the stand-in sends: stand_in_message).
  void post_stand_in_side(Comm& comm, const wire::Collective& msg, std::chrono::steady_clock::time_point now);
  // A process's Send `msg` of an exchange (its group receives too), repeated by the stood-in ranks
  // that follow it here to the peers as far from them as its peer is from it, where those peers
  // are stood in too (no process posts such a message): both sides are posted.
  void post_stood_in_messages(Comm& comm, ClientId process, const wire::Collective& msg,
                              std::chrono::steady_clock::time_point now);
  // The bytes a stood-in rank sends a process in message `p`: what the process sent it in the
  // message of the same number the other way, kept when small (an all-to-all's counts), else null
  // (zeros). Keeps what a process sends a stand-in for that.
  std::shared_ptr<std::vector<uint8_t>> stand_in_message(Comm& comm, int src, int dst, const PendingP2P& p,
                                                          uint64_t bytes);
  // Counts and models a completed operation once more on each of the communicator's mirrors,
  // with the comm ranks that took part (all of a collective's, a message's two ends).
  struct MirroredPart {
    int rank;
    double ready_us;
    uint64_t track;
  };
  void run_on_mirrors(const Comm& comm, const wire::Collective& call, uint64_t bytes, double ready_us,
                      const std::vector<MirroredPart>& parts);
  // The representative `id` destroyed its rank of `comm` or left: so did the ranks it stands for.
  void retire_stand_ins(Comm& comm, ClientId id);
  // Why a shrink cannot go on when ranks are stood in for.
  std::string shrink_refusal(const Comm& parent) const;
  // Why the stood-in ranks cannot repeat a process's Send of a pairwise exchange (a partner
  // beyond the communicator); empty when they can, or when it is no such Send.
  std::string pair_refusal(const Comm& comm, ClientId process, const wire::Collective& msg) const;
  // Notes in a rank's NCCL ledger what its library charges at an init, and at a completed call
  // (`rank` its comm rank in it).
  void ledger_init(ClientId client, uint64_t comm, const wire::NcclMemory& plan);
  void ledger_call(ClientId client, uint64_t comm, const wire::Collective& call, int rank,
                   const wire::CollectiveDone& done);
  // A rank's GPU memory for the report: a stand-in's is its representative's, with its own NCCL
  // buffers in place of the representative's. False when it has none.
  bool report_memory(const Client& client, wire::RankMemory* out) const;
  // The report's account of which ranks ran as processes; null when every rank did.
  nlohmann::json representative_report() const;
  // In hybrid mode, the GPUs the ranks computed on and the cluster GPUs they stood for; null otherwise.
  nlohmann::json hybrid_report() const;

  // ---- The report (job_report.cpp)
  // A communicator's entry in the report.
  nlohmann::json comm_entry(const Comm& comm) const;

  // ---- Retirement (job_retire.cpp): a coordinator serving job after job stays the same size:
  // communicators whose ranks have all left, ranks long gone and failed rendezvous are let go.
  // Retires the communicator if every rank has destroyed it or gone: its report entry is kept
  // (the newest ones) and the rest of it dropped.
  void retire_if_finished(uint64_t comm_id);
  // Drops the oldest departed ranks beyond what the report lists, unless a live communicator
  // still names them.
  void forget_departed_clients();
  // Drops inits, splits and shrinks that failed longer than the rendezvous timeout ago.
  void forget_failed_rendezvous(std::chrono::steady_clock::time_point now);

  // ---- Diagnosis (job_diagnose.cpp)
  // "ncclCommInitRank of 'name', a 4-rank communicator", as waits and timeouts name an init...
  static std::string init_label(const PendingInit& init);
  // ...and "ncclCommSplit #0 of communicator 1" a split (or a shrink, "ncclCommShrink").
  static std::string regroup_label(Regroup kind, uint64_t index, uint64_t parent);
  static std::string regroup_label(const RegroupKey& key) { return regroup_label(key.kind, key.index, key.parent); }
  // Records what a client just posted, for diagnoses.
  void note_post(Client& client, Posted what, uint64_t comm, uint64_t seq,
                 std::chrono::steady_clock::time_point now);
  // "AllReduce #3 on communicator 1", "ncclCommSplit #0 of communicator 1": a client's last post.
  std::string last_post(const Client& client) const;
  // Inits, splits and shrinks whose ranks waited longer than the rendezvous timeout: failed,
  // naming the missing ranks.
  void check_regroup_timeouts(std::chrono::steady_clock::time_point now,
                              const std::map<ClientId, std::vector<Wait>>& waits,
                              const std::function<void(const std::string&)>& announce);
  // Who global rank `rank`, missing from an init, is and what it does ("" and "has not connected
  // to the coordinator" when no process has claimed it).
  std::pair<std::string, std::string> global_rank_state(int rank, const std::map<ClientId, std::vector<Wait>>& waits,
                                                        std::chrono::steady_clock::time_point now) const;
  // Where a rank that did not arrive was last seen, and what it is doing now.
  std::string whereabouts(const Comm& comm, int rank, const std::map<ClientId, std::vector<Wait>>& waits,
                          std::chrono::steady_clock::time_point now) const;
  // Every rank's unfinished operations, by client.
  std::map<ClientId, std::vector<Wait>> waits() const;
  // What a client is doing: waiting in operations (and for whom), idle since its last post, or gone.
  std::string doing(ClientId id, const std::map<ClientId, std::vector<Wait>>& waits,
                    std::chrono::steady_clock::time_point now) const;
  // The ranks that all wait only for each other and have been quiet for the deadlock timeout;
  // empty when there are none. Such ranks can never be released.
  std::vector<ClientId> deadlocked(const std::map<ClientId, std::vector<Wait>>& waits,
                                   std::chrono::steady_clock::time_point now) const;
  // Names a deadlock, fails every operation its ranks wait in, and records it for the report.
  void break_deadlock(const std::vector<ClientId>& ranks, const std::map<ClientId, std::vector<Wait>>& waits,
                      std::chrono::steady_clock::time_point now);
  // Prints the status as text on the coordinator's stderr (on a timeout or a deadlock).
  void print_wavefront(std::chrono::steady_clock::time_point now) const;
  void handle_status_query(ClientId id, uint64_t request_id);

  ClusterConfig cluster_;
  planner::Topology topology_;
  planner::TuningEnv tuning_;
  ServerInfo server_;
  Outbox& out_;
  std::chrono::system_clock::time_point started_;

  std::map<ClientId, Client> clients_;  // kept after they leave, for the report (the newest ones)
  std::deque<ClientId> departed_;       // clients that left, oldest first
  uint64_t ranks_not_listed_ = 0;       // departed clients dropped
  // Enough for every rank of one job (the world size, at least kMaxDepartedClients).
  static constexpr size_t kMaxDepartedClients = 256;
  // Communicators over the same GPUs share one model: memory grows with distinct GPU sets, not
  // with jobs. Never dropped: the timeline and the trace point into the models.
  std::map<std::vector<int>, std::shared_ptr<const planner::CommModel>> models_;
  std::map<wire::CommKey, PendingInit> pending_inits_;
  std::map<RegroupKey, Rendezvous> regroupings_;  // splits and shrinks under way
  // Enough retired communicators for one job's (twice the world size, at least kMaxRetiredComms).
  static constexpr size_t kMaxRetiredComms = 256;
  CommRegistry comms_{std::max<size_t>(kMaxRetiredComms, 2 * size_t(cluster_.world_size()))};
  uint64_t completed_ops_ = 0;
  uint64_t awaited_frames_ = 0;
  JobStats stats_;
  LinkTimeline timeline_;
  Trace trace_;
  Executor executor_;           // the pool, used only from the data plane's thread
  Executor serial_executor_{1};  // no pool: for small operations on the calling thread
  InlineDataPlane inline_plane_;
  DataPlane* data_plane_ = &inline_plane_;
  uint64_t max_buffer_bytes_;
  std::chrono::milliseconds rendezvous_timeout_;
  std::chrono::milliseconds deadlock_timeout_;
  // FAKEGPU_REPRESENTATIVE: the global ranks that run as processes (sorted); empty when all do.
  std::vector<int> representatives_;
  std::vector<Group> groups_;           // in the order the program made them
  std::map<int, ClientId> stand_ins_;   // by global rank
  std::shared_ptr<std::vector<uint8_t>> stand_in_zeros_;  // what stood-in broadcast roots send
  uint64_t next_stand_in_ = 0;
  // Stand-ins' client ids, far above any connection's; request ids answered to nobody.
  static constexpr ClientId kStandInClientBase = ClientId{1} << 62;
  static constexpr uint64_t kStandInRequest = ~uint64_t{0};
};

// FAKEGPU_REPRESENTATIVE's list ("0,8", "0-3"), sorted, within a world of `world` ranks; throws
// std::runtime_error naming what is wrong, or when it leaves out rank 0.
std::vector<int> parse_rank_list(const std::string& text, int world);

// "ranks 0-3, 5, 7-9" (or "rank 2"): rank lists stay short on large communicators.
std::string plural_ranks(std::vector<int> ranks);

// The status as the lines an operator reads.
std::string format_status(const nlohmann::json& status);

template <typename Msg>
void Job::reply(ClientId client, uint64_t request_id, const Msg& msg, std::vector<Bulk> bulk) {
  if (is_stand_in(client)) return;  // its representative hears it all
  OutFrame frame;
  frame.type = Msg::kType;
  frame.request_id = request_id;
  frame.fields = wire::encode_fields(msg);
  frame.bulk = std::move(bulk);
  frame.chunk_bytes = chunk_bytes_of(client);
  out_.send(client, std::move(frame));
}

}  // namespace fakegpu::coord
