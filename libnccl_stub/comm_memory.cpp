#include "comm_memory.h"

#include <string>

#include "comm.h"
#include "cuda_bridge.h"
#include "errors.h"

namespace fakegpu::stub {
namespace {

// Whole MiB, rounded up, for messages.
std::string mib(uint64_t bytes) { return std::to_string((bytes + (uint64_t{1} << 20) - 1) >> 20); }

// False when the GPU has no room; the runtime's ledger notes the refusal.
bool charge(ncclComm* comm, uint64_t bytes) {
  if (bytes == 0) return true;
  switch (cuda().charge_memory(comm->cuda_device, FAKEGPU_MEMORY_NCCL, static_cast<int64_t>(bytes))) {
    case CudaBridge::Charge::kNoRoom: return false;
    case CudaBridge::Charge::kDone: comm->memory.charged += bytes; return true;
    case CudaBridge::Charge::kNotCounted: return true;
  }
  return true;
}

void charge_or_warn(ncclComm* comm, uint64_t bytes, const char* what) {
  if (!charge(comm, bytes))
    warn("communicator " + std::to_string(comm->id) + ": NCCL's " + what + " (" + mib(bytes) +
         " MiB) do not fit in GPU " + std::to_string(comm->cuda_device) + "'s free memory");
}

}  // namespace

void charge_comm_init(ncclComm* comm, const wire::NcclMemory& plan) {
  CommMemory& m = comm->memory;
  std::lock_guard<std::mutex> lock(m.mu);
  m.plan = plan;
  cuda().load_library(comm->cuda_device, FAKEGPU_LIBRARY_NCCL);
  if (!charge(comm, plan.init))
    throw NcclError(ncclSystemError, "NCCL's buffers for communicator " + std::to_string(comm->id) + " (" +
                                         mib(plan.init) + " MiB) do not fit in GPU " +
                                         std::to_string(comm->cuda_device) + "'s free memory: out of memory");
}

void charge_connections(ncclComm* comm, const wire::Collective& call, const wire::CollectiveDone& done) {
  CommMemory& m = comm->memory;
  const bool p2p = call.coll == wire::CollType::kSend || call.coll == wire::CollType::kRecv;
  if (!p2p && !(done.connects & ~m.connected.load(std::memory_order_acquire))) return;
  std::lock_guard<std::mutex> lock(m.mu);
  if (p2p) {
    const bool sending = call.coll == wire::CollType::kSend;
    if (m.peers.emplace(call.root, sending).second)
      charge_or_warn(comm, sending ? done.p2p_send_bytes : done.p2p_recv_bytes, "send/recv buffers");
    bool& pool = sending ? m.pool_sent : m.pool_received;
    if (done.p2p_pool_bytes && !pool) {
      pool = true;
      charge_or_warn(comm, done.p2p_pool_bytes, "shared send/recv pool");
    }
    return;
  }
  const uint8_t fresh = done.connects & ~m.connected.load(std::memory_order_relaxed);
  if (!fresh) return;
  m.connected.fetch_or(fresh, std::memory_order_release);
  const uint64_t pieces[] = {m.plan.ring, m.plan.tree, m.plan.nvls};
  for (int bit = 0; bit < 3; ++bit)
    if (fresh & (1u << bit)) charge_or_warn(comm, pieces[bit], "connection buffers");
}

void release_comm_memory(ncclComm* comm) {
  CommMemory& m = comm->memory;
  std::lock_guard<std::mutex> lock(m.mu);
  if (m.charged) cuda().charge_memory(comm->cuda_device, FAKEGPU_MEMORY_NCCL, -static_cast<int64_t>(m.charged));
  m.charged = 0;
}

}  // namespace fakegpu::stub
