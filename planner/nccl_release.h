// Which NCCL release the cost model follows. NCCL's choices and speeds change between releases
// (algorithms added, tuner constants and formulas revised, channel counts raised), so a run on a
// cluster with an older NCCL is compared with the model of that NCCL. Versions are NCCL's
// codes: major * 10000 + minor * 100 + patch (2.21.5 is 22105).
#pragma once

#include <string>

namespace fakegpu::planner {

constexpr int kOldestNcclModeled = 21800;  // 2.18: the first with NVLS trees across nodes
constexpr int kNewestNcclModeled = 23007;  // 2.30.7, the default

// "2.21", "2.21.5", "2.21.5-1", "2.21.5+cuda12.4", or a code (22105). A release without a patch
// is its first. Throws TuningError naming `what` (the flag or key) when the text is not a version.
int read_nccl_version(const std::string& text, const std::string& what);
// The same, also refused (naming the range modeled) outside kOldestNcclModeled..the newest 2.30.
int parse_nccl_version(const std::string& text, const std::string& what);

// The nearest release modeled: a version before the oldest is modeled as the oldest, one after
// the newest as the newest (a log of NCCL 2.16 or 2.31 is still compared with something).
int nearest_nccl_modeled(int code);

// "2.21.5"; "2.21" for a release named without its patch.
std::string nccl_version_name(int code);

}  // namespace fakegpu::planner
