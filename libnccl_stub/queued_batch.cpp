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

namespace {

// Runs part of a queued batch. Nothing may escape: the exception would unwind into the CUDA
// runtime's thread. A failure is handed to `failed`.
template <typename Work, typename Failed>
void contained(const std::vector<CollectiveCall>& calls, Work work, Failed failed) {
  LogDeviceScope device(calls.front().comm->cuda_device);
  try {
    work();
  } catch (const NcclError& e) {
    failed(e.code(), e.what());
  } catch (const std::bad_alloc&) {
    failed(ncclSystemError, "out of host memory while running a queued collective");
  } catch (const std::exception& e) {
    failed(ncclInternalError, std::string("internal error in a queued collective: ") + e.what());
  } catch (...) {
    failed(ncclInternalError, "unknown internal error in a queued collective");
  }
}

}  // namespace

void run_queued(const std::vector<CollectiveCall>& calls, StagingSet* staging, StreamClock clock) {
  contained(calls, [&] { run_batch(calls, staging, clock); },
            [&](ncclResult_t code, const std::string& message) { fail_batch(calls, code, message); });
}

void start_queued(const std::vector<CollectiveCall>& calls, StagingSet* staging, StreamClock clock,
                  PostedBatch* posted) {
  contained(calls, [&] { post_batch(calls, staging, clock, posted); },
            [&](ncclResult_t code, const std::string& message) { posted->note(code, message); });
}

void finish_queued(const std::vector<CollectiveCall>& calls, StreamClock clock, PostedBatch* posted) {
  contained(calls, [&] { finish_batch(calls, clock, *posted); },
            [&](ncclResult_t code, const std::string& message) { fail_batch(calls, code, message); });
}

}  // namespace fakegpu::stub
