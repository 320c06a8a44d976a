#include "identity.h"

#include <unistd.h>

#include <cstdlib>

#include "env.h"

namespace fakegpu {
namespace {

// Ours first (declared, so a malformed value is refused); then the first of the launchers'
// variables that holds a non-negative integer, else -1. Those belong to mpirun, srun or
// torchrun, which may set them for reasons of their own, so one that is not a rank is skipped.
int first_int(env::Setting<int64_t> ours, std::initializer_list<const char*> theirs) {
  if (std::optional<int64_t> n = env::find(ours)) return static_cast<int>(*n);
  for (const char* name : theirs) {
    const std::string v = env::foreign(name);
    if (v.empty()) continue;
    char* end = nullptr;
    long n = std::strtol(v.c_str(), &end, 10);
    if (*end == '\0' && n >= 0 && n < (1 << 30)) return static_cast<int>(n);
  }
  return -1;
}

}  // namespace

int rank_from_environment() {
  return first_int(env::kRank, {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"});
}

std::string hostname_from_environment() {
  // FAKEGPU_HOSTNAME names the virtual node a rank runs on, when one machine plays several.
  std::string host = env::get(env::kHostname);
  if (!host.empty()) return host;
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) buf[0] = '\0';
  return buf;
}

Identity identity_from_environment() {
  Identity id;
  id.rank = rank_from_environment();
  id.world_size = first_int(env::kWorldSize, {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"});
  id.hostname = hostname_from_environment();
  return id;
}

}  // namespace fakegpu
