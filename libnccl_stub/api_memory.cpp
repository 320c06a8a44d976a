// Memory and registration entry points. fakegpu moves data without registered buffers, so a
// registration is only a handle the communicator checks on deregistration.
#include <cstring>
#include <string>

#include "comm.h"
#include "cuda_bridge.h"
#include "errors.h"
#include "export.h"

using namespace fakegpu::stub;

namespace {

void* register_buffer(ncclComm* comm, void* buff, size_t size) {
  if (!buff) throw NcclError(ncclInvalidArgument, "buffer is NULL");
  auto r = std::make_unique<Registration>(Registration{buff, size});
  void* handle = r.get();
  comm->registrations.emplace(handle, std::move(r));
  return handle;
}

void deregister(ncclComm* comm, const void* handle) {
  if (!comm->registrations.erase(handle))
    throw NcclError(ncclInvalidArgument, "handle was not registered with this communicator, or already deregistered");
}

}  // namespace

NCCL_EXPORT ncclResult_t ncclMemAlloc(void** ptr, size_t size) {
  return guarded("ncclMemAlloc", [&] {
    if (!ptr) throw NcclError(ncclInvalidArgument, "ptr is NULL");
    *ptr = cuda().allocate(size);
    return ncclSuccess;
  });
}

NCCL_EXPORT ncclResult_t ncclMemFree(void* ptr) {
  return guarded("ncclMemFree", [&] {
    if (ptr) cuda().release(ptr);
    return ncclSuccess;
  });
}

NCCL_EXPORT ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  return guarded("ncclCommRegister", [&] {
    ncclComm* c = checked_comm(comm);
    if (!handle) throw NcclError(ncclInvalidArgument, "handle pointer is NULL");
    *handle = register_buffer(c, buff, size);
    return ncclSuccess;
  });
}

NCCL_EXPORT ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  return guarded("ncclCommDeregister", [&] {
    deregister(checked_comm(comm), handle);
    return ncclSuccess;
  });
}

NCCL_EXPORT ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
                                                int flags) {
  return guarded("ncclCommWindowRegister", [&] {
    ncclComm* c = checked_comm(comm);
    if (!win) throw NcclError(ncclInvalidArgument, "window pointer is NULL");
    if (flags & ~NCCL_WIN_COLL_SYMMETRIC) throw NcclError(ncclInvalidArgument, "unknown window flags " + std::to_string(flags));
    *win = static_cast<ncclWindow_t>(register_buffer(c, buff, size));
    return ncclSuccess;
  });
}

NCCL_EXPORT ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  return guarded("ncclCommWindowDeregister", [&] {
    deregister(checked_comm(comm), win);
    return ncclSuccess;
  });
}

PNCCL_ALIAS(ncclMemAlloc)
PNCCL_ALIAS(ncclMemFree)
PNCCL_ALIAS(ncclCommRegister)
PNCCL_ALIAS(ncclCommDeregister)
PNCCL_ALIAS(ncclCommWindowRegister)
PNCCL_ALIAS(ncclCommWindowDeregister)
