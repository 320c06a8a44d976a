// What NCCL tells a user about a communicator's channels, in NCCL's own formats: the
// NCCL_DEBUG=INFO lines of its init (channels, rings, trees, channel counts) and the graph
// XML of NCCL_GRAPH_DUMP_FILE. Scripts that parse real NCCL logs read these unchanged.
#pragma once

#include <string>
#include <vector>

#include "comm_model.h"
#include "wire.h"

namespace fakegpu::planner {

// Where a rank sits in its communicator, as NCCL's init line reports it.
struct RankPlace {
  int nnodes = 1;
  int local_ranks = 1;
  int local_rank = 0;
};
RankPlace rank_place(const CommModel& model, int rank);

// The INFO lines NCCL's init prints for `rank`, in order; rank 0 also prints every ring.
std::vector<wire::InfoLine> init_info_lines(const CommModel& model, int rank);

// The p2p channel counts NCCL derives from the collective channels and the peers' paths.
int p2p_channels(const CommModel& model);
int p2p_channels_per_peer(const CommModel& model);

// NCCL_GRAPH_DUMP_FILE's content as `rank` would write it: ring, tree, CollNet (empty) and
// NVLS graphs, each channel listing the GPUs of the rank's node in channel order.
std::string graph_xml(const CommModel& model, int rank);

}  // namespace fakegpu::planner
