// Entry points NCCL added in 2.29 and 2.30. Suspend/resume and the memory statistics are
// real: a fakegpu communicator holds no GPU memory, so there is nothing to release, but the
// suspended state is kept and enforced. Growing a communicator and one-sided signals are not
// simulated; they fail with ncclInvalidUsage and one WARN line naming the call.
#include <mutex>
#include <set>
#include <string>

#include "comm.h"
#include "errors.h"
#include "export.h"

using namespace fakegpu::stub;

namespace {

ncclResult_t not_simulated(const char* fn, const char* what) {
  static std::mutex mu;
  static std::set<std::string> warned;
  std::lock_guard<std::mutex> lock(mu);
  if (warned.insert(fn).second) warn(std::string(fn) + ": fakegpu does not simulate " + what);
  return ncclInvalidUsage;
}

}  // namespace

NCCL_EXPORT ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags) {
  return guarded("ncclCommSuspend", [&] {
    ncclComm* c = checked_comm(comm);
    if (flags & ~NCCL_SUSPEND_MEM) throw NcclError(ncclInvalidArgument, "unknown flags " + std::to_string(flags));
    wait_idle(c);  // NCCL suspends only once the communicator's work has finished
    std::lock_guard<std::mutex> lock(c->mu);
    if (c->suspended) throw NcclError(ncclInvalidUsage, "the communicator is already suspended");
    c->suspended = true;
    return ncclSuccess;
  });
}

NCCL_EXPORT ncclResult_t ncclCommResume(ncclComm_t comm) {
  return guarded("ncclCommResume", [&] {
    ncclComm* c = checked_comm(comm);
    std::lock_guard<std::mutex> lock(c->mu);
    if (!c->suspended) throw NcclError(ncclInvalidUsage, "the communicator is not suspended");
    c->suspended = false;
    return ncclSuccess;
  });
}

// fakegpu's communicators keep their buffers in host memory, so the GPU memory NCCL tracks
// is zero; the suspended flag is the communicator's.
NCCL_EXPORT ncclResult_t ncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value) {
  return guarded("ncclCommMemStats", [&] {
    ncclComm* c = checked_comm(comm);
    if (!value) throw NcclError(ncclInvalidArgument, "value is NULL");
    switch (stat) {
      case ncclStatGpuMemSuspend:
      case ncclStatGpuMemPersist:
      case ncclStatGpuMemTotal:
        *value = 0;
        break;
      case ncclStatGpuMemSuspended: {
        std::lock_guard<std::mutex> lock(c->mu);
        *value = c->suspended ? 1 : 0;
        break;
      }
      default:
        throw NcclError(ncclInvalidArgument, "unknown statistic " + std::to_string(static_cast<int>(stat)));
    }
    return ncclSuccess;
  });
}

NCCL_EXPORT ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void** outUserPtr) {
  return guarded("ncclWinGetUserPtr", [&] {
    ncclComm* c = checked_comm(comm);
    if (!outUserPtr) throw NcclError(ncclInvalidArgument, "outUserPtr is NULL");
    auto it = c->registrations.find(win);
    if (it == c->registrations.end())
      throw NcclError(ncclInvalidArgument, "the window was not registered with this communicator");
    *outUserPtr = it->second->buffer;
    return ncclSuccess;
  });
}

NCCL_EXPORT ncclResult_t ncclCommGetUniqueId(ncclComm_t, ncclUniqueId*) {
  return not_simulated("ncclCommGetUniqueId", "growing a communicator (ncclCommGrow)");
}
NCCL_EXPORT ncclResult_t ncclCommGrow(ncclComm_t, int, const ncclUniqueId*, int, ncclComm_t*, ncclConfig_t*) {
  return not_simulated("ncclCommGrow", "growing a communicator");
}
NCCL_EXPORT ncclResult_t ncclPutSignal(const void*, size_t, ncclDataType_t, int, ncclWindow_t, size_t, int, int,
                                       unsigned int, ncclComm_t, cudaStream_t) {
  return not_simulated("ncclPutSignal", "one-sided operations on windows");
}
NCCL_EXPORT ncclResult_t ncclSignal(int, int, int, unsigned int, ncclComm_t, cudaStream_t) {
  return not_simulated("ncclSignal", "one-sided operations on windows");
}
NCCL_EXPORT ncclResult_t ncclWaitSignal(int, ncclWaitSignalDesc_t*, ncclComm_t, cudaStream_t) {
  return not_simulated("ncclWaitSignal", "one-sided operations on windows");
}
NCCL_EXPORT ncclResult_t ncclGetLsaMultimemDevicePointer(ncclWindow_t, size_t, void**) {
  return not_simulated("ncclGetLsaMultimemDevicePointer", "multimem (NVLS) device pointers");
}
NCCL_EXPORT ncclResult_t ncclGetPeerDevicePointer(ncclWindow_t, size_t, int, void**) {
  return not_simulated("ncclGetPeerDevicePointer", "load-store access to peers' windows");
}

PNCCL_ALIAS(ncclCommSuspend)
PNCCL_ALIAS(ncclCommResume)
PNCCL_ALIAS(ncclCommMemStats)
PNCCL_ALIAS(ncclWinGetUserPtr)
PNCCL_ALIAS(ncclCommGetUniqueId)
PNCCL_ALIAS(ncclCommGrow)
PNCCL_ALIAS(ncclPutSignal)
PNCCL_ALIAS(ncclSignal)
PNCCL_ALIAS(ncclWaitSignal)
PNCCL_ALIAS(ncclGetLsaMultimemDevicePointer)
PNCCL_ALIAS(ncclGetPeerDevicePointer)
