// Runs one batch of collective calls against the coordinator (see batch.h).
#include "batch.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "activity_forward.h"
#include "cuda_bridge.h"
#include "env.h"
#include "reduce.h"

namespace fakegpu::stub {

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
void run_batch(const std::vector<CollectiveCall>& calls, StagingSet* staging, StreamClock clock) {
  const CudaBridge& cu = cuda();
  uint64_t track = 0;
  const double ready_us = cu.modeled_now(clock, &track);  // where the stream is on the modeled clock
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
  cu.collective_done(clock, ready_us, end_us);
  forward_activity(*calls.front().comm->client, kActivityBatch);
}

}  // namespace fakegpu::stub
