#include "runtime_calls.h"

#include <dlfcn.h>

#include "cuda_bridge_lookup.h"
#include "runtime_symbol.h"

namespace fakegpu::driver {

namespace {

// The fake runtime's own library, the one that answers for the bridge. The driver asks it by
// handle rather than by global name, as NVIDIA's driver keeps its own count of devices: a
// library preloaded over the runtime (hybrid mode's device sharing) changes what the program
// sees, not what the driver knows.
void* runtime_library() {
  Dl_info info{};
  void* bridge = runtime_symbol("fakegpu_cuda_bridge");
  if (!bridge || !dladdr(bridge, &info) || !info.dli_fname) return nullptr;
  return dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);  // loaded already; held for the process
}

// `name` in the runtime's library where it was found, otherwise among the process's symbols.
template <typename Fn>
void find_in(void* library, Fn*& fn, const char* name) {
  void* sym = library ? dlsym(library, name) : nullptr;
  fn = reinterpret_cast<Fn*>(sym ? sym : runtime_symbol(name));
}

RuntimeCalls resolve() {
  RuntimeCalls r;
  r.bridge = find_cuda_bridge(kRuntimeCaller);
  // NVIDIA's runtime has the cuda* names too; the driver only ever talks to fakegpu's.
  if (!r.bridge) return r;
  void* const library = runtime_library();
  auto find = [library](auto*& fn, const char* name) { find_in(library, fn, name); };
  find(r.get_device_count, "cudaGetDeviceCount");
  find(r.get_device, "cudaGetDevice");
  find(r.set_device, "cudaSetDevice");
  find(r.device_get_attribute, "cudaDeviceGetAttribute");
  find(r.device_get_pci_bus_id, "cudaDeviceGetPCIBusId");
  find(r.device_synchronize, "cudaDeviceSynchronize");
  find(r.driver_get_version, "cudaDriverGetVersion");
  find(r.mem_get_info, "cudaMemGetInfo");
  find(r.malloc, "cudaMalloc");
  find(r.free, "cudaFree");
  find(r.memcpy, "cudaMemcpy");
  find(r.memcpy_async, "cudaMemcpyAsync");
  find(r.memset_async, "cudaMemsetAsync");
  find(r.launch_host_func, "cudaLaunchHostFunc");
  find(r.stream_synchronize, "cudaStreamSynchronize");
  return r;
}

}  // namespace

const RuntimeCalls& runtime() {
  static const RuntimeCalls calls = resolve();
  return calls;
}

bool runtime_loaded() { return runtime().bridge != nullptr; }

}  // namespace fakegpu::driver
