#include "group.h"

#include <optional>
#include <vector>

#include "cuda_bridge.h"
#include "reduce.h"

namespace fakegpu::stub {
namespace {

struct GroupState {
  int depth = 0;
  std::vector<ncclComm*> pending_comms;
  std::vector<CollectiveCall> calls;
};
thread_local GroupState t_group;

// Device memory that is not host memory (hybrid mode) is staged through these buffers.
struct Staged {
  std::vector<uint8_t> send;
  std::vector<uint8_t> recv;
};

// Submits every call before waiting on any: a group may hold several ranks of one communicator,
// and none of them can finish until all have been posted.
void run_calls(const std::vector<CollectiveCall>& calls) {
  const CudaBridge& cu = cuda();
  std::vector<std::shared_ptr<Request>> requests;
  std::vector<Staged> staged(calls.size());
  ncclResult_t first_code = ncclSuccess;
  std::string first_error;
  auto note = [&](const NcclError& e) {
    if (first_code == ncclSuccess) first_code = e.code(), first_error = e.what();
  };
  try {
    for (size_t i = 0; i < calls.size(); ++i) {
      const CollectiveCall& c = calls[i];
      ncclResult_t status = wait_comm(c.comm);
      if (status != ncclSuccess)
        throw NcclError(ncclInvalidUsage,
                        "the communicator did not initialise (" + std::string(ncclGetErrorString(status)) + ")");
      cu.sync_stream(c.stream);  // the send buffer is complete once earlier work on the stream is
      wire::Collective desc = c.desc;
      if (c.device_scalar) cu.copy_to_host(&desc.scalar, c.device_scalar, dtype_size(desc.dtype));
      const void* send = c.sendbuff;
      void* recv = c.recvbuff;
      size_t send_bytes = c.send_bytes, recv_bytes = c.recv_bytes;
      // Buffers in shared fake device memory are named, not sent: the coordinator works on them
      // in place. Anything else travels in the frames.
      CudaBridge::Segment seg;
      if (send_bytes && cu.find_segment(send, send_bytes, &seg) && c.comm->client->share_segment(seg.id, seg.fd, seg.size)) {
        desc.send = {seg.id, seg.offset};
        send_bytes = 0;
      }
      if (recv_bytes && cu.find_segment(recv, recv_bytes, &seg) && c.comm->client->share_segment(seg.id, seg.fd, seg.size)) {
        desc.recv = {seg.id, seg.offset};
        recv_bytes = 0;
      }
      if (!cu.host_accessible()) {
        staged[i].send.resize(c.send_bytes);
        staged[i].recv.resize(c.recv_bytes);
        cu.copy_to_host(staged[i].send.data(), c.sendbuff, c.send_bytes);
        send = staged[i].send.data();
        recv = staged[i].recv.data();
      }
      requests.push_back(c.comm->client->submit(desc, send, send_bytes, recv, recv_bytes));
    }
  } catch (const NcclError& e) {
    note(e);  // stop posting, but still wait for what was posted: replies land in our buffers
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    try {
      requests[i]->reply<wire::CollectiveDone>();
      if (!cu.host_accessible()) cu.copy_to_device(calls[i].recvbuff, staged[i].recv.data(), calls[i].recv_bytes);
    } catch (const NcclError& e) {
      note(e);
    }
  }
  if (first_code != ncclSuccess) throw NcclError(first_code, first_error);
}

// Pops the outermost group off this thread; nullopt while nested groups remain open.
std::optional<GroupState> close_group() {
  if (t_group.depth == 0) throw NcclError(ncclInvalidUsage, "ncclGroupEnd without a matching ncclGroupStart");
  if (--t_group.depth > 0) return std::nullopt;
  GroupState group = std::move(t_group);
  t_group = GroupState{};
  return group;
}

ncclResult_t finish_pending_comms(const GroupState& group) {
  ncclResult_t result = ncclSuccess;
  for (ncclComm* comm : group.pending_comms) {
    ncclResult_t status = comm->blocking ? wait_comm(comm) : poll_comm(comm);
    if (status != ncclSuccess && result == ncclSuccess) result = status;
  }
  return result;
}

}  // namespace

bool in_group() { return t_group.depth > 0; }

void group_start() { ++t_group.depth; }

void group_add_pending_comm(ncclComm* comm) { t_group.pending_comms.push_back(comm); }

void submit_collective(const CollectiveCall& call) {
  if (in_group()) {
    t_group.calls.push_back(call);
    return;
  }
  run_calls({call});
}

ncclResult_t group_end() {
  auto group = close_group();
  if (!group) return ncclSuccess;
  run_calls(group->calls);
  return finish_pending_comms(*group);
}

float group_simulate_end() {
  auto group = close_group();
  if (!group) return 0.0f;
  // Nothing runs, so the sequence numbers these calls took must be unused again on every rank:
  // give them back, newest first.
  for (auto it = group->calls.rbegin(); it != group->calls.rend(); ++it) {
    ncclComm* c = it->comm;
    if (it->desc.coll == wire::CollType::kSend)
      --c->next_send_seq[it->desc.root];
    else if (it->desc.coll == wire::CollType::kRecv)
      --c->next_recv_seq[it->desc.root];
    else
      --c->next_seq;
  }
  finish_pending_comms(*group);
  return 0.0f;  // there is no cost model yet; documented as 0 until there is
}

}  // namespace fakegpu::stub
