// Kernels: the registration calls nvcc-generated code makes at start-up, and launches. There is
// no GPU to run device code on, so a launch is checked like CUDA checks it, counted, and queued
// on its stream as an empty piece of work that keeps the stream's order. It takes no modeled
// time: fakegpu models communication, not compute.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "device_facts.h"
#include "devices.h"
#include "kernel_registry.h"
#include "runtime_state.h"
#include "stream_ops.h"

using namespace fakegpu::cuda;

namespace {

struct Registry {
  std::mutex mu;
  std::map<const void*, void**> functions;                   // host stub -> its module
  std::map<const void*, std::pair<size_t, void**>> variables;  // host shadow -> (size, module)
};
Registry& registry() {
  static auto* r = new Registry;  // never destroyed: modules unregister from static destructors
  return *r;
}

std::atomic<uint64_t> launches{0};

struct CallConfiguration {
  dim3 grid, block;
  size_t shared_mem;
  cudaStream_t stream;
};
thread_local std::vector<CallConfiguration> t_configurations;

void launch(const void* func, dim3 grid, dim3 block, size_t shared_mem, cudaStream_t stream) {
  if (!registered_function(func)) throw cudaErrorInvalidDeviceFunction;
  // The limits the device reports are the ones a launch is held to.
  const VirtualDevice& d = current();
  auto limit = [&](cudaDeviceAttr attr) { return static_cast<uint64_t>(*device_attribute(d, attr)); };
  const uint64_t threads = uint64_t(block.x) * block.y * block.z;
  if (!grid.x || !grid.y || !grid.z || !threads || threads > limit(cudaDevAttrMaxThreadsPerBlock) ||
      block.x > limit(cudaDevAttrMaxBlockDimX) || block.y > limit(cudaDevAttrMaxBlockDimY) ||
      block.z > limit(cudaDevAttrMaxBlockDimZ) || grid.x > limit(cudaDevAttrMaxGridDimX) ||
      grid.y > limit(cudaDevAttrMaxGridDimY) || grid.z > limit(cudaDevAttrMaxGridDimZ))
    throw cudaErrorInvalidConfiguration;
  if (shared_mem > limit(cudaDevAttrMaxSharedMemoryPerBlockOptin)) throw cudaErrorInvalidValue;
  submit(stream, [] { ++launches; });  // counted when it runs: graph replays count too
}

}  // namespace

namespace fakegpu::cuda {

bool registered_function(const void* host_fun) {
  std::lock_guard<std::mutex> lock(registry().mu);
  return registry().functions.count(host_fun) > 0;
}

bool registered_variable(const void* host_var, size_t* size) {
  std::lock_guard<std::mutex> lock(registry().mu);
  auto it = registry().variables.find(host_var);
  if (it == registry().variables.end()) return false;
  *size = it->second.first;
  return true;
}

uint64_t kernel_launches() { return launches.load(); }

}  // namespace fakegpu::cuda

// A module handle: one pointer-sized slot holding the fat binary's address.
FAKECUDA_API void** __cudaRegisterFatBinary(void* fat_cubin) { return new void*(fat_cubin); }

FAKECUDA_API void __cudaRegisterFatBinaryEnd(void** /*handle*/) {}

FAKECUDA_API void __cudaUnregisterFatBinary(void** handle) {
  {
    std::lock_guard<std::mutex> lock(registry().mu);
    auto& r = registry();
    for (auto it = r.functions.begin(); it != r.functions.end();) it = it->second == handle ? r.functions.erase(it) : std::next(it);
    for (auto it = r.variables.begin(); it != r.variables.end();)
      it = it->second.second == handle ? r.variables.erase(it) : std::next(it);
  }
  delete handle;
}

FAKECUDA_API char __cudaInitModule(void** /*handle*/) { return 1; }

FAKECUDA_API void __cudaRegisterFunction(void** handle, const char* host_fun, char* /*device_fun*/,
                                         const char* /*device_name*/, int /*thread_limit*/, uint3* /*tid*/,
                                         uint3* /*bid*/, dim3* /*block*/, dim3* /*grid*/, int* /*warp_size*/) {
  std::lock_guard<std::mutex> lock(registry().mu);
  registry().functions[host_fun] = handle;
}

FAKECUDA_API void __cudaRegisterVar(void** handle, char* host_var, char* /*device_address*/,
                                    const char* /*device_name*/, int /*ext*/, size_t size, int /*constant*/,
                                    int /*global*/) {
  std::lock_guard<std::mutex> lock(registry().mu);
  registry().variables[host_var] = {size, handle};
}

// A __managed__ variable: the runtime provides its storage and stores the address in the
// host's pointer.
FAKECUDA_API void __cudaRegisterManagedVar(void** handle, void** host_ptr_address, char* /*device_address*/,
                                           const char* /*device_name*/, int /*ext*/, size_t size, int /*constant*/,
                                           int /*global*/) {
  void* storage = ::operator new(size ? size : 1);
  std::memset(storage, 0, size);
  *host_ptr_address = storage;
  std::lock_guard<std::mutex> lock(registry().mu);
  registry().variables[storage] = {size, handle};
}

FAKECUDA_API unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shared_mem, cudaStream_t stream) {
  t_configurations.push_back({grid, block, shared_mem, stream});
  return 0;
}

FAKECUDA_API cudaError_t __cudaPopCallConfiguration(dim3* grid, dim3* block, size_t* shared_mem, void* stream) {
  if (t_configurations.empty()) return fail(cudaErrorMissingConfiguration);
  CallConfiguration c = t_configurations.back();
  t_configurations.pop_back();
  *grid = c.grid;
  *block = c.block;
  *shared_mem = c.shared_mem;
  *static_cast<cudaStream_t*>(stream) = c.stream;
  return cudaSuccess;
}

// CUDA 13 launches through a kernel handle; fakegpu's handle is the host stub's address.
FAKECUDA_API cudaError_t __cudaGetKernel(cudaKernel_t* kernel, const void* host_fun) {
  return guarded([&] {
    if (!kernel) throw cudaErrorInvalidValue;
    if (!registered_function(host_fun)) throw cudaErrorInvalidDeviceFunction;
    *kernel = reinterpret_cast<cudaKernel_t>(const_cast<void*>(host_fun));
  });
}

FAKECUDA_API cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void** /*args*/,
                                            size_t shared_mem, cudaStream_t stream) {
  return guarded([&] { launch(kernel, grid, block, shared_mem, stream); });
}

FAKECUDA_API cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t kernel, dim3 grid, dim3 block, void** /*args*/,
                                                 size_t shared_mem, cudaStream_t stream) {
  return guarded([&] { launch(kernel, grid, block, shared_mem, stream ? stream : cudaStreamPerThread); });
}

FAKECUDA_API cudaError_t cudaLaunchKernel(const void* func, dim3 grid, dim3 block, void** /*args*/, size_t shared_mem,
                                          cudaStream_t stream) {
  return guarded([&] { launch(func, grid, block, shared_mem, stream); });
}

FAKECUDA_API cudaError_t cudaLaunchKernel_ptsz(const void* func, dim3 grid, dim3 block, void** /*args*/,
                                               size_t shared_mem, cudaStream_t stream) {
  return guarded([&] { launch(func, grid, block, shared_mem, stream ? stream : cudaStreamPerThread); });
}

FAKECUDA_API cudaError_t cudaLaunchCooperativeKernel(const void* func, dim3 grid, dim3 block, void** /*args*/,
                                                     size_t shared_mem, cudaStream_t stream) {
  return guarded([&] { launch(func, grid, block, shared_mem, stream); });
}

// cudaLaunchConfig_t's leading fields: grid, block, dynamic shared memory, stream.
struct LaunchConfigHead {
  dim3 grid;
  dim3 block;
  size_t shared_mem;
  cudaStream_t stream;
};

FAKECUDA_API cudaError_t cudaLaunchKernelExC(const void* config, const void* func, void** /*args*/) {
  return guarded([&] {
    if (!config) throw cudaErrorInvalidValue;
    const auto* c = static_cast<const LaunchConfigHead*>(config);
    launch(func, c->grid, c->block, c->shared_mem, c->stream);
  });
}

FAKECUDA_API cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* attr, const void* func) {
  return guarded([&] {
    if (!attr) throw cudaErrorInvalidValue;
    if (!registered_function(func)) throw cudaErrorInvalidDeviceFunction;
    const VirtualDevice& d = current();
    const fakegpu::GpuProfile& p = *d.profile;
    std::memset(attr, 0, sizeof *attr);
    attr->maxThreadsPerBlock = *device_attribute(d, cudaDevAttrMaxThreadsPerBlock);
    attr->numRegs = 32;
    attr->ptxVersion = attr->binaryVersion = p.cc_major * 10 + p.cc_minor;
    attr->maxDynamicSharedSizeBytes = *device_attribute(d, cudaDevAttrMaxSharedMemoryPerBlock);
    attr->preferredShmemCarveout = -1;
  });
}

FAKECUDA_API cudaError_t cudaFuncSetAttribute(const void* func, int /*attr*/, int /*value*/) {
  return guarded([&] {
    if (!registered_function(func)) throw cudaErrorInvalidDeviceFunction;
  });
}

FAKECUDA_API cudaError_t cudaFuncSetCacheConfig(const void* func, int /*config*/) {
  return guarded([&] {
    if (!registered_function(func)) throw cudaErrorInvalidDeviceFunction;
  });
}

// Blocks of `block_size` threads that fit on one SM, limited by threads, the per-SM block cap
// and shared memory, as the occupancy calculator counts them.
FAKECUDA_API cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int* blocks, const void* func,
                                                                                int block_size, size_t shared_mem,
                                                                                unsigned int /*flags*/) {
  return guarded([&] {
    if (!blocks || block_size <= 0 || block_size > 1024) throw cudaErrorInvalidValue;
    if (!registered_function(func)) throw cudaErrorInvalidDeviceFunction;
    const fakegpu::GpuProfile& p = *current().profile;
    int warps = (block_size + 31) / 32;
    int by_threads = p.max_threads_per_sm / (warps * 32);
    int by_blocks = *device_attribute(current(), cudaDevAttrMaxBlocksPerMultiprocessor);
    int by_smem = shared_mem ? static_cast<int>((static_cast<size_t>(p.smem_per_sm_kib) << 10) / shared_mem) : by_blocks;
    *blocks = std::min({by_threads, by_blocks, by_smem});
  });
}

FAKECUDA_API cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, const void* func, int block_size,
                                                                       size_t shared_mem) {
  return cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(blocks, func, block_size, shared_mem, 0);
}
