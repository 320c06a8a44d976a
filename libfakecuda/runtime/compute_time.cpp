// Modeled time of the work fakegpu's PyTorch hook runs on the CPU in place of CUDA kernels, and
// the table through which the hook reaches it (fake_torch_bridge.h). The kernel model
// (planner/kernel_model.h) prices each operator on the current device's profile: the host's
// modeled clock advances by the time eager PyTorch spends launching it, then the kernels' time is
// queued on the stream as an empty piece of work of that cost, so it advances the stream's clock
// in stream order, no earlier than the host launched it. A step whose kernels are shorter than
// their launches is host-bound, as on a GPU.
#include "fake_torch_bridge.h"

#include <dlfcn.h>

#include "bridge.h"
#include "context_memory.h"
#include "devices.h"
#include "kernel_model.h"
#include "memory_ledger.h"
#include "op_totals.h"
#include "runtime_state.h"
#include "stream_ops.h"
#include "streams.h"

using namespace fakegpu::cuda;

namespace {

void check(const fakegpu_op_facts& op) {
  if (op.kind < 0 || op.kind >= FAKEGPU_OP_KIND_COUNT || op.math < 0 || op.math >= FAKEGPU_MATH_COUNT ||
      op.flops < 0 || op.bytes < 0 || op.row_alignment < 1)
    throw cudaErrorInvalidValue;
  for (int64_t d : op.dims)
    if (d < 0) throw cudaErrorInvalidValue;
}

int64_t to_ns(double us) { return static_cast<int64_t>(us * 1e3); }

// The kernels PyTorch's CUDA backend would launch for the hook's operators load into the
// context when first used: PyTorch's own at the first operator, its backward and optimizer
// kernels at the first operator of a backward pass, cuBLAS's at the first product.
void load_kernels(const fakegpu_op_facts& op) {
  // The device this thread last loaded each library for: the ledger's own once-only check takes
  // a lock, which every operator need not.
  thread_local int loaded_for[FAKEGPU_LIBRARY_COUNT] = {-1, -1, -1, -1};
  const int device = current_device();
  auto load = [device](int library) {
    if (loaded_for[library] == device) return;
    load_library(device, library);
    loaded_for[library] = device;
  };
  load(FAKEGPU_LIBRARY_PYTORCH);
  if (op.flags & FAKEGPU_OP_IN_BACKWARD) load(FAKEGPU_LIBRARY_PYTORCH_TRAINING);
  if (op.kind == FAKEGPU_OP_GEMM) load(FAKEGPU_LIBRARY_CUBLAS);
}

// A time measured on a real GPU (fgpu --measure-kernels) for an operator's kernels.
struct Measured {
  double us;
  const fakegpu::GpuProfile* on;  // the GPU it was measured on; nullptr: the current device's own
};

// The measured time carried to the current device: scaled by the ratio of the kernel model's times
// here and on the measuring GPU, so that the model only says how the two GPUs differ for this
// operator, never how long it takes.
double carried_us(const Measured& measured, const fakegpu_op_facts& op, double modeled_here_us) {
  if (!measured.on || measured.on == current().profile) return measured.us;
  const double modeled_there_us = fakegpu::kernels::estimate(*measured.on, op, catalogue().host_speed).gpu_us;
  return modeled_there_us > 0 ? measured.us * modeled_here_us / modeled_there_us : measured.us;
}

// Queues the operator's kernels after its launch on the host; returns what it cost.
fakegpu_op_cost record(cudaStream_t stream, const fakegpu_op_facts& op, bool on_host,
                       const Measured* measured = nullptr) {
  check(op);
  if (on_host) load_kernels(op);
  fakegpu_op_cost cost = fakegpu::kernels::estimate(*current().profile, op, catalogue().host_speed);
  if (measured && cost.kernels > 0) cost.gpu_us = carried_us(*measured, op, cost.gpu_us);
  if (!on_host) cost.host_us = 0;
  host_clock().advance(to_ns(cost.host_us));
  const WorkKind kind = op.kind == FAKEGPU_OP_HOST_COPY ? kCopyWork : kKernelWork;
  if (cost.kernels > 0) submit(stream, [] {}, to_ns(cost.gpu_us), kind);
  return cost;
}

// An operator of the hook's, priced, queued and counted in the rank's table under `name`.
void record_named(void* stream, const char* name, const fakegpu_op_facts* op, fakegpu_op_cost* cost,
                  const Measured* measured) {
  if (!op) throw cudaErrorInvalidValue;
  const fakegpu_op_cost c = record(static_cast<cudaStream_t>(stream), *op, true, measured);
  if (name) count_op(name, *op, c, measured != nullptr);
  if (cost) *cost = c;
}

int record_op(void* stream, const char* name, const fakegpu_op_facts* op, fakegpu_op_cost* cost) {
  return guarded([&] { record_named(stream, name, op, cost, nullptr); });
}

int record_measured_op(void* stream, const char* name, const fakegpu_op_facts* op, double measured_us,
                       const char* measured_on, fakegpu_op_cost* cost) {
  return guarded([&] {
    if (!(measured_us >= 0)) throw cudaErrorInvalidValue;
    Measured measured{measured_us, nullptr};
    if (measured_on && !(measured.on = fakegpu::find_gpu_profile(measured_on))) {
      log_once("record_measured_op", (std::string("no GPU profile named '") + measured_on + "'").c_str());
      throw cudaErrorInvalidValue;
    }
    record_named(stream, name, op, cost, &measured);
  });
}

int host_event(int event, int64_t count) {
  return guarded([&] {
    if (event < FAKEGPU_HOST_BACKWARD_CALL || event > FAKEGPU_HOST_OPTIMIZER_STEP || count < 0)
      throw cudaErrorInvalidValue;
    const double us =
        fakegpu::kernels::host_event_us(static_cast<fakegpu::kernels::HostEvent>(event), count, catalogue().host_speed);
    host_clock().advance(to_ns(us));
  });
}

int matmul_share(int math, int row_alignment, double* share) {
  return guarded([&] {
    if (!share || math < 0 || math >= FAKEGPU_MATH_COUNT || row_alignment < 1) throw cudaErrorInvalidValue;
    *share = fakegpu::kernels::alignment_share(*current().profile, math, row_alignment);
  });
}

int drain(void* stream) { return fakegpu_cuda_drain_stream(static_cast<cudaStream_t>(stream)); }

int mark_step(void* stream, int begin) { return fakegpu_cuda_mark_step(static_cast<cudaStream_t>(stream), begin); }

int torch_memory(int device, uint64_t peak_allocated, uint64_t peak_reserved) {
  device = runtime_device(device);
  return guarded([&] {
    if (!device_at(device)) throw cudaErrorInvalidDevice;
    MemoryLedger::instance().torch_peaks(device, peak_allocated, peak_reserved);
  });
}

int torch_out_of_memory(int device, uint64_t bytes, const uint64_t* largest, int count) {
  device = runtime_device(device);
  return guarded([&] {
    if (!device_at(device)) throw cudaErrorInvalidDevice;
    if (count < 0 || (count > 0 && !largest)) throw cudaErrorInvalidValue;
    MemoryLedger::instance().torch_out_of_memory(device, bytes, largest, count);
  });
}

int stream_capturing(void* stream, int* capturing) {
  if (!capturing) return cudaErrorInvalidValue;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaError_t error = cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &status);
  *capturing = error == cudaSuccess && status == cudaStreamCaptureStatusActive;
  return error;
}

int launch_host_func(void* stream, void (*fn)(void*), void* user) {
  return cudaLaunchHostFunc(static_cast<cudaStream_t>(stream), fn, user);
}

// fakegpu's NCCL library holds the connection to the coordinator; the runtime does not link it
// (a program may load NVIDIA's), so its calls are found among the process's libraries when asked for.
using FlushActivity = void (*)();
FlushActivity nccl_flush() {
  return reinterpret_cast<FlushActivity>(dlsym(RTLD_DEFAULT, "fakegpu_nccl_flush_activity"));
}

int coordinator_linked(int* linked) {
  if (!linked) return cudaErrorInvalidValue;
  *linked = nccl_flush() != nullptr;
  return cudaSuccess;
}

int flush_to_coordinator() {
  if (FlushActivity flush = nccl_flush()) flush();  // it reports its own failures and never throws
  return cudaSuccess;
}

int describe_group(const char* name, int nranks, const int32_t* ranks) {
  using DescribeGroup = int (*)(const char*, int, const int32_t*);
  auto describe = reinterpret_cast<DescribeGroup>(dlsym(RTLD_DEFAULT, "fakegpu_nccl_describe_group"));
  if (!describe) return cudaErrorNotSupported;
  return describe(name, nranks, ranks) == 0 ? cudaSuccess : cudaErrorUnknown;  // it says why itself
}

constexpr fakegpu_torch_bridge_table kTable = {
    FAKEGPU_TORCH_BRIDGE_VERSION, sizeof(fakegpu_torch_bridge_table), drain, record_op, host_event, matmul_share,
    mark_step, torch_memory, torch_out_of_memory, stream_capturing, launch_host_func, coordinator_linked,
    flush_to_coordinator, describe_group, record_measured_op,
};

}  // namespace

FAKECUDA_API const fakegpu_torch_bridge_table* fakegpu_torch_bridge(unsigned version) {
  return version == FAKEGPU_TORCH_BRIDGE_VERSION ? &kTable : nullptr;
}

// For C programs (the timeline test): queues `bytes` of memory-bound work (math 0) or of a copy
// over the host link (math 6), priced as the hook's operators are but with no host time, and
// returns its modeled nanoseconds in *cost_ns.
FAKECUDA_API cudaError_t fakegpu_cuda_record_kernel(cudaStream_t stream, int math, double flops, double bytes,
                                                   int row_alignment, int64_t* cost_ns) {
  return guarded([&] {
    constexpr int kHostDeviceCopy = 6;
    if ((math != 0 && math != kHostDeviceCopy) || flops != 0) {
      log_once("fakegpu_cuda_record_kernel",
               "only memory-bound work (math 0) and host copies (math 6) are priced here; PyTorch's operators go "
               "through fakegpu_torch_bridge");
      throw cudaErrorInvalidValue;
    }
    fakegpu_op_facts op{};
    op.kind = math == kHostDeviceCopy ? FAKEGPU_OP_HOST_COPY : FAKEGPU_OP_MEMORY;
    op.bytes = bytes;
    op.row_alignment = row_alignment;
    const fakegpu_op_cost cost = record(stream, op, false);
    if (cost_ns) *cost_ns = to_ns(cost.gpu_us);
  });
}
