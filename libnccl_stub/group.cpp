#include "group.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "activity_forward.h"
#include "cuda_bridge.h"
#include "env.h"
#include "reduce.h"
#include "staging.h"

namespace fakegpu::stub {
namespace {

struct GroupState {
  int depth = 0;
  std::vector<ncclComm*> pending_comms;
  std::vector<CollectiveCall> calls;
};
thread_local GroupState t_group;

// FAKEGPU_PAYLOAD=none: timing-only runs. Operations are matched, checked and modeled, but no
// data moves, so neither staging nor buffers are needed.
bool payload_free() {
  static const bool none = env::get(env::kPayload) == "none";  // checked at init
  return none;
}

bool staging_needed() { return needs_staging() && !payload_free(); }

// Posts every call before waiting on any: a group may hold several ranks of one communicator,
// and none of them can finish until all have been posted. With staging, the calls read and
// write the host copies instead of the device buffers.
void run_batch(const std::vector<CollectiveCall>& calls, StagingSet* staging) {
  const CudaBridge& cu = cuda();
  uint64_t track = 0;
  const double ready_us = cu.modeled_now(&track);  // where the stream is on the modeled clock
  std::vector<std::shared_ptr<Request>> requests;
  ncclResult_t first_code = ncclSuccess;
  std::string first_error;
  auto note = [&](const NcclError& e) {
    if (first_code == ncclSuccess) first_code = e.code(), first_error = e.what();
  };
  try {
    for (size_t i = 0; i < calls.size(); ++i) {
      const CollectiveCall& c = calls[i];
      wire::Collective desc = c.desc;
      desc.ready_us = ready_us;
      desc.track = track;
      const void* send = c.sendbuff;
      void* recv = c.recvbuff;
      size_t send_bytes = c.send_bytes, recv_bytes = c.recv_bytes;
      if (payload_free()) {
        desc.flags |= wire::kNoPayload;
        send = recv = nullptr;
        send_bytes = recv_bytes = 0;
      } else {
        CudaBridge::Segment send_home, recv_home;  // fd -1: not in shared memory
        if (staging) {
          StagingSet::Entry& st = (*staging)[i];
          send = st.send.data, recv = st.recv.data;
          send_home = st.send.segment, recv_home = st.recv.segment;
          if (c.device_scalar) std::memcpy(&desc.scalar, st.scalar, dtype_size(desc.dtype));
        } else {
          if (c.device_scalar) std::memcpy(&desc.scalar, c.device_scalar, dtype_size(desc.dtype));
          if (send_bytes) cu.find_segment(send, send_bytes, &send_home);
          if (recv_bytes) cu.find_segment(recv, recv_bytes, &recv_home);
        }
        // A buffer in shared memory is named, not sent: the coordinator works on it in place.
        Client& client = *c.comm->client;
        auto in_place = [&](const CudaBridge::Segment& seg) {
          return seg.fd >= 0 && client.share_segment(seg.id, seg.fd, seg.size);
        };
        if (send_bytes && in_place(send_home)) {
          desc.send = {send_home.id, send_home.offset};
          send_bytes = 0;
        }
        if (recv_bytes && in_place(recv_home)) {
          desc.recv = {recv_home.id, recv_home.offset};
          recv_bytes = 0;
        }
      }
      requests.push_back(c.comm->client->submit(desc, send, send_bytes, recv, recv_bytes));
    }
  } catch (const NcclError& e) {
    note(e);  // stop posting, but still wait for what was posted: replies land in our buffers
  }
  // Calls of one batch run side by side: the stream waits for the one that ends last.
  double end_us = ready_us;
  for (auto& request : requests) {
    try {
      auto done = request->reply<wire::CollectiveDone>();
      end_us = std::max(end_us, (done.start_us >= 0 ? done.start_us : ready_us) + done.modeled_us);
    } catch (const NcclError& e) {
      note(e);
    }
  }
  if (first_code != ncclSuccess) throw NcclError(first_code, first_error);
  cu.collective_done(ready_us, end_us);
  forward_activity(*calls.front().comm->client, kActivityBatch);
}

// Runs calls now, from the calling thread: for the legacy stream, or without a runtime that can
// queue work. A failure is returned by the call and, as on a queued stream, also becomes the
// communicators' asynchronous error, which watchdogs such as torch's poll.
void run_now(const std::vector<CollectiveCall>& calls) {
  for (const auto& c : calls) cuda().sync_stream(c.stream);  // their inputs are complete once this is done
  try {
    if (!staging_needed()) return run_batch(calls, nullptr);
    StagingSet staging(calls);
    stage_inputs(calls, staging, std::nullopt);
    run_batch(calls, &staging);
    unstage_outputs(calls, staging, std::nullopt);
  } catch (const NcclError& e) {
    for (const auto& c : calls) set_async_error(c.comm, e.code(), e.what());
    throw;
  }
}

// Counts a batch's calls as in flight on their communicators for as long as it lives: finalize
// and destroy wait for the count to reach zero. The functions one enqueue queues share it, so
// the operation is over when the last of them has run and been destroyed, or at once when
// queuing failed and nothing holds it any more.
class InflightHold {
 public:
  explicit InflightHold(const std::vector<CollectiveCall>& calls) {
    comms_.reserve(calls.size());  // the only step that can throw, before anything is counted
    for (const auto& c : calls) {
      std::lock_guard<std::mutex> lock(c.comm->mu);
      ++c.comm->inflight;
      comms_.push_back(c.comm);
    }
  }
  ~InflightHold() {
    for (ncclComm* comm : comms_) {
      std::lock_guard<std::mutex> lock(comm->mu);
      if (--comm->inflight == 0) comm->idle.notify_all();
    }
  }
  InflightHold(const InflightHold&) = delete;
  InflightHold& operator=(const InflightHold&) = delete;

 private:
  std::vector<ncclComm*> comms_;
};

void fail_batch(const std::vector<CollectiveCall>& calls, ncclResult_t code, const std::string& message) {
  warn(message);
  for (const auto& c : calls) set_async_error(c.comm, code, message);
}

// Runs queued calls from their stream: a failure becomes the communicators' asynchronous error.
// Nothing may escape: the exception would unwind into the CUDA runtime's worker thread.
void run_queued(const std::vector<CollectiveCall>& calls, StagingSet* staging) {
  LogDeviceScope device(calls.front().comm->cuda_device);
  try {
    run_batch(calls, staging);
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

// Records calls into the graph a stream is capturing. Each replay of the graph runs them again,
// as new operations: they take their sequence numbers when they run, not now. The recorded
// function (and any staging buffers) belong to the graph: the runtime frees them when the graph
// and its instances are destroyed. (Giving the numbers back assumes the captured calls took the
// newest ones: a group that mixes captured and uncaptured streams on one communicator is not
// supported.)
void enqueue_captured(cudaStream_t stream, std::vector<CollectiveCall> batch) {
  const CudaBridge& cu = cuda();
  release_sequence_numbers(batch);
  auto calls = std::make_shared<const std::vector<CollectiveCall>>(std::move(batch));
  std::shared_ptr<StagingSet> staging;
  if (staging_needed()) {
    staging = std::make_shared<StagingSet>(*calls);
    stage_inputs(*calls, *staging, stream);
  }
  cu.enqueue_captured(stream, [calls, staging] {
    try {
      std::vector<CollectiveCall> run = *calls;
      for (auto& c : run) take_sequence_number(c);
      InflightHold hold(run);  // each replay is in flight until it has run
      run_queued(run, staging.get());
    } catch (const std::exception& e) {  // copying the calls or numbering them ran out of memory
      fail_batch(*calls, ncclSystemError, std::string("a graph replay could not start its collectives: ") + e.what());
    }
  });
  if (staging) unstage_outputs(*calls, *staging, stream);
}

using Batch = std::shared_ptr<const std::vector<CollectiveCall>>;

// Queues calls that share a stream: the collective runs when the stream reaches it, and the call
// returns at once. With staging, copies to and from host buffers are queued around it, so the
// host function itself never calls CUDA (which real CUDA forbids). A failure while running
// becomes the communicators' asynchronous error. `*submitted` turns true once the calls' sequence
// numbers are spoken for (the collective is queued, or captured calls gave theirs back): a
// failure before that leaves them for the caller to give back.
void enqueue(cudaStream_t stream, const Batch& calls, bool* submitted) {
  const CudaBridge& cu = cuda();
  if (cu.capturing(stream)) {
    *submitted = true;  // captured calls give their numbers back first thing
    return enqueue_captured(stream, *calls);
  }
  auto hold = std::make_shared<InflightHold>(*calls);
  std::shared_ptr<StagingSet> staging;
  if (staging_needed()) {
    staging = std::make_shared<StagingSet>(*calls);
    stage_inputs(*calls, *staging, stream);
  }
  // The operation is over once its results are in the caller's buffers: after the collective,
  // or after the copies back when staging, where the last function keeps the host buffers.
  cu.enqueue(stream, [calls, staging, hold] { run_queued(*calls, staging.get()); });
  *submitted = true;
  if (staging) {
    unstage_outputs(*calls, *staging, stream);
    cu.enqueue(stream, [staging, hold] {});
  }
}

// The calls that execute() could not submit, in the order they took their numbers.
std::vector<CollectiveCall> unsubmitted(const std::vector<CollectiveCall>& calls, const std::vector<bool>& submitted) {
  std::vector<CollectiveCall> left;
  for (size_t i = 0; i < calls.size(); ++i)
    if (!submitted[i]) left.push_back(calls[i]);
  return left;
}

// Runs or queues a set of calls, given in the order they took their sequence numbers: those on
// streams are queued per stream (first), those on the legacy stream run now. When queuing fails,
// the calls not yet submitted give their numbers back, so that the ranks' next calls still match.
void execute(std::vector<CollectiveCall> calls) {
  const CudaBridge& cu = cuda();
  std::vector<CollectiveCall> now;
  std::vector<std::pair<cudaStream_t, std::vector<size_t>>> by_stream;  // indices into calls
  for (size_t i = 0; i < calls.size(); ++i) {
    const cudaStream_t stream = calls[i].stream;
    if (CudaBridge::is_legacy(stream) || !cu.can_enqueue()) continue;
    auto it = std::find_if(by_stream.begin(), by_stream.end(), [&](const auto& b) { return b.first == stream; });
    if (it == by_stream.end()) it = by_stream.insert(by_stream.end(), {stream, {}});
    it->second.push_back(i);
  }
  std::vector<bool> submitted(calls.size(), false);
  try {
    for (const auto& [stream, indices] : by_stream) {
      auto batch = std::make_shared<std::vector<CollectiveCall>>();
      for (size_t i : indices) batch->push_back(calls[i]);
      bool queued = false;
      try {
        enqueue(stream, batch, &queued);
      } catch (...) {
        if (queued)
          for (size_t i : indices) submitted[i] = true;
        throw;
      }
      for (size_t i : indices) submitted[i] = true;
    }
    for (size_t i = 0; i < calls.size(); ++i)
      if (!submitted[i]) now.push_back(calls[i]);
  } catch (...) {
    release_sequence_numbers(unsubmitted(calls, submitted));
    throw;
  }
  if (!now.empty()) run_now(now);  // these count as submitted: a failure fails their communicators
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

// Sequence numbers change under the communicator's lock: a captured graph replaying on a
// stream takes them too.
void take_sequence_number(CollectiveCall& call) {
  ncclComm* c = call.comm;
  std::lock_guard<std::mutex> lock(c->mu);
  if (call.desc.coll == wire::CollType::kSend)
    call.desc.seq = ++c->next_send_seq[call.desc.root];  // from 1, as collectives count
  else if (call.desc.coll == wire::CollType::kRecv)
    call.desc.seq = ++c->next_recv_seq[call.desc.root];
  else
    call.desc.seq = c->next_seq++;
}

namespace {

// The counter a call's sequence number came from.
uint64_t& sequence_counter(const CollectiveCall& call) {
  ncclComm* c = call.comm;
  if (call.desc.coll == wire::CollType::kSend) return c->next_send_seq[call.desc.root];
  if (call.desc.coll == wire::CollType::kRecv) return c->next_recv_seq[call.desc.root];
  return c->next_seq;
}

// Gives one number back if it is still its counter's newest; a later call has taken one otherwise.
bool give_back(const CollectiveCall& call) {
  std::lock_guard<std::mutex> lock(call.comm->mu);
  uint64_t& counter = sequence_counter(call);
  // Send and recv counters hold the last number taken; the collective counter the next one.
  const bool p2p = call.desc.coll == wire::CollType::kSend || call.desc.coll == wire::CollType::kRecv;
  const uint64_t newest = p2p ? counter : counter - 1;
  if (call.desc.seq != newest) return false;
  --counter;
  return true;
}

}  // namespace

// A number that cannot be given back leaves a gap its peers will never see: every later call
// on the communicator would wait for a partner that never comes, so the communicator fails now.
void release_sequence_number(const CollectiveCall& call) {
  if (give_back(call)) return;
  const std::string message =
      "the communicator can no longer match its peers: an operation that was not submitted had taken "
      "sequence number " + std::to_string(call.desc.seq) + ", and later operations on the communicator "
      "were already submitted";
  warn(message);
  set_async_error(call.comm, ncclInternalError, message);
}

void release_sequence_numbers(const std::vector<CollectiveCall>& calls) {
  for (auto it = calls.rbegin(); it != calls.rend(); ++it) release_sequence_number(*it);
}

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
  // The coordinator prices the calls on each communicator's modeled channels; a
  // non-blocking communicator still initialising has none yet and adds nothing.
  std::map<Client*, wire::Simulate> per_client;
  for (const CollectiveCall& c : group->calls) {
    if (c.comm->id == 0) continue;
    wire::Simulate& sim = per_client[c.comm->client.get()];
    sim.ops.push_back({c.comm->id, c.comm->rank, c.desc.coll, c.desc.root, std::max(c.send_bytes, c.recv_bytes)});
  }
  double modeled_us = 0;
  for (auto& [client, sim] : per_client)
    modeled_us = std::max(modeled_us, client->submit(sim)->reply<wire::SimulateDone>().time_us);
  return static_cast<float>(modeled_us);
}

}  // namespace fakegpu::stub
