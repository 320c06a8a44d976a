// Export helpers: every NCCL entry point is also reachable as its pnccl alias, as in real NCCL
// (profilers and shims call the p-prefixed names).
#pragma once

#define NCCL_EXPORT extern "C" __attribute__((visibility("default")))
#define PNCCL_ALIAS(name) \
  extern "C" __attribute__((visibility("default"), alias(#name))) decltype(name) p##name;
