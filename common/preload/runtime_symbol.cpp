#include "runtime_symbol.h"

#include <dlfcn.h>

#include <initializer_list>

namespace fakegpu {

void* runtime_symbol(const char* name) {
  if (void* sym = dlsym(RTLD_DEFAULT, name)) return sym;
  static void* const loaded = [] {
    for (const char* soname : {"libcudart.so.13", "libcudart.so.12", "libcudart.so"})
      if (void* handle = dlopen(soname, RTLD_LAZY | RTLD_NOLOAD)) return handle;
    return static_cast<void*>(nullptr);
  }();
  return loaded ? dlsym(loaded, name) : nullptr;
}

}  // namespace fakegpu
