#include "nccl_release.h"

#include <algorithm>
#include <regex>

#include "nccl_tuning.h"

namespace fakegpu::planner {
namespace {

std::string range_text() {
  return "NCCL " + nccl_version_name(kOldestNcclModeled / 100 * 100) + " to " +
         nccl_version_name(kNewestNcclModeled / 100 * 100);
}

}  // namespace

std::string nccl_version_name(int code) {
  const std::string release = std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100);
  return code % 100 ? release + "." + std::to_string(code % 100) : release;
}

int read_nccl_version(const std::string& text, const std::string& what) {
  static const std::regex dotted(R"(\s*v?(\d+)\.(\d+)(?:\.(\d+))?(?:-\d+)?(?:\+\S*)?\s*)");
  static const std::regex code_only(R"(\s*(\d{5})\s*)");
  std::smatch m;
  int code = 0;
  if (std::regex_match(text, m, dotted)) {
    const int major = std::stoi(m[1]), minor = std::stoi(m[2]), patch = m[3].matched ? std::stoi(m[3]) : 0;
    if (minor > 99 || patch > 99)
      throw TuningError(what + " '" + text + "': not an NCCL version (minor and patch run to 99)");
    code = major * 10000 + minor * 100 + patch;
  } else if (std::regex_match(text, m, code_only)) {
    code = std::stoi(m[1]);
  } else {
    throw TuningError(what + " '" + text + "': not an NCCL version; write it as NCCL does, e.g. 2.21 or 2.21.5");
  }
  return code;
}

int parse_nccl_version(const std::string& text, const std::string& what) {
  const int code = read_nccl_version(text, what);
  const int newest_release = kNewestNcclModeled / 100 * 100 + 99;  // any patch of the newest release
  if (code < kOldestNcclModeled || code > newest_release)
    throw TuningError(what + " '" + text + "': fakegpu models " + range_text() + " (the default is " +
                      nccl_version_name(kNewestNcclModeled) + ")");
  return code;
}

int nearest_nccl_modeled(int code) { return std::clamp(code, kOldestNcclModeled, kNewestNcclModeled); }

}  // namespace fakegpu::planner
