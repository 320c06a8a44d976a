// Who this process is, as far as its launcher told it.
#pragma once

#include <string>

namespace fakegpu {

struct Identity {
  int rank = -1;        // from FAKEGPU_RANK, RANK, OMPI_COMM_WORLD_RANK, PMI_RANK or SLURM_PROCID
  int world_size = -1;  // from FAKEGPU_WORLD_SIZE, WORLD_SIZE, OMPI_COMM_WORLD_SIZE, PMI_SIZE or SLURM_NTASKS
  std::string hostname;  // FAKEGPU_HOSTNAME (a virtual node's name), else the machine's
};

// Throws env::SettingError when FAKEGPU_RANK or FAKEGPU_WORLD_SIZE is malformed.
Identity identity_from_environment();
int rank_from_environment();
// Never throws: log lines need it.
std::string hostname_from_environment();

}  // namespace fakegpu
