// Error strings and entry-point lookup. cuGetProcAddress hands out this library's own
// functions: a base name resolves to the newest ABI the library exports (name_v2, name_v3...),
// as the driver resolves it for any CUDA version fakegpu's runtime reports.
#include <dlfcn.h>

#include <string>

#include "driver.h"

using namespace fakegpu::driver;

namespace {

struct ErrorText {
  CUresult code;
  const char* name;
  const char* text;
};
constexpr ErrorText kErrors[] = {
    {kSuccess, "CUDA_SUCCESS", "no error"},
    {kInvalidValue, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {kOutOfMemory, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {kNotInitialized, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {kNoDevice, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {kInvalidDevice, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {kInvalidContext, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {kNotFound, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {kNotSupported, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {kUnknown, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

const ErrorText* find_error(CUresult code) {
  for (const ErrorText& e : kErrors)
    if (e.code == code) return &e;
  return nullptr;
}

// This library's handle, found from one of its own functions, so that lookups can never land
// in another driver.
void* self() {
  static void* const handle = [] {
    Dl_info info{};
    if (!dladdr(reinterpret_cast<void*>(&find_error), &info) || !info.dli_fname) return static_cast<void*>(nullptr);
    return dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  }();
  return handle;
}

// CUdriverProcAddressQueryResult
constexpr int kProcSuccess = 0, kProcSymbolNotFound = 1;

void* lookup(const char* symbol) {
  void* handle = self();
  if (!handle || !symbol || std::string(symbol).rfind("cu", 0) != 0) return nullptr;
  for (const char* suffix : {"_v4", "_v3", "_v2", ""})
    if (void* fn = dlsym(handle, (std::string(symbol) + suffix).c_str())) return fn;
  return nullptr;
}

}  // namespace

FAKECU_API CUresult cuGetErrorString(CUresult error, const char** text) {
  const ErrorText* e = find_error(error);
  if (!text || !e) return kInvalidValue;
  *text = e->text;
  return kSuccess;
}

FAKECU_API CUresult cuGetErrorName(CUresult error, const char** name) {
  const ErrorText* e = find_error(error);
  if (!name || !e) return kInvalidValue;
  *name = e->name;
  return kSuccess;
}

FAKECU_API CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int /*cuda_version*/, uint64_t /*flags*/,
                                        int* status) {
  if (!pfn) return kInvalidValue;
  *pfn = lookup(symbol);
  if (status) *status = *pfn ? kProcSuccess : kProcSymbolNotFound;
  return *pfn ? kSuccess : kNotFound;
}

FAKECU_API CUresult cuGetProcAddress(const char* symbol, void** pfn, int cuda_version, uint64_t flags) {
  return cuGetProcAddress_v2(symbol, pfn, cuda_version, flags, nullptr);
}
