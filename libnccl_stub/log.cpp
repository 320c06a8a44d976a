#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>

#include "cuda_bridge.h"
#include "env.h"
#include "errors.h"
#include "identity.h"
#include "wire.h"

namespace fakegpu::stub {
namespace {

enum class Level { kNone, kWarn, kInfo };

// fakegpu is a debugging tool: warnings are shown by default, and when NCCL_DEBUG is malformed
// (the init that checks it says so; a log line cannot fail).
Level debug_level() {
  std::string v;
  try {
    v = env::get(env::kNcclDebug);
  } catch (const env::SettingError&) {
    return Level::kWarn;
  }
  if (v == "INFO" || v == "TRACE") return Level::kInfo;
  if (v == "VERSION" || v == "NONE") return Level::kNone;
  return Level::kWarn;
}

struct Subsys {
  const char* name;
  uint32_t bit;
};
// NCCL_DEBUG_SUBSYS names and their bits, as NCCL numbers them.
constexpr Subsys kSubsystems[] = {{"INIT", 0x1},    {"COLL", 0x2},      {"P2P", 0x4},    {"SHM", 0x8},
                                  {"NET", 0x10},    {"GRAPH", 0x20},    {"TUNING", 0x40}, {"ENV", 0x80},
                                  {"ALLOC", 0x100}, {"CALL", 0x200},    {"PROXY", 0x400}, {"NVLS", 0x800},
                                  {"BOOTSTRAP", 0x1000}, {"REG", 0x2000}, {"PROFILE", 0x4000}, {"RAS", 0x8000}};
constexpr uint32_t kDefaultSubsys = 0x1 | 0x1000 | 0x80;  // INIT, BOOTSTRAP, ENV: NCCL's default

void emit(const char* level, const std::string& message);

// NCCL_DEBUG_SUBSYS: a comma list of names, "^" in front to exclude them, ALL for everything.
// An unknown name is reported once and ignored.
uint32_t subsys_mask() {
  const std::string v = env::get(env::kNcclDebugSubsys);
  if (v.empty()) return kDefaultSubsys;
  const bool invert = v[0] == '^';
  uint32_t mask = 0;
  std::string list = v.substr(invert ? 1 : 0), item;
  for (size_t start = 0; start <= list.size();) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    item = list.substr(start, comma - start);
    start = comma + 1;
    if (item.empty()) continue;
    uint32_t bit = 0;
    if (!strcasecmp(item.c_str(), "ALL")) bit = ~0u;
    for (const Subsys& s : kSubsystems)
      if (!strcasecmp(item.c_str(), s.name)) bit = s.bit;
    static std::once_flag reported;
    if (!bit) std::call_once(reported, [&] { emit("WARN", "NCCL_DEBUG_SUBSYS=" + v + ": unknown subsystem '" + item + "' ignored"); });
    mask |= bit;
  }
  return invert ? ~mask : mask;
}

std::mutex g_mu;
std::string g_last_error;
thread_local int t_log_device = -1;  // set by LogDeviceScope

void emit(const char* level, const std::string& message) {
  static const std::string host = hostname_from_environment();
  std::fprintf(stderr, "%s:%d:%ld [%d] NCCL %s %s\n", host.c_str(), static_cast<int>(getpid()),
               static_cast<long>(syscall(SYS_gettid)), t_log_device >= 0 ? t_log_device : cuda().current_device(), level, message.c_str());
}

}  // namespace

void warn(const std::string& message) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_last_error = message;
  }
  if (debug_level() >= Level::kWarn) emit("WARN", message);
}

LogDeviceScope::LogDeviceScope(int device) { t_log_device = device; }
LogDeviceScope::~LogDeviceScope() { t_log_device = -1; }

bool info_enabled(uint32_t subsys) { return debug_level() >= Level::kInfo && (subsys_mask() & subsys) != 0; }

void info(uint32_t subsys, const std::string& message) {
  if (info_enabled(subsys)) emit("INFO", message);
}

void info(const std::string& message) { info(wire::kSubsysInit, message); }

std::string last_error() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_last_error;
}

}  // namespace fakegpu::stub
