#include "comm.h"

#include <algorithm>
#include <cstddef>
#include <unordered_set>

#include "activity_forward.h"
#include "comm_memory.h"
#include "cuda_bridge.h"
#include "env.h"
#include "identity.h"
#include "peer_path.h"

namespace fakegpu::stub {
namespace {

constexpr unsigned kConfigMagic = 0xcafebeef;

std::mutex g_registry_mu;
std::unordered_set<ncclComm*>& registry() {
  static auto* live = new std::unordered_set<ncclComm*>;
  return *live;
}

// True when `field` of the caller's config lies within the size the caller declared.
template <typename Field>
bool has_field(const ncclConfig_t* config, const Field* field) {
  auto end = reinterpret_cast<const char*>(field) + sizeof(Field) - reinterpret_cast<const char*>(config);
  return static_cast<size_t>(end) <= config->size;
}

}  // namespace

CommOptions read_config(const ncclConfig_t* config) {
  CommOptions options;
  if (!config) return options;
  if (config->magic != kConfigMagic)
    throw NcclError(ncclInvalidArgument, "ncclConfig_t was not initialised with NCCL_CONFIG_INITIALIZER (bad magic)");
  if (has_field(config, &config->blocking) && config->blocking != NCCL_CONFIG_UNDEF_INT)
    options.blocking = config->blocking != 0;
  if (has_field(config, &config->commName) && config->commName) options.name = config->commName;
  return options;
}

ncclComm* checked_comm(ncclComm_t comm) {
  std::lock_guard<std::mutex> lock(g_registry_mu);
  if (!comm || !registry().count(comm))
    throw NcclError(ncclInvalidArgument, comm ? "invalid or destroyed communicator" : "NULL communicator");
  return comm;
}

void register_comm(ncclComm* comm) {
  std::lock_guard<std::mutex> lock(g_registry_mu);
  registry().insert(comm);
}

void unregister_comm(ncclComm* comm) {
  std::lock_guard<std::mutex> lock(g_registry_mu);
  registry().erase(comm);
}

ncclResult_t poll_comm(ncclComm* comm) {
  std::lock_guard<std::mutex> lock(comm->mu);
  // A revoked comm is in progress until its queued work has drained, then quiescent.
  if (comm->revoked) return work_in_flight(comm) ? ncclInProgress : ncclSuccess;
  if (!comm->pending || !comm->pending->ready()) return comm->async_error;
  try {
    if (comm->pending_kind == ncclComm::Pending::kInit) {
      auto done = comm->pending->reply<wire::CommInitDone>();
      comm->id = done.comm_id;
      comm->global_rank = done.global_rank;
      charge_comm_init(comm, done.memory);
    } else {
      auto done = comm->pending->reply<wire::CommSplitDone>();
      comm->id = done.comm_id;
      comm->nranks = done.nranks;
      comm->rank = done.rank;
      comm->global_rank = done.global_rank;
      charge_comm_init(comm, done.memory);
    }
    comm->async_error = ncclSuccess;
    adopt_peer_mailbox(comm);
    describe_comm(comm, comm->pending_kind == ncclComm::Pending::kInit ? "ncclCommInitRank" : "ncclCommSplit");
  } catch (const NcclError& e) {
    comm->async_error = e.code();
    warn(e.what());  // the coordinator's message already names the call
  }
  comm->pending.reset();
  comm->pending_kind = ncclComm::Pending::kNone;
  return comm->async_error;
}

ncclResult_t wait_comm(ncclComm* comm) {
  std::shared_ptr<Request> pending;
  {
    std::lock_guard<std::mutex> lock(comm->mu);
    pending = comm->pending;
  }
  if (pending) pending->wait();
  return poll_comm(comm);
}

ncclComm* start_init(int nranks, const ncclUniqueId& id, int rank, int cuda_device, const CommOptions& options) {
  // Every setting the stub reads, some only at the first collective, is checked here: a
  // malformed one fails the init (ncclInvalidArgument, naming it), not a later call.
  env::check(env::kStub);
  // In hybrid mode buffers are GPU memory: without a runtime to copy them, the stub would read
  // device pointers as host memory.
  if (env::get(env::kMode) == "hybrid" && !cuda().has_runtime())
    throw NcclError(ncclSystemError, "FAKEGPU_MODE=hybrid, but this process has no CUDA runtime that fakegpu can "
                                     "call (libcudart linked statically?): link libcudart dynamically");
  UniqueIdContents contents;
  try {
    contents = unpack_unique_id(id.internal);
  } catch (const EndpointError& e) {
    throw NcclError(ncclInvalidArgument, e.what());
  }
  auto client = Client::get(contents.endpoint);
  auto comm = std::make_unique<ncclComm>();
  comm->client = client;
  comm->nranks = nranks;
  comm->rank = rank;
  comm->cuda_device = cuda_device;
  comm->blocking = options.blocking;
  comm->name = options.name;
  wire::CommInit msg;
  msg.key = contents.key;
  msg.nranks = nranks;
  msg.rank = rank;
  msg.cuda_device = cuda_device;
  msg.comm_name = options.name;
  comm->pending = client->submit(msg);
  comm->pending_kind = ncclComm::Pending::kInit;
  comm->async_error = ncclInProgress;
  register_comm(comm.get());
  return comm.release();
}

namespace {

// A communicator made from parent by a split or shrink whose reply (CommSplitDone) is pending.
ncclComm* new_child(ncclComm* parent, std::shared_ptr<Request> request, const CommOptions& options) {
  auto comm = std::make_unique<ncclComm>();
  comm->client = parent->client;
  comm->cuda_device = parent->cuda_device;
  comm->blocking = options.blocking;
  comm->name = options.name;
  comm->pending = std::move(request);
  comm->pending_kind = ncclComm::Pending::kSplit;
  comm->async_error = ncclInProgress;
  register_comm(comm.get());
  return comm.release();
}

}  // namespace

ncclComm* start_split(ncclComm* parent, int color, int key, const CommOptions& options) {
  if (ncclResult_t state = wait_comm(parent); state != ncclSuccess) {
    if (parent->id == 0) throw NcclError(state, "the parent communicator failed to initialise");
    std::lock_guard<std::mutex> lock(parent->mu);
    throw NcclError(state, "the parent communicator has failed: " + parent->async_message);
  }
  wire::CommSplit msg;
  msg.parent_comm = parent->id;
  msg.rank = parent->rank;
  msg.split_index = parent->next_split++;
  msg.color = color;
  msg.key = key;
  auto request = parent->client->submit(msg);
  if (color == NCCL_SPLIT_NOCOLOR) {
    // This rank takes no part in any child, but the split still completes only when it has.
    request->reply<wire::CommSplitDone>();
    return nullptr;
  }
  return new_child(parent, request, options);
}

void set_async_error(ncclComm* comm, ncclResult_t code, const std::string& message) {
  std::lock_guard<std::mutex> lock(comm->mu);
  if (comm->revoked) return;  // operations stopped by the revoke are not failures
  if (comm->async_error == ncclSuccess || comm->async_error == ncclInProgress) {
    comm->async_error = code;
    comm->async_message = message;
  }
}

bool work_in_flight(const ncclComm* comm) {
  if (comm->inflight == 0) return false;
  cuda().kick_streams();  // the caller waits or polls for it, without synchronising with a stream
  return true;
}

void wait_idle(ncclComm* comm) {
  std::unique_lock<std::mutex> lock(comm->mu);
  if (work_in_flight(comm)) comm->idle.wait(lock, [&] { return comm->inflight == 0; });
}

ncclComm* start_shrink(ncclComm* parent, const std::vector<int>& excluded, int flags, const CommOptions& options) {
  wait_comm(parent);  // a parent in error is fine: shrinking is how survivors recover
  if (parent->id == 0) throw NcclError(ncclInvalidUsage, "ncclCommShrink: the parent communicator never initialised");
  wire::CommShrink msg;
  msg.parent_comm = parent->id;
  msg.rank = parent->rank;
  msg.shrink_index = parent->next_shrink++;
  msg.flags = flags;
  msg.excluded.assign(excluded.begin(), excluded.end());
  return new_child(parent, parent->client->submit(msg), options);  // answered like a split
}

void destroy_comm(ncclComm* comm, bool abort) {
  unregister_comm(comm);
  std::unique_ptr<ncclComm> owned(comm);
  // An abort must not wait: the init it interrupts may never complete. Work still queued on a
  // stream would touch the object, so then it is left allocated.
  if (abort) {
    poll_comm(comm);
    std::lock_guard<std::mutex> lock(comm->mu);
    if (work_in_flight(comm)) owned.release();
  } else {
    wait_comm(comm);
    wait_idle(comm);
  }
  release_comm_memory(comm);
  if (comm->id == 0) return;  // never joined: nothing to tell the coordinator
  comm->client->forget_peer_mailbox(comm->id);
  // With the coordinator gone there is nobody to tell; the local state is freed all the same,
  // also when it goes while being told.
  if (comm->client->connection_lost()) return;
  try {
    forward_activity(*comm->client, 0);  // the streams' log so far, while the job is surely still up
    forward_memory(*comm->client);
    auto request = comm->client->submit(wire::CommDestroy{comm->id, comm->rank});
    if (!abort) request->reply<wire::Ack>();
  } catch (const NcclError&) {
    if (!comm->client->connection_lost()) throw;
  }
}

}  // namespace fakegpu::stub
