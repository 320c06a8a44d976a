// A batch of collective calls that runs from a stream or a graph replay (see queued_batch.h).
#include "queued_batch.h"

#include <mutex>
#include <new>

#include "batch.h"

namespace fakegpu::stub {

InflightHold::InflightHold(const std::vector<CollectiveCall>& calls) {
  comms_.reserve(calls.size());  // the only step that can throw, before anything is counted
  for (const auto& c : calls) {
    std::lock_guard<std::mutex> lock(c.comm->mu);
    ++c.comm->inflight;
    comms_.push_back(c.comm);
  }
}

InflightHold::~InflightHold() {
  for (ncclComm* comm : comms_) {
    std::lock_guard<std::mutex> lock(comm->mu);
    if (--comm->inflight == 0) comm->idle.notify_all();
  }
}

void fail_batch(const std::vector<CollectiveCall>& calls, ncclResult_t code, const std::string& message) {
  warn(message);
  for (const auto& c : calls) set_async_error(c.comm, code, message);
}

// Nothing may escape: the exception would unwind into the CUDA runtime's worker thread.
void run_queued(const std::vector<CollectiveCall>& calls, StagingSet* staging, StreamClock clock) {
  LogDeviceScope device(calls.front().comm->cuda_device);
  try {
    run_batch(calls, staging, clock);
  } catch (const NcclError& e) {
    fail_batch(calls, e.code(), e.what());
  } catch (const std::bad_alloc&) {
    fail_batch(calls, ncclSystemError, "out of host memory while running a queued collective");
  } catch (const std::exception& e) {
    fail_batch(calls, ncclInternalError, std::string("internal error in a queued collective: ") + e.what());
  } catch (...) {
    fail_batch(calls, ncclInternalError, "unknown internal error in a queued collective");
  }
}

}  // namespace fakegpu::stub
