#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "cuda_bridge.h"
#include "errors.h"

namespace fakegpu::stub {
namespace {

enum class Level { kNone, kWarn, kInfo };

Level debug_level() {
  const char* v = std::getenv("NCCL_DEBUG");
  if (!v) return Level::kWarn;  // fakegpu is a debugging tool: warnings are shown by default
  if (!strcasecmp(v, "INFO") || !strcasecmp(v, "TRACE")) return Level::kInfo;
  if (!strcasecmp(v, "VERSION") || !strcasecmp(v, "NONE")) return Level::kNone;
  return Level::kWarn;
}

std::mutex g_mu;
std::string g_last_error;

void emit(const char* level, const std::string& message) {
  char host[64] = "?";
  gethostname(host, sizeof host - 1);
  std::fprintf(stderr, "%s:%d:%ld [%d] NCCL %s %s\n", host, static_cast<int>(getpid()),
               static_cast<long>(syscall(SYS_gettid)), cuda().current_device(), level, message.c_str());
}

}  // namespace

void warn(const std::string& message) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_last_error = message;
  }
  if (debug_level() >= Level::kWarn) emit("WARN", message);
}

void info(const std::string& message) {
  if (debug_level() >= Level::kInfo) emit("INFO", message);
}

std::string last_error() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_last_error;
}

}  // namespace fakegpu::stub
