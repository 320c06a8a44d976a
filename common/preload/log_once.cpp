#include "log_once.h"

#include <cstdio>
#include <mutex>
#include <set>
#include <string>

namespace fakegpu {

void log_once(const char* api, const char* what) {
  static std::mutex mu;
  static auto* seen = new std::set<std::string>;  // never destroyed: static destructors may still log
  std::lock_guard<std::mutex> lock(mu);
  if (seen->insert(api).second) std::fprintf(stderr, "fakegpu: %s: %s\n", api, what);
}

}  // namespace fakegpu
