// Fills the bridge table (fake_cuda_bridge.h) and exports fakegpu_cuda_bridge. The table's
// C types meet the runtime's C++ ones here, and only here.
#include "bridge.h"

#include "activity.h"
#include "context_memory.h"
#include "cuda_bridge_lookup.h"
#include "devices.h"
#include "kernel_registry.h"
#include "memory_ledger.h"
#include "op_totals.h"
#include "stream_ops.h"
#include "streams.h"

namespace fakegpu::cuda {
namespace {

// A clock handed out through the table is one of the runtime's ModelClocks.
ModelClock& clock_of(fakegpu_stream_clock* clock) { return *reinterpret_cast<ModelClock*>(clock); }
fakegpu_stream_clock* handle_of(ModelClock& clock) { return reinterpret_cast<fakegpu_stream_clock*>(&clock); }

int drain_stream(void* stream) { return fakegpu_cuda_drain_stream(static_cast<cudaStream_t>(stream)); }

// The clock passed to fn is that of the work the runtime is running when it calls fn: the
// stream's own, or for a graph replay the clock of the stream the graph was launched on.
std::function<void()> clocked_call(fakegpu_clocked_host_fn fn, void* user) {
  if (!fn) throw cudaErrorInvalidValue;
  return as_host_function([fn, user] { fn(user, handle_of(*running_clock())); });
}

int launch_clocked_host_func(void* stream, fakegpu_clocked_host_fn fn, void* user) {
  return guarded([&] { submit(static_cast<cudaStream_t>(stream), clocked_call(fn, user)); });
}

int start_clocked_host_func(void* stream, fakegpu_clocked_host_fn start, fakegpu_clocked_host_fn finish,
                            int (*ready)(void*), void* user) {
  return guarded([&] {
    std::function<bool()> probe;
    if (ready) probe = [ready, user] { return ready(user) != 0; };
    submit_started(static_cast<cudaStream_t>(stream), clocked_call(start, user), clocked_call(finish, user),
                   std::move(probe));
  });
}

fakegpu_stream_clock* legacy_clock() { return handle_of(legacy_stream_clock()); }

double modeled_now(fakegpu_stream_clock* clock, uint64_t* track) {
  ModelClock& c = clock_of(clock);
  if (track) *track = track_of(c);
  return c.now_ns() / 1e3;
}

void collective_done_on(fakegpu_stream_clock* clock, double ready_us, double end_us) {
  collective_done(clock_of(clock), ready_us, end_us);
}

size_t take_activity_slices(fakegpu_activity_slice* out, size_t max, size_t min_pending, uint64_t* dropped) {
  return take_activity(wire_slices(out), max, min_pending, dropped);
}

int device_identity_of(int device, char name[256], unsigned char uuid[16], uint64_t* memory_bytes) {
  return device_identity(runtime_device(device), name, uuid, memory_bytes);
}

int context_active(int device) { return primary_context_active(runtime_device(device)) ? 1 : 0; }

uint64_t launches() { return kernel_launches(); }

int charge_memory(int device, int part, int64_t bytes) {
  device = runtime_device(device);
  return guarded([&] {
    const VirtualDevice* d = device_at(device);
    if (!d || part < 0 || part >= FAKEGPU_MEMORY_PART_COUNT) throw cudaErrorInvalidValue;
    if (bytes < 0)
      MemoryLedger::instance().credit(device, part, static_cast<uint64_t>(-bytes));
    else if (!MemoryLedger::instance().charge(device, part, static_cast<uint64_t>(bytes), d->memory_bytes))
      throw cudaErrorMemoryAllocation;
  });
}

size_t memory_figures(fakegpu_memory_figures* out, size_t max) { return MemoryLedger::instance().figures(out, max); }

int stream_wait_value32(void* stream, const uint32_t* flag, uint32_t value) {
  return guarded([&] {
    if (!flag) throw cudaErrorInvalidValue;
    submit(static_cast<cudaStream_t>(stream), [flag, value] { wait_for_flag(flag, value); });
  });
}

size_t memory_samples(int device, fakegpu_memory_sample* out, size_t max) {
  return MemoryLedger::instance().samples(runtime_device(device), out, max);
}

int create_vmm(size_t bytes, int device, uint64_t* handle) { return vmm_create(bytes, runtime_device(device), handle); }
uint64_t memory_used(int device) { return device_memory_used(runtime_device(device)); }
int library_loaded(int device, int library) { return load_library(runtime_device(device), library); }

constexpr fakegpu_cuda_bridge_table kTable = {
    FAKEGPU_CUDA_BRIDGE_VERSION,
    sizeof(fakegpu_cuda_bridge_table),
    drain_stream,
    launch_clocked_host_func,
    legacy_clock,
    modeled_now,
    collective_done_on,
    take_activity_slices,
    find_segment,
    allocation_of,
    device_identity_of,
    context_active,
    launches,
    start_clocked_host_func,
    kick_streams,
    poll_streams,
    vmm_reserve,
    vmm_free,
    create_vmm,
    vmm_release,
    vmm_map,
    vmm_unmap,
    vmm_granularity,
    memory_used,
    copy_op_totals,
    charge_memory,
    memory_figures,
    memory_samples,
    library_loaded,
    stream_wait_value32,
};

}  // namespace
}  // namespace fakegpu::cuda

FAKECUDA_API const fakegpu_cuda_bridge_table* fakegpu_cuda_bridge(unsigned version) {
  return version == FAKEGPU_CUDA_BRIDGE_VERSION ? &fakegpu::cuda::kTable : nullptr;
}
