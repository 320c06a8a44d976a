// One line per API name on stderr, "fakegpu: <api>: <what>", the first time that API reports
// something; used by the fake CUDA runtime, driver and cuBLAS for what they do not simulate.
#pragma once

namespace fakegpu {

void log_once(const char* api, const char* what);

}  // namespace fakegpu
