// Errors inside the stub are exceptions; they become ncclResult_t in exactly one place,
// guarded(), which every extern "C" entry point goes through.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "env.h"
#include "nccl.h"

namespace fakegpu::stub {

class NcclError : public std::runtime_error {
 public:
  NcclError(ncclResult_t code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ncclResult_t code() const { return code_; }

 private:
  ncclResult_t code_;
};

// Prints one NCCL-style WARN line (unless NCCL_DEBUG asks for silence) and remembers the
// message for ncclGetLastError.
void warn(const std::string& message);
// INFO lines, printed when NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS selects their subsystem
// (wire::NcclSubsys bits).
bool info_enabled(uint32_t subsys);
void info(uint32_t subsys, const std::string& message);
void info(const std::string& message);  // INIT
std::string last_error();

// Host functions queued on a stream must not call CUDA, so log lines written while one runs
// take their device from the scope instead of asking the runtime.
class LogDeviceScope {
 public:
  explicit LogDeviceScope(int device);
  ~LogDeviceScope();
  LogDeviceScope(const LogDeviceScope&) = delete;
  LogDeviceScope& operator=(const LogDeviceScope&) = delete;
};

// Runs an API body, translating exceptions into an ncclResult_t and a WARN line that names fn.
template <typename Body>
ncclResult_t guarded(const char* fn, Body&& body) noexcept {
  try {
    return body();
  } catch (const NcclError& e) {
    warn(std::string(fn) + ": " + e.what());
    return e.code();
  } catch (const env::SettingError& e) {  // a malformed variable, named in the message
    warn(std::string(fn) + ": " + e.what());
    return ncclInvalidArgument;
  } catch (const std::bad_alloc&) {
    warn(std::string(fn) + ": out of host memory");
    return ncclSystemError;
  } catch (const std::exception& e) {
    warn(std::string(fn) + ": internal error: " + e.what());
    return ncclInternalError;
  } catch (...) {
    warn(std::string(fn) + ": unknown internal error");
    return ncclInternalError;
  }
}

}  // namespace fakegpu::stub
