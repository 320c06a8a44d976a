// Finds a CUDA runtime entry point in the running process: among its global symbols, or else
// in a CUDA runtime loaded without RTLD_GLOBAL (a Python extension's dependency, say), which
// RTLD_DEFAULT cannot see. The NCCL stub and the fake driver both reach the runtime this way,
// so they always talk to the same one.
#pragma once

namespace fakegpu {

// nullptr when no loaded runtime has `name`.
void* runtime_symbol(const char* name);

}  // namespace fakegpu
