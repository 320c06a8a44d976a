// Group bookkeeping (ncclGroupStart/End): inside a group, a thread's calls are collected and
// handed to execute() at the outermost ncclGroupEnd, together with the communicators whose
// init or split the group must wait for.
#include "group.h"

#include <optional>
#include <utility>
#include <vector>

#include "execute.h"
#include "simulate.h"

namespace fakegpu::stub {
namespace {

struct GroupState {
  int depth = 0;
  std::vector<ncclComm*> pending_comms;
  std::vector<CollectiveCall> calls;
};
thread_local GroupState t_group;

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
  std::vector<CollectiveCall> one;
  try {
    if (in_group()) return t_group.calls.push_back(call);  // group_end submits it, or gives it back
    one.push_back(call);
  } catch (...) {
    release_sequence_number(call);
    throw;
  }
  execute(std::move(one));  // gives the number back itself when it cannot submit the call
}

ncclResult_t group_end() {
  auto group = close_group();
  if (!group) return ncclSuccess;
  execute(std::move(group->calls));
  return finish_pending_comms(*group);
}

float group_simulate_end() {
  auto group = close_group();
  if (!group) return 0.0f;
  // Nothing runs, so the sequence numbers these calls took must be unused again on every rank.
  release_sequence_numbers(group->calls);
  ncclResult_t status = finish_pending_comms(*group);
  if (status != ncclSuccess && status != ncclInProgress)
    throw NcclError(status, "a communicator of the simulated group failed to initialise");
  return static_cast<float>(simulate(group->calls));
}

}  // namespace fakegpu::stub
