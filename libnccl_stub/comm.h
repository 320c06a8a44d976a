// The stub's communicator object and the operations that create and retire it.
#pragma once

#include <condition_variable>
#include <map>
#include <tuple>
#include <vector>
#include <memory>
#include <mutex>
#include <string>

#include "client.h"
#include "comm_memory.h"
#include "nccl.h"

namespace fakegpu::stub {

// An operator made by ncclRedOpCreatePreMulSum; its ncclRedOp_t is ncclNumOps + its index.
struct PreMulSumOp {
  int dtype = 0;
  bool live = false;
  uint64_t scalar = 0;                  // ncclScalarHostImmediate: the value, read at creation
  const void* device_scalar = nullptr;  // ncclScalarDevice: read when the collective runs
};

// A buffer given to ncclCommRegister or ncclCommWindowRegister; its address is the handle.
struct Registration {
  void* buffer = nullptr;
  size_t size = 0;
};

// What a rank needs to exchange small collectives with its peers itself (peer_path.h), learnt
// from the coordinator's replies, which every member reads alike.
struct PeerBook {
  std::mutex mu;
  std::shared_ptr<PeerExchange> mailbox;  // given by the coordinator; null: never exchange
  double clock_us = 0;  // when the comm's last operation this rank took part in ends
  // Uncontended time of each latency-bound shape seen: (collective, bytes per rank, root) -> us.
  std::map<std::tuple<int, uint64_t, int>, double> latency_bound_us;
};

struct CommOptions {
  bool blocking = true;
  std::string name;
};
// Reads only the fields that fit in config->size, so any config version is accepted.
CommOptions read_config(const ncclConfig_t* config);

}  // namespace fakegpu::stub

// Named to match the opaque ncclComm_t of nccl.h.
struct ncclComm {
  std::shared_ptr<fakegpu::stub::Client> client;
  int nranks = 0;
  int rank = 0;
  int cuda_device = 0;
  int global_rank = -1;
  uint64_t id = 0;  // the coordinator's id; 0 until init completes
  bool blocking = true;
  std::string name;
  uint64_t next_seq = 1;    // collective sequence number: ranks match on (comm, seq)
  uint64_t next_split = 0;  // ncclCommSplit calls on this comm so far
  uint64_t next_shrink = 0;  // ncclCommShrink calls on this comm so far
  bool revoked = false;      // ncclCommRevoke was called: no more operations
  bool suspended = false;    // between ncclCommSuspend and ncclCommResume: no operations
  // Point-to-point messages so far per peer: a send and a recv match on (sender, receiver, seq),
  // numbered from 1 like collectives.
  std::map<int, uint64_t> next_send_seq, next_recv_seq;
  std::vector<fakegpu::stub::PreMulSumOp> premulsum_ops;
  std::map<const void*, std::unique_ptr<fakegpu::stub::Registration>> registrations;  // by handle

  // Init or split still in flight, and what its reply means.
  enum class Pending { kNone, kInit, kSplit };
  std::mutex mu;
  Pending pending_kind = Pending::kNone;
  std::shared_ptr<fakegpu::stub::Request> pending;
  ncclResult_t async_error = ncclSuccess;
  std::string async_message;  // why async_error is set, for later calls on the comm
  int inflight = 0;           // operations queued on streams and not finished yet
  std::condition_variable idle;
  fakegpu::stub::PeerBook peers;
  fakegpu::stub::CommMemory memory;  // NCCL's device memory for it, as charged to the GPU
};

namespace fakegpu::stub {

// Checks that comm is a live communicator made by this library; throws NcclError otherwise.
ncclComm* checked_comm(ncclComm_t comm);
void register_comm(ncclComm* comm);
void unregister_comm(ncclComm* comm);

// Applies a finished init/split reply, if any. Returns the comm's current status.
ncclResult_t poll_comm(ncclComm* comm);
// Blocks until init/split has finished; returns the comm's status.
ncclResult_t wait_comm(ncclComm* comm);
// Logs the comm's channels (NCCL_DEBUG=INFO) and writes NCCL_GRAPH_DUMP_FILE /
// NCCL_TOPO_DUMP_FILE once it is up; func names the call in NCCL's Init COMPLETE line.
void describe_comm(ncclComm* comm, const char* func);

// Starts joining a communicator; the result arrives asynchronously.
ncclComm* start_init(int nranks, const ncclUniqueId& id, int rank, int cuda_device, const CommOptions& options);
// Starts a split of parent. Returns nullptr for NCCL_SPLIT_NOCOLOR, after taking part.
ncclComm* start_split(ncclComm* parent, int color, int key, const CommOptions& options);
// Records an error that happened after the call returned (on a stream); later calls on the comm
// and ncclCommGetAsyncError report it.
void set_async_error(ncclComm* comm, ncclResult_t code, const std::string& message);
// Whether an operation of the comm is queued on a stream; the caller holds comm->mu. When one
// is, work parked on streams goes to their workers (CudaBridge::kick_streams): the caller will
// wait or poll for it without synchronising with its stream.
bool work_in_flight(const ncclComm* comm);
// Blocks until no operation of the comm is queued on a stream.
void wait_idle(ncclComm* comm);

// Starts a shrink of parent that leaves out `excluded`; the result arrives asynchronously.
ncclComm* start_shrink(ncclComm* parent, const std::vector<int>& excluded, int flags, const CommOptions& options);

// Tells the coordinator this rank has left, and frees the object. An abort does not wait for
// anything in flight.
void destroy_comm(ncclComm* comm, bool abort);

}  // namespace fakegpu::stub
