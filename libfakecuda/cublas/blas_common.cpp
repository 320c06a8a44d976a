#include "blas_common.h"

#include <memory>

#include "cuda_bridge_lookup.h"
#include "gemm.h"
#include "runtime_symbol.h"

namespace fakegpu::blas {

namespace {
using LaunchHostFunc = int (*)(void*, void (*)(void*), void*);
void run_work(void* arg) {
  std::unique_ptr<std::function<void()>> work(static_cast<std::function<void()>*>(arg));
  try {
    (*work)();
  } catch (...) {
    log_once("cuBLAS", "a queued matrix product failed on its stream");
  }
}
}  // namespace

void enqueue(void* stream, std::function<void()> work) {
  // Only fakegpu's runtime runs host code on its streams as the GPU would run the product.
  static const auto launch = reinterpret_cast<LaunchHostFunc>(
      find_cuda_bridge("cuBLAS") ? runtime_symbol("cudaLaunchHostFunc") : nullptr);
  if (!launch) {
    log_once("cuBLAS", "fakegpu's cuBLAS needs fakegpu's CUDA runtime in the process; none is loaded");
    throw BlasError{kNotInitialized};
  }
  auto* heap = new std::function<void()>(std::move(work));
  if (launch(stream, run_work, heap) != 0) {
    delete heap;
    throw BlasError{kExecutionFailed};
  }
}

Scalar::Scalar(const void* ptr, int type, bool device_pointer) : ptr_(ptr), type_(type), deferred_(device_pointer) {
  require(ptr != nullptr && supported_type(type));
  if (!deferred_) value_ = load(ptr, type, 0);
}

double Scalar::value() const { return deferred_ ? load(ptr_, type_, 0) : value_; }

int scale_type_of(int compute_type) {
  switch (compute_type) {
    case 64: case 65: return kR16F;                                 // CUBLAS_COMPUTE_16F(_PEDANTIC)
    case 68: case 69: case 74: case 75: case 77: case 78: return kR32F;  // the 32F family
    case 70: case 71: case 79: return kR64F;                        // the 64F family
    default: return -1;                                             // 32I and unknown
  }
}

}  // namespace fakegpu::blas
