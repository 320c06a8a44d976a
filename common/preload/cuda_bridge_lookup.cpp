#include "cuda_bridge_lookup.h"

#include "log_once.h"
#include "runtime_symbol.h"

namespace fakegpu {

const fakegpu_cuda_bridge_table* accept_cuda_bridge(const fakegpu_cuda_bridge_table* table, std::string* why) {
  const std::string wanted = std::to_string(FAKEGPU_CUDA_BRIDGE_VERSION);
  if (!table) {
    *why = "fakegpu's CUDA runtime in this process does not offer bridge version " + wanted +
           " (it was built from other sources than this library)";
  } else if (table->version != FAKEGPU_CUDA_BRIDGE_VERSION) {
    *why = "fakegpu's CUDA runtime in this process answered with bridge version " + std::to_string(table->version) +
           ", not " + wanted + " (it was built from other sources than this library)";
  } else if (table->size != sizeof(fakegpu_cuda_bridge_table)) {
    *why = "fakegpu's CUDA runtime in this process has a " + std::to_string(table->size) + "-byte bridge table, not " +
           std::to_string(sizeof(fakegpu_cuda_bridge_table)) + " bytes, for version " + wanted +
           " (it was built from other sources than this library)";
  } else {
    return table;
  }
  return nullptr;
}

const fakegpu_cuda_bridge_table* find_cuda_bridge(const char* who) {
  auto lookup = reinterpret_cast<fakegpu_cuda_bridge_fn>(runtime_symbol("fakegpu_cuda_bridge"));
  if (!lookup) return nullptr;  // NVIDIA's runtime, or none
  std::string why;
  const fakegpu_cuda_bridge_table* table = accept_cuda_bridge(lookup(FAKEGPU_CUDA_BRIDGE_VERSION), &why);
  // Its own notice key, so that the caller's other one-line notices still show.
  if (!table)
    log_once((std::string(who) + ": CUDA runtime bridge").c_str(),
             (why + "; going on as over a foreign CUDA runtime").c_str());
  return table;
}

}  // namespace fakegpu
