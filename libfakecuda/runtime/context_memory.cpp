#include "context_memory.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <utility>

#include "devices.h"
#include "memory_ledger.h"
#include "memory_model.h"
#include "runtime_state.h"

namespace fakegpu::cuda {
namespace {

std::mutex loaded_mu;
std::set<std::pair<int, int>> loaded;  // (device, library)

// Whether this (device, library) is new, marking it seen.
bool first_time(int device, int library) {
  std::lock_guard<std::mutex> lock(loaded_mu);
  return loaded.emplace(device, library).second;
}

// CUDA loads modules lazily unless told otherwise (CUDA_MODULE_LOADING=EAGER); PyTorch sets LAZY
// where nothing is set.
bool lazy_loading() {
  const char* mode = std::getenv("CUDA_MODULE_LOADING");
  return !mode || std::strcmp(mode, "EAGER") != 0;
}

memory::Library library_of(int library) {
  switch (library) {
    case FAKEGPU_LIBRARY_PYTORCH: return memory::Library::kPyTorch;
    case FAKEGPU_LIBRARY_PYTORCH_TRAINING: return memory::Library::kPyTorchTraining;
    case FAKEGPU_LIBRARY_CUBLAS: return memory::Library::kCublas;
    case FAKEGPU_LIBRARY_NCCL: return memory::Library::kNccl;
    default: throw cudaErrorInvalidValue;
  }
}

}  // namespace

void charge_context(int device) {
  const VirtualDevice* d = device_at(device);
  if (!d) return;
  // A context that does not fit fails on a GPU too, but later: the first allocation says so.
  MemoryLedger::instance().charge(device, FAKEGPU_MEMORY_CONTEXT, memory::context_bytes(*d->profile), d->memory_bytes);
}

int load_library(int device, int library) {
  return guarded([&] {
    const VirtualDevice* d = device_at(device);
    if (!d) throw cudaErrorInvalidDevice;
    const memory::Library which = library_of(library);
    if (!first_time(device, library)) return;
    mark_context_active(device);  // the context comes first (charged once, when it becomes active)
    if (!MemoryLedger::instance().charge(device, FAKEGPU_MEMORY_CONTEXT, memory::module_bytes(which, lazy_loading()),
                                         d->memory_bytes))
      throw cudaErrorMemoryAllocation;
  });
}

}  // namespace fakegpu::cuda
