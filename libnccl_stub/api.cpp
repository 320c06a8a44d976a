// The extern "C" surface of libnccl.so.2. Every entry point runs its body through guarded(),
// the one place where exceptions become ncclResult_t.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

#include "coll_shape.h"
#include "comm.h"
#include "cuda_bridge.h"
#include "errors.h"
#include "export.h"
#include "group.h"
#include "reduce.h"

using namespace fakegpu;
using namespace fakegpu::stub;

namespace {

void require(bool ok, ncclResult_t code, const std::string& message) {
  if (!ok) throw NcclError(code, message);
}

void require(bool ok, ncclResult_t code, const char* message) {
  if (!ok) throw NcclError(code, message);
}

// On the per-operation path: the message is built only when the check fails.
template <typename MakeMessage, typename = std::enable_if_t<std::is_invocable_v<MakeMessage>>>
void require(bool ok, ncclResult_t code, MakeMessage&& make_message) {
  if (!ok) throw NcclError(code, make_message());
}

// The value a C caller put in an enum parameter, read as bytes: C may pass any int (say, a
// datatype of 42), and loading such a value as a C++ enum would be undefined behaviour.
template <typename E>
int raw(const E& e) {
  static_assert(sizeof(E) == sizeof(int), "NCCL's enums are int-sized");
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

// Creates a comm and, outside a group, waits for it when it is blocking.
ncclResult_t finish_create(ncclComm* comm, ncclComm_t* out) {
  *out = comm;
  if (in_group()) {
    group_add_pending_comm(comm);
    return ncclSuccess;
  }
  if (!comm->blocking) return ncclInProgress;
  ncclResult_t status = wait_comm(comm);
  if (status != ncclSuccess) {
    destroy_comm(comm, /*abort=*/true);
    *out = nullptr;
  }
  return status;
}

ncclResult_t init_rank(ncclComm_t* out, int nranks, const ncclUniqueId& id, int rank, int device,
                       const ncclConfig_t* config) {
  require(out != nullptr, ncclInvalidArgument, "comm pointer is NULL");
  require(nranks > 0, ncclInvalidArgument, "nranks must be > 0, got " + std::to_string(nranks));
  require(rank >= 0 && rank < nranks, ncclInvalidArgument,
          "rank " + std::to_string(rank) + " is outside 0.." + std::to_string(nranks - 1));
  CommOptions options = read_config(config);
  return finish_create(start_init(nranks, id, rank, device, options), out);
}

}  // namespace

NCCL_EXPORT ncclResult_t ncclGetVersion(int* version) {
  return guarded("ncclGetVersion", [&] {
    require(version != nullptr, ncclInvalidArgument, "version pointer is NULL");
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
  });
}

NCCL_EXPORT const char* ncclGetErrorString(ncclResult_t result) {
  switch (raw(result)) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the fakegpu developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

NCCL_EXPORT const char* ncclGetLastError(ncclComm_t) {
  thread_local std::string copy;
  copy = last_error();
  return copy.c_str();
}

NCCL_EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  return guarded("ncclGetUniqueId", [&] {
    require(id != nullptr, ncclInvalidArgument, "uniqueId pointer is NULL");
    UniqueIdContents contents{coordinator_endpoint(), random_comm_key()};
    try {
      pack_unique_id(contents, id->internal);
    } catch (const EndpointError& e) {
      throw NcclError(ncclInvalidUsage, e.what());
    }
    return ncclSuccess;
  });
}

NCCL_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank,
                                                ncclConfig_t* config) {
  return guarded("ncclCommInitRankConfig",
                 [&] { return init_rank(comm, nranks, id, rank, cuda().current_device(), config); });
}

NCCL_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  return guarded("ncclCommInitRank",
                 [&] { return init_rank(comm, nranks, id, rank, cuda().current_device(), nullptr); });
}

NCCL_EXPORT ncclResult_t ncclCommInitRankScalable(ncclComm_t* comm, int nranks, int rank, int nId,
                                                  ncclUniqueId* ids, ncclConfig_t* config) {
  return guarded("ncclCommInitRankScalable", [&] {
    require(nId > 0 && ids != nullptr, ncclInvalidArgument, "needs at least one unique id");
    // Every rank receives the same id list; the first one names the rendezvous.
    return init_rank(comm, nranks, ids[0], rank, cuda().current_device(), config);
  });
}

NCCL_EXPORT ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  return guarded("ncclCommInitAll", [&] {
    require(comms != nullptr, ncclInvalidArgument, "comms pointer is NULL");
    require(ndev > 0, ncclInvalidArgument, "ndev must be > 0, got " + std::to_string(ndev));
    ncclUniqueId id;
    UniqueIdContents contents{coordinator_endpoint(), random_comm_key()};
    pack_unique_id(contents, id.internal);
    group_start();
    for (int i = 0; i < ndev; ++i) {
      ncclResult_t r = guarded("ncclCommInitAll", [&] {
        return init_rank(&comms[i], ndev, id, i, devlist ? devlist[i] : i, nullptr);
      });
      if (r != ncclSuccess) {
        group_end();
        return r;
      }
    }
    return group_end();
  });
}

NCCL_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                                       ncclConfig_t* config) {
  return guarded("ncclCommSplit", [&] {
    ncclComm* parent = checked_comm(comm);
    require(newcomm != nullptr, ncclInvalidArgument, "newcomm pointer is NULL");
    require(color >= 0 || color == NCCL_SPLIT_NOCOLOR, ncclInvalidArgument,
            "color must be >= 0 or NCCL_SPLIT_NOCOLOR, got " + std::to_string(color));
    CommOptions options = read_config(config);
    if (!config) options.blocking = parent->blocking;  // children inherit the parent's mode
    ncclComm* child = start_split(parent, color, key, options);
    if (!child) {
      *newcomm = nullptr;
      return ncclSuccess;
    }
    return finish_create(child, newcomm);
  });
}

NCCL_EXPORT ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
                                        ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  return guarded("ncclCommShrink", [&] {
    ncclComm* parent = checked_comm(comm);
    require(newcomm != nullptr, ncclInvalidArgument, "newcomm pointer is NULL");
    require(excludeRanksCount >= 0 && (excludeRanksCount == 0 || excludeRanksList), ncclInvalidArgument,
            "excludeRanksList is NULL or its count is negative");
    require(shrinkFlags == NCCL_SHRINK_DEFAULT || shrinkFlags == NCCL_SHRINK_ABORT, ncclInvalidArgument,
            "unknown shrink flags " + std::to_string(shrinkFlags));
    CommOptions options = read_config(config);
    if (!config) options.blocking = parent->blocking;  // the new comm inherits the parent's mode
    std::vector<int> excluded(excludeRanksList, excludeRanksList + excludeRanksCount);
    return finish_create(start_shrink(parent, excluded, shrinkFlags, options), newcomm);
  });
}

NCCL_EXPORT ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags) {
  return guarded("ncclCommRevoke", [&] {
    ncclComm* c = checked_comm(comm);
    require(revokeFlags == NCCL_REVOKE_DEFAULT, ncclInvalidArgument, "revokeFlags must be NCCL_REVOKE_DEFAULT");
    wait_comm(c);
    require(c->id != 0, ncclInvalidUsage, "the communicator never initialised");
    {
      std::lock_guard<std::mutex> lock(c->mu);
      c->revoked = true;
    }
    // The coordinator fails the comm's in-flight operations; queued work then drains.
    c->client->submit(wire::CommRevoke{c->id, c->rank})->reply<wire::Ack>();
    return ncclSuccess;
  });
}

NCCL_EXPORT ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  return guarded("ncclCommFinalize", [&] {
    ncclComm* c = checked_comm(comm);
    {
      std::lock_guard<std::mutex> lock(c->mu);
      require(!c->revoked, ncclInvalidUsage, "ncclCommFinalize is invalid after ncclCommRevoke");
    }
    if (!c->blocking) {
      std::lock_guard<std::mutex> lock(c->mu);
      if (work_in_flight(c)) return ncclInProgress;
    } else {
      wait_idle(c);  // flushes what is queued on streams
    }
    return c->blocking ? wait_comm(c) : poll_comm(c);
  });
}

NCCL_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  return guarded("ncclCommDestroy", [&] {
    if (!comm) return ncclSuccess;  // NCCL accepts NULL here
    destroy_comm(checked_comm(comm), /*abort=*/false);
    return ncclSuccess;
  });
}

NCCL_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) {
  return guarded("ncclCommAbort", [&] {
    if (!comm) return ncclSuccess;
    destroy_comm(checked_comm(comm), /*abort=*/true);
    return ncclSuccess;
  });
}

NCCL_EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  return guarded("ncclCommGetAsyncError", [&] {
    ncclComm* c = checked_comm(comm);
    require(asyncError != nullptr, ncclInvalidArgument, "asyncError pointer is NULL");
    // A failure of queued work is recorded by its last part, which may sit parked on a stream
    // (enqueue.cpp) until somebody looks. This call looks: NCCL's documented wait polls it.
    bool queued;
    {
      std::lock_guard<std::mutex> lock(c->mu);
      queued = c->inflight > 0;
    }
    if (queued) cuda().poll_streams();
    *asyncError = poll_comm(c);
    return ncclSuccess;
  });
}

// Accessors wait for a pending init: the answer is only known once it has finished.
template <typename Get>
ncclResult_t comm_query(const char* fn, ncclComm_t comm, int* out, Get get) {
  return guarded(fn, [&] {
    ncclComm* c = checked_comm(comm);
    require(out != nullptr, ncclInvalidArgument, std::string(fn) + ": output pointer is NULL");
    ncclResult_t status = wait_comm(c);
    if (status != ncclSuccess) return status;
    *out = get(c);
    return ncclSuccess;
  });
}

NCCL_EXPORT ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  return comm_query("ncclCommCount", comm, count, [](ncclComm* c) { return c->nranks; });
}

NCCL_EXPORT ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  return comm_query("ncclCommCuDevice", comm, device, [](ncclComm* c) { return c->cuda_device; });
}

NCCL_EXPORT ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  return comm_query("ncclCommUserRank", comm, rank, [](ncclComm* c) { return c->rank; });
}

NCCL_EXPORT ncclResult_t ncclGroupStart() {
  return guarded("ncclGroupStart", [] {
    group_start();
    return ncclSuccess;
  });
}

NCCL_EXPORT ncclResult_t ncclGroupEnd() {
  return guarded("ncclGroupEnd", [] { return group_end(); });
}

namespace {

// The live PreMulSum operator `op` of the comm; throws when there is none.
PreMulSumOp& premulsum_op(ncclComm* c, int op) {
  const size_t index = static_cast<size_t>(op) - ncclNumOps;
  require(op >= ncclNumOps && index < c->premulsum_ops.size() && c->premulsum_ops[index].live, ncclInvalidArgument,
          [&] { return "reduction op " + std::to_string(op) + " was not created on this communicator, or was destroyed"; });
  return c->premulsum_ops[index];
}

// The one path every collective and point-to-point call takes: check the arguments as NCCL
// does, size the transfer, fix the sequence number in program order, and post it.
ncclResult_t post(wire::CollType type, const void* sendbuff, void* recvbuff, size_t count, int datatype, int op,
                  int root, ncclComm_t comm, cudaStream_t stream) {
  ncclComm* c = checked_comm(comm);
  {
    std::lock_guard<std::mutex> lock(c->mu);
    require(!c->revoked, ncclInvalidUsage, "the communicator was revoked");
    require(!c->suspended, ncclInvalidUsage, "the communicator is suspended (ncclCommSuspend); call ncclCommResume first");
  }
  const size_t elem = dtype_size(datatype);
  require(elem != 0, ncclInvalidArgument, [&] { return "invalid datatype " + std::to_string(datatype); });
  const PreMulSumOp* premul = nullptr;
  if (is_reduction(type) && op >= ncclNumOps) {
    premul = &premulsum_op(c, op);
    require(premul->dtype == datatype, ncclInvalidArgument, [&] {
      return "reduction op " + std::to_string(op) + " was created for " + dtype_name(premul->dtype) + ", not " +
             dtype_name(datatype);
    });
  } else if (is_reduction(type)) {
    require(op >= 0 && op < ncclNumOps, ncclInvalidArgument, [&] { return "invalid reduction op " + std::to_string(op); });
  }
  // The comm's size is only known once its init has finished.
  ncclResult_t state = wait_comm(c);
  if (state != ncclSuccess) {
    std::lock_guard<std::mutex> lock(c->mu);
    throw NcclError(state, c->async_message.empty() ? "the communicator did not initialise"
                                                    : "the communicator has failed: " + c->async_message);
  }
  const bool p2p = is_point_to_point(type);
  if (has_root(type) || p2p)
    require(root >= 0 && root < c->nranks, ncclInvalidArgument, [&] {
      return std::string(p2p ? "peer " : "root ") + std::to_string(root) + " is outside 0.." +
             std::to_string(c->nranks - 1);
    });
  CollShape shape;
  require(coll_shape(type, count, c->rank, root, c->nranks, &shape) &&
              std::max(shape.send_elems, shape.recv_elems) <= SIZE_MAX / elem,
          ncclInvalidArgument, [&] { return "count " + std::to_string(count) + " overflows the addressable size"; });
  require(shape.send_elems == 0 || sendbuff, ncclInvalidArgument, "sendbuff must not be NULL");
  require(shape.recv_elems == 0 || recvbuff, ncclInvalidArgument, "recvbuff must not be NULL");

  CollectiveCall call;
  call.comm = c;
  call.desc.comm_id = c->id;
  call.desc.rank = c->rank;
  call.desc.coll = type;
  call.desc.dtype = static_cast<uint8_t>(datatype);
  call.desc.op = !is_reduction(type) ? 0 : premul ? static_cast<uint8_t>(RedOp::kPreMulSum) : static_cast<uint8_t>(op);
  if (premul) {
    call.desc.scalar = premul->scalar;
    call.device_scalar = premul->device_scalar;
  }
  call.desc.root = has_root(type) || p2p ? root : -1;
  call.desc.count = count;
  call.sendbuff = sendbuff;
  call.recvbuff = recvbuff;
  call.send_bytes = shape.send_elems * elem;
  call.recv_bytes = shape.recv_elems * elem;
  call.stream = stream;
  // Nothing between these two can throw: from here on submit_collective owns the number, and
  // gives it back if the call cannot be submitted.
  take_sequence_number(call);
  submit_collective(call);
  return ncclSuccess;
}

}  // namespace

using wire::CollType;

NCCL_EXPORT ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                       ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return guarded("ncclAllReduce", [&] {
    return post(CollType::kAllReduce, sendbuff, recvbuff, count, raw(datatype), raw(op), -1, comm, stream);
  });
}

NCCL_EXPORT ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                       int root, ncclComm_t comm, cudaStream_t stream) {
  return guarded("ncclBroadcast", [&] {
    return post(CollType::kBroadcast, sendbuff, recvbuff, count, raw(datatype), ncclSum, root, comm, stream);
  });
}

NCCL_EXPORT ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                                   cudaStream_t stream) {
  return guarded("ncclBcast", [&] {
    return post(CollType::kBroadcast, buff, buff, count, raw(datatype), ncclSum, root, comm, stream);
  });
}

NCCL_EXPORT ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                    ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return guarded("ncclReduce", [&] {
    return post(CollType::kReduce, sendbuff, recvbuff, count, raw(datatype), raw(op), root, comm, stream);
  });
}

NCCL_EXPORT ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                       ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return guarded("ncclAllGather", [&] {
    return post(CollType::kAllGather, sendbuff, recvbuff, sendcount, raw(datatype), ncclSum, -1, comm, stream);
  });
}

NCCL_EXPORT ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                           cudaStream_t stream) {
  return guarded("ncclReduceScatter", [&] {
    return post(CollType::kReduceScatter, sendbuff, recvbuff, recvcount, raw(datatype), raw(op), -1, comm, stream);
  });
}

NCCL_EXPORT ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                      ncclComm_t comm, cudaStream_t stream) {
  return guarded("ncclAlltoAll", [&] {
    return post(CollType::kAlltoAll, sendbuff, recvbuff, count, raw(datatype), ncclSum, -1, comm, stream);
  });
}

NCCL_EXPORT ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                    int root, ncclComm_t comm, cudaStream_t stream) {
  return guarded("ncclGather", [&] {
    return post(CollType::kGather, sendbuff, recvbuff, count, raw(datatype), ncclSum, root, comm, stream);
  });
}

NCCL_EXPORT ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                                     int root, ncclComm_t comm, cudaStream_t stream) {
  return guarded("ncclScatter", [&] {
    return post(CollType::kScatter, sendbuff, recvbuff, count, raw(datatype), ncclSum, root, comm, stream);
  });
}

NCCL_EXPORT ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
                                  ncclComm_t comm, cudaStream_t stream) {
  return guarded("ncclSend", [&] {
    return post(CollType::kSend, sendbuff, nullptr, count, raw(datatype), ncclSum, peer, comm, stream);
  });
}

NCCL_EXPORT ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                                  cudaStream_t stream) {
  return guarded("ncclRecv", [&] {
    return post(CollType::kRecv, nullptr, recvbuff, count, raw(datatype), ncclSum, peer, comm, stream);
  });
}

NCCL_EXPORT ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
                                                  ncclScalarResidence_t residence, ncclComm_t comm) {
  return guarded("ncclRedOpCreatePreMulSum", [&] {
    ncclComm* c = checked_comm(comm);
    require(op && scalar, ncclInvalidArgument, "op and scalar must not be NULL");
    const int dtype = raw(datatype), where = raw(residence);
    const size_t elem = dtype_size(dtype);
    require(elem != 0, ncclInvalidArgument, "invalid datatype " + std::to_string(dtype));
    require(where == ncclScalarHostImmediate || where == ncclScalarDevice, ncclInvalidArgument,
            "invalid scalar residence " + std::to_string(where));
    PreMulSumOp made;
    made.dtype = dtype;
    made.live = true;
    if (where == ncclScalarHostImmediate)
      std::memcpy(&made.scalar, scalar, elem);
    else
      made.device_scalar = scalar;
    auto& ops = c->premulsum_ops;
    auto slot = std::find_if(ops.begin(), ops.end(), [](const PreMulSumOp& o) { return !o.live; });
    if (slot == ops.end()) slot = ops.insert(ops.end(), made);
    else *slot = made;
    const int made_op = static_cast<int>(ncclNumOps + (slot - ops.begin()));
    std::memcpy(op, &made_op, sizeof made_op);
    return ncclSuccess;
  });
}

NCCL_EXPORT ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  return guarded("ncclRedOpDestroy", [&] {
    ncclComm* c = checked_comm(comm);
    require(raw(op) >= ncclNumOps, ncclInvalidArgument,
            "built-in reduction op " + std::to_string(raw(op)) + " cannot be destroyed");
    premulsum_op(c, raw(op)).live = false;
    return ncclSuccess;
  });
}

NCCL_EXPORT ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* info) {
  return guarded("ncclGroupSimulateEnd", [&] {
    require(!info || info->magic == 0x74685283, ncclInvalidArgument,
            "ncclSimInfo_t was not initialised with NCCL_SIM_INFO_INITIALIZER (bad magic)");
    float modeled_us = group_simulate_end();
    if (info) info->estimatedTime = modeled_us;
    return ncclSuccess;
  });
}

// Logging reads NCCL_DEBUG on every message, so there is no cached state to reset.
NCCL_EXPORT void ncclResetDebugInit() {}
NCCL_EXPORT void ncclResetDebugInitInternal() {}

PNCCL_ALIAS(ncclGetVersion)
PNCCL_ALIAS(ncclGetErrorString)
PNCCL_ALIAS(ncclGetLastError)
PNCCL_ALIAS(ncclGetUniqueId)
PNCCL_ALIAS(ncclCommInitRankConfig)
PNCCL_ALIAS(ncclCommInitRank)
PNCCL_ALIAS(ncclCommInitRankScalable)
PNCCL_ALIAS(ncclCommInitAll)
PNCCL_ALIAS(ncclCommSplit)
PNCCL_ALIAS(ncclCommFinalize)
PNCCL_ALIAS(ncclCommShrink)
PNCCL_ALIAS(ncclCommRevoke)
PNCCL_ALIAS(ncclCommDestroy)
PNCCL_ALIAS(ncclCommAbort)
PNCCL_ALIAS(ncclCommGetAsyncError)
PNCCL_ALIAS(ncclCommCount)
PNCCL_ALIAS(ncclCommCuDevice)
PNCCL_ALIAS(ncclCommUserRank)
PNCCL_ALIAS(ncclGroupStart)
PNCCL_ALIAS(ncclGroupEnd)
PNCCL_ALIAS(ncclAllReduce)
PNCCL_ALIAS(ncclBroadcast)
PNCCL_ALIAS(ncclBcast)
PNCCL_ALIAS(ncclReduce)
PNCCL_ALIAS(ncclAllGather)
PNCCL_ALIAS(ncclReduceScatter)
PNCCL_ALIAS(ncclAlltoAll)
PNCCL_ALIAS(ncclGather)
PNCCL_ALIAS(ncclScatter)
PNCCL_ALIAS(ncclSend)
PNCCL_ALIAS(ncclRedOpCreatePreMulSum)
PNCCL_ALIAS(ncclRedOpDestroy)
PNCCL_ALIAS(ncclGroupSimulateEnd)
PNCCL_ALIAS(ncclRecv)
PNCCL_ALIAS(ncclResetDebugInit)

