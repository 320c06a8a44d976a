// NCCL's device-side API (symmetric memory, GIN, LSA barriers) needs GPU kernels talking to
// each other directly, which fakegpu cannot provide. The host entry points exist, because
// programs probe them as weak symbols, and fail clearly. The team helpers answer truthfully
// for the world team; fakegpu's load-store and rail teams hold only the calling rank.
#include <mutex>
#include <set>
#include <string>

#include "comm.h"
#include "errors.h"
#include "export.h"

struct ncclTeam {
  int nRanks, rank, stride;
};
struct ncclDevCommRequirements;
struct ncclDevComm;
struct ncclDevResourceRequirements;
struct ncclGinBarrierHandle;
struct ncclLsaBarrierHandle;
struct ncclLLA2AHandle;

using namespace fakegpu::stub;

namespace {

void note_unsupported(const char* fn) {
  static std::mutex mu;
  static std::set<std::string> warned;
  std::lock_guard<std::mutex> lock(mu);
  if (warned.insert(fn).second)
    warn(std::string(fn) + ": NCCL's device API needs GPU-initiated communication, which fakegpu does not simulate");
}

ncclResult_t unsupported(const char* fn) {
  note_unsupported(fn);
  return ncclInvalidUsage;
}

ncclTeam self_team() { return {1, 0, 1}; }

}  // namespace

NCCL_EXPORT ncclResult_t ncclDevCommCreate(ncclComm_t, const ncclDevCommRequirements*, ncclDevComm*) {
  return unsupported("ncclDevCommCreate");
}
NCCL_EXPORT ncclResult_t ncclDevCommDestroy(ncclComm_t, const ncclDevComm*) { return unsupported("ncclDevCommDestroy"); }
NCCL_EXPORT ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t, ncclTeam, int, ncclGinBarrierHandle*,
                                                         ncclDevResourceRequirements*) {
  return unsupported("ncclGinBarrierCreateRequirement");
}
NCCL_EXPORT ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam, int, ncclLsaBarrierHandle*,
                                                         ncclDevResourceRequirements*) {
  return unsupported("ncclLsaBarrierCreateRequirement");
}
NCCL_EXPORT ncclResult_t ncclLLA2ACreateRequirement(int, int, ncclLLA2AHandle*, ncclDevResourceRequirements*) {
  return unsupported("ncclLLA2ACreateRequirement");
}
// Slots of 8 bytes needed to hold maxElts elements of maxEltSize bytes.
NCCL_EXPORT int ncclLLA2ACalcSlots(int maxElts, int maxEltSize) {
  note_unsupported("ncclLLA2ACalcSlots");
  if (maxElts <= 0 || maxEltSize <= 0) return 0;
  return static_cast<int>((static_cast<long long>(maxElts) * maxEltSize + 7) / 8);
}

NCCL_EXPORT ncclTeam ncclTeamWorld(ncclComm_t comm) {
  ncclTeam team = self_team();
  guarded("ncclTeamWorld", [&] {
    ncclComm* c = checked_comm(comm);
    if (wait_comm(c) == ncclSuccess) team = {c->nranks, c->rank, 1};
    return ncclSuccess;
  });
  return team;
}
NCCL_EXPORT ncclTeam ncclTeamLsa(ncclComm_t) { return self_team(); }
NCCL_EXPORT ncclTeam ncclTeamRail(ncclComm_t) { return self_team(); }

// A team is an arithmetic progression of world ranks through the caller's own.
NCCL_EXPORT int ncclTeamRankToWorld(ncclComm_t comm, ncclTeam team, int rank) {
  int world = -1;
  guarded("ncclTeamRankToWorld", [&] {
    ncclComm* c = checked_comm(comm);
    if (wait_comm(c) == ncclSuccess && rank >= 0 && rank < team.nRanks)
      world = c->rank + (rank - team.rank) * team.stride;
    return ncclSuccess;
  });
  return world;
}
NCCL_EXPORT int ncclTeamRankToLsa(ncclComm_t comm, ncclTeam team, int rank) {
  return ncclTeamRankToWorld(comm, team, rank) == ncclTeamRankToWorld(comm, team, team.rank) ? 0 : -1;
}

PNCCL_ALIAS(ncclDevCommCreate)
PNCCL_ALIAS(ncclDevCommDestroy)
PNCCL_ALIAS(ncclGinBarrierCreateRequirement)
PNCCL_ALIAS(ncclLsaBarrierCreateRequirement)
PNCCL_ALIAS(ncclLLA2ACreateRequirement)
PNCCL_ALIAS(ncclLLA2ACalcSlots)
PNCCL_ALIAS(ncclTeamWorld)
PNCCL_ALIAS(ncclTeamLsa)
PNCCL_ALIAS(ncclTeamRail)
PNCCL_ALIAS(ncclTeamRankToWorld)
PNCCL_ALIAS(ncclTeamRankToLsa)
