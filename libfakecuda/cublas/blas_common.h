// What fakegpu's cuBLAS and cuBLASLt share: their status codes, the one place exceptions
// become a cublasStatus_t, work queued on the caller's stream, and scalars read the way the
// pointer mode says.
#pragma once

#include <cstdint>
#include <functional>

#include "log_once.h"

#define FAKEBLAS_API extern "C" __attribute__((visibility("default")))

namespace fakegpu::blas {

using Status = int;  // cublasStatus_t
enum : Status {
  kSuccess = 0,
  kNotInitialized = 1,
  kAllocFailed = 3,
  kInvalidValue = 7,
  kExecutionFailed = 13,
  kInternalError = 14,
  kNotSupported = 15,
};

struct BlasError {
  Status status;
};
inline void require(bool ok, Status status = kInvalidValue) {
  if (!ok) throw BlasError{status};
}

using fakegpu::log_once;  // "fakegpu: <api>: <what>" once per api name, on stderr

template <typename Body>
Status guarded(Body&& body) noexcept {
  try {
    body();
    return kSuccess;
  } catch (const BlasError& e) {
    return e.status;
  } catch (...) {
    return kInternalError;
  }
}

// Runs `work` on `stream` after everything queued there before it, through the fake runtime's
// host functions. Throws kNotInitialized when no fake runtime is loaded.
void enqueue(void* stream, std::function<void()> work);

// alpha and beta: with a host pointer the value is read now (the caller may reuse it at once);
// with a device pointer it is read when the work runs, after what the stream wrote before.
class Scalar {
 public:
  Scalar(const void* ptr, int type, bool device_pointer);
  double value() const;

 private:
  const void* ptr_;
  int type_;
  bool deferred_;
  double value_ = 0;
};

// The cuBLAS release each build reports: 13.1 with CUDA 13, 12.9 with CUDA 12.
#ifdef FAKEGPU_CUDA_MAJOR
constexpr int kBlasMajor = FAKEGPU_CUDA_MAJOR, kBlasMinor = FAKEGPU_CUDA_MAJOR >= 13 ? 1 : 9;
constexpr int kCudartVersion = FAKEGPU_CUDA_MAJOR * 1000;
#endif

// The cudaDataType_t of alpha and beta for a cublasComputeType_t; -1 for one not supported.
int scale_type_of(int compute_type);

}  // namespace fakegpu::blas
