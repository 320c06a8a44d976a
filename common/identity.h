// Who this process is, as far as its launcher told it.
#pragma once

#include <string>

namespace fakegpu {

struct Identity {
  int rank = -1;        // from FAKEGPU_RANK, RANK, OMPI_COMM_WORLD_RANK, PMI_RANK or SLURM_PROCID
  int world_size = -1;  // from FAKEGPU_WORLD_SIZE, WORLD_SIZE, OMPI_COMM_WORLD_SIZE, PMI_SIZE or SLURM_NTASKS
  std::string hostname;  // FAKEGPU_HOSTNAME (a virtual node's name), else the machine's
};

Identity identity_from_environment();

}  // namespace fakegpu
