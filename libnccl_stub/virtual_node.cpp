// Virtual nodes under launchers that know nothing of them. mpirun or srun on one machine makes
// every rank local to that machine: its local rank counts across the whole job and its host
// name is the machine's. fgpu passes the cluster's layout in FAKEGPU_VIRTUAL_NODES
// ("node0=0-3;node1=4-7"); before the program starts, a rank with no node of its own yet
// (FAKEGPU_NODE unset) takes the node holding its rank, as fgpu --nproc assigns it:
// FAKEGPU_NODE and FAKEGPU_HOSTNAME are set, and the launcher's local-rank variables that are
// present are rewritten to count within the node. gethostname() then returns the node's name,
// so programs that group ranks by host name (nccl-tests) see one host per node.
#include <dlfcn.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "env.h"
#include "export.h"
#include "identity.h"

namespace fakegpu::stub {
namespace {

struct Placement {
  int node = -1;
  std::string name;
  int local_rank = 0;
  int local_size = 0;
};

// Ranks of one node: "0-3,8,9". False on anything else.
bool parse_ranks(const std::string& text, std::vector<int>* ranks) {
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(pos, end - pos);
    char* stop = nullptr;
    long first = std::strtol(item.c_str(), &stop, 10);
    long last = first;
    if (*stop == '-') last = std::strtol(stop + 1, &stop, 10);
    if (item.empty() || *stop != '\0' || first < 0 || last < first || last - first > (1 << 20)) return false;
    for (long r = first; r <= last; ++r) ranks->push_back(static_cast<int>(r));
    pos = end + 1;
  }
  return true;
}

// Where `rank` sits in a layout "id=ranks;id=ranks"; node -1 when nowhere or unreadable.
Placement place(const std::string& layout, int rank) {
  Placement found;
  size_t pos = 0;
  for (int node = 0; pos < layout.size(); ++node) {
    size_t end = layout.find(';', pos);
    if (end == std::string::npos) end = layout.size();
    const std::string entry = layout.substr(pos, end - pos);
    pos = end + 1;
    const size_t eq = entry.find('=');
    std::vector<int> ranks;
    if (eq == std::string::npos || eq == 0 || !parse_ranks(entry.substr(eq + 1), &ranks)) return {};
    for (size_t i = 0; i < ranks.size(); ++i)
      if (ranks[i] == rank) found = {node, entry.substr(0, eq), static_cast<int>(i), static_cast<int>(ranks.size())};
  }
  return found;
}

// Rewrites a launcher's variable only where the launcher set it.
void replace_if_set(const char* name, int value) {
  if (!env::foreign(name).empty()) setenv(name, std::to_string(value).c_str(), 1);
}

Placement placement() {
  const std::string layout = env::get(env::kVirtualNodes);
  if (layout.empty() || !env::get(env::kNode).empty()) return {};  // not asked for, or placed already
  const int rank = rank_from_environment();
  if (rank < 0) return {};  // not a rank: the launcher itself, or a helper process
  return place(layout, rank);  // node -1: the coordinator names a rank outside the cluster when it connects
}

__attribute__((constructor)) void adopt_virtual_node() {
  Placement p;
  try {
    p = placement();
  } catch (const std::exception&) {
    return;  // a malformed FAKEGPU_RANK, say: the init, which checks it, fails naming it
  }
  if (p.node < 0) return;
  env::assign(env::kNode, std::to_string(p.node));
  env::assign(env::kHostname, p.name);
  for (const char* name : {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_NODE_RANK", "MPI_LOCALRANKID",
                           "MV2_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"})
    replace_if_set(name, p.local_rank);
  for (const char* name : {"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "MV2_COMM_WORLD_LOCAL_SIZE"})
    replace_if_set(name, p.local_size);
  for (const char* name : {"GROUP_RANK", "SLURM_NODEID"}) replace_if_set(name, p.node);
}

}  // namespace
}  // namespace fakegpu::stub

// A rank on a virtual node is on a host of that node's name.
NCCL_EXPORT int gethostname(char* name, size_t len) {
  std::string virtual_host;
  try {
    virtual_host = fakegpu::env::get(fakegpu::env::kHostname);
  } catch (const std::bad_alloc&) {  // nothing may leave a C function
    errno = ENOMEM;
    return -1;
  }
  if (virtual_host.empty()) {
    using Real = int (*)(char*, size_t);
    static Real real = reinterpret_cast<Real>(dlsym(RTLD_NEXT, "gethostname"));
    if (real) return real(name, len);
    errno = ENOSYS;
    return -1;
  }
  const size_t n = virtual_host.size();
  if (n >= len) {  // as glibc: too small a buffer is an error
    errno = ENAMETOOLONG;
    return -1;
  }
  std::memcpy(name, virtual_host.c_str(), n + 1);
  return 0;
}
