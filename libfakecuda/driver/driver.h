// fakegpu's CUDA driver API (libcuda.so.1): the part of the driver that PyTorch and other
// runtime users reach directly, answered from the same fake runtime the process computes on.
// The types are the driver's, spelled with their ABI: CUresult and enums are int, handles are
// pointers, CUdeviceptr is 64 bits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "log_once.h"
#include "runtime_calls.h"

#define FAKECU_API extern "C" __attribute__((visibility("default")))

namespace fakegpu::driver {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct Context*;
using CUstream = void*;

// The CUresult values fakegpu returns.
enum : CUresult {
  kSuccess = 0,
  kInvalidValue = 1,
  kOutOfMemory = 2,
  kNotInitialized = 3,
  kNoDevice = 100,
  kInvalidDevice = 101,
  kInvalidContext = 201,
  kNotFound = 500,
  kNotSupported = 801,
  kUnknown = 999,
};

// A device's primary context: one per device for the life of the process.
struct Context {
  int device;
};
Context* primary_context(int device);

// Maps a runtime result (cudaError_t) to the driver's: the shared codes have the same values.
CUresult from_runtime(int cuda_error);
using fakegpu::log_once;  // "fakegpu: <api>: <what>" once per api name, on stderr

struct DriverError {
  CUresult code;
};

inline void check(int cuda_error) {
  if (cuda_error != 0) throw DriverError{from_runtime(cuda_error)};
}

inline void require(bool ok, CUresult code = kInvalidValue) {
  if (!ok) throw DriverError{code};
}

inline int device_count(const RuntimeCalls& rt) {
  int n = 0;
  check(rt.get_device_count(&n));
  return n;
}

inline void check_device(const RuntimeCalls& rt, CUdevice dev) {
  require(dev >= 0 && dev < device_count(rt), kInvalidDevice);
}

// Every driver call goes through here: the one place where a failure becomes a CUresult.
template <typename Body>
CUresult call(Body&& body) noexcept {
  if (!runtime_loaded()) {
    log_once("libcuda.so.1", "fakegpu's driver needs fakegpu's CUDA runtime in the process; none is loaded");
    return kNotInitialized;
  }
  try {
    body(runtime());
    return kSuccess;
  } catch (const DriverError& e) {
    return e.code;
  } catch (...) {
    return kUnknown;
  }
}

}  // namespace fakegpu::driver
