#include "identity.h"

#include <unistd.h>

#include <cstdlib>

namespace fakegpu {
namespace {

// First of the variables that holds a non-negative integer, else -1.
int first_int(std::initializer_list<const char*> names) {
  for (const char* name : names) {
    const char* v = std::getenv(name);
    if (!v || !*v) continue;
    char* end = nullptr;
    long n = std::strtol(v, &end, 10);
    if (*end == '\0' && n >= 0 && n < (1 << 30)) return static_cast<int>(n);
  }
  return -1;
}

}  // namespace

Identity identity_from_environment() {
  Identity id;
  id.rank = first_int({"FAKEGPU_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"});
  id.world_size = first_int({"FAKEGPU_WORLD_SIZE", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"});
  // FAKEGPU_HOSTNAME names the virtual node a rank runs on, when one machine plays several.
  if (const char* v = std::getenv("FAKEGPU_HOSTNAME"); v && *v) {
    id.hostname = v;
    return id;
  }
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  id.hostname = host;
  return id;
}

}  // namespace fakegpu
