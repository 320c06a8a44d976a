#include "runtime_calls.h"

#include "cuda_bridge_lookup.h"
#include "runtime_symbol.h"

namespace fakegpu::driver {

namespace {

template <typename Fn>
void find(Fn*& fn, const char* name) {
  fn = reinterpret_cast<Fn*>(runtime_symbol(name));
}

RuntimeCalls resolve() {
  RuntimeCalls r;
  r.bridge = find_cuda_bridge(kRuntimeCaller);
  // NVIDIA's runtime has the cuda* names too; the driver only ever talks to fakegpu's.
  if (!r.bridge) return r;
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
