// cudaGetDriverEntryPoint and ...ByVersion: the driver functions a program asks the runtime
// for are fakegpu's own driver's (libcuda.so.1, built beside this runtime). A process that
// has loaded another libcuda.so.1 (NVIDIA's, on a GPU machine) gets no entry points from it:
// its functions know nothing of fake devices.
#include <dlfcn.h>

#include <string>

#include "runtime_state.h"

using namespace fakegpu::cuda;

namespace {

using GetProcAddress = int (*)(const char*, void**, int, unsigned long long, int*);

// fakegpu's driver: the one already loaded, or the one next to this library.
GetProcAddress driver_lookup() {
  static const GetProcAddress lookup = [] {
    void* handle = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (!handle || !dlsym(handle, "fakegpu_cuda_driver_is_fake")) {
      Dl_info info{};
      if (dladdr(reinterpret_cast<void*>(&driver_lookup), &info) && info.dli_fname) {
        std::string path = info.dli_fname;
        path = path.substr(0, path.rfind('/') + 1) + "libcuda.so.1";
        handle = dlopen(path.c_str(), RTLD_LAZY | RTLD_GLOBAL);
      }
    }
    if (!handle || !dlsym(handle, "fakegpu_cuda_driver_is_fake")) return static_cast<GetProcAddress>(nullptr);
    return reinterpret_cast<GetProcAddress>(dlsym(handle, "cuGetProcAddress_v2"));
  }();
  return lookup;
}

cudaError_t entry_point(const char* symbol, void** fn, unsigned long long flags,
                        cudaDriverEntryPointQueryResult* status) {
  return guarded([&] {
    if (!symbol || !fn) throw cudaErrorInvalidValue;
    *fn = nullptr;
    GetProcAddress lookup = driver_lookup();
    if (!lookup) {
      log_once("cudaGetDriverEntryPoint", "fakegpu's libcuda.so.1 is not beside the runtime; no driver entry points");
      if (status) *status = cudaDriverEntryPointSymbolNotFound;
      return;
    }
    int found = 1;
    lookup(symbol, fn, FAKEGPU_CUDART_MAJOR * 1000, flags, &found);
    if (status) *status = found == 0 ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
  });
}

}  // namespace

FAKECUDA_API cudaError_t cudaGetDriverEntryPoint(const char* symbol, void** fn, unsigned long long flags,
                                                 cudaDriverEntryPointQueryResult* status) {
  return entry_point(symbol, fn, flags, status);
}
FAKECUDA_API cudaError_t cudaGetDriverEntryPoint_ptsz(const char* symbol, void** fn, unsigned long long flags,
                                                      cudaDriverEntryPointQueryResult* status) {
  return entry_point(symbol, fn, flags, status);
}
FAKECUDA_API cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** fn, unsigned int /*version*/,
                                                          unsigned long long flags,
                                                          cudaDriverEntryPointQueryResult* status) {
  return entry_point(symbol, fn, flags, status);
}
FAKECUDA_API cudaError_t cudaGetDriverEntryPointByVersion_ptsz(const char* symbol, void** fn, unsigned int version,
                                                               unsigned long long flags,
                                                               cudaDriverEntryPointQueryResult* status) {
  return cudaGetDriverEntryPointByVersion(symbol, fn, version, flags, status);
}
