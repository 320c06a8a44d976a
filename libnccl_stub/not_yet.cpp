// Host API entry points fakegpu does not implement yet. They exist so that programs linked
// against NCCL 2.28 load, and they fail with a clear error naming themselves.
#include <mutex>
#include <set>
#include <string>

#include "errors.h"
#include "export.h"

namespace {

ncclResult_t not_implemented(const char* fn) {
  static std::mutex mu;
  static std::set<std::string> warned;
  std::lock_guard<std::mutex> lock(mu);
  if (warned.insert(fn).second) fakegpu::stub::warn(std::string(fn) + " is not implemented by fakegpu yet");
  return ncclInvalidUsage;
}

}  // namespace

#define NOT_YET(name, params) \
  NCCL_EXPORT ncclResult_t name params { return not_implemented(#name); } \
  PNCCL_ALIAS(name)

NOT_YET(ncclCommRevoke, (ncclComm_t, int))
NOT_YET(ncclCommShrink, (ncclComm_t, int*, int, ncclComm_t*, ncclConfig_t*, int))
