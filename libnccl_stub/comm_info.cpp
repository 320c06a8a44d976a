// What NCCL reports about a communicator once it is up: with NCCL_DEBUG=INFO its channels,
// rings and trees in NCCL's own line formats, and the graph and topology files
// NCCL_GRAPH_DUMP_FILE / NCCL_TOPO_DUMP_FILE ask for. The coordinator's cost model knows
// them; the stub asks only when one of these is wanted.
#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "comm.h"

namespace fakegpu::stub {
namespace {

template <typename... Args>
std::string format(const char* pattern, Args... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, pattern, args...);
  return buf;
}

int env_rank(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : 0;
}

// The file named by `file_var`, when this rank is the one `rank_var` (default 0) picks.
const char* dump_file(const char* file_var, const char* rank_var, int rank) {
  const char* path = std::getenv(file_var);
  return path && *path && rank == env_rank(rank_var) ? path : nullptr;
}

void write_file(const char* var, const char* path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out.flush()) warn(std::string(var) + "=" + path + ": cannot write the file");
}

// NCCL prints a bus id as the hex digits of "dddd:bb:dd.f" run together.
uint64_t bus_id_number(const std::string& bus_id) {
  uint64_t v = 0;
  for (char c : bus_id)
    if (std::isxdigit(static_cast<unsigned char>(c))) v = v * 16 + std::stoul(std::string(1, c), nullptr, 16);
  return v;
}

}  // namespace

void describe_comm(ncclComm* comm, const char* func) {
  const char* graph_file = dump_file("NCCL_GRAPH_DUMP_FILE", "NCCL_GRAPH_DUMP_FILE_RANK", comm->rank);
  const char* topo_file = dump_file("NCCL_TOPO_DUMP_FILE", "NCCL_TOPO_DUMP_FILE_RANK", comm->rank);
  uint32_t flags = (info_enabled(wire::kSubsysInit | wire::kSubsysGraph) ? wire::kInfoLines : 0u) |
                   (graph_file ? wire::kGraphXml : 0u) | (topo_file ? wire::kTopologyXml : 0u);
  wire::CommInfoReply reply;
  if (flags) {
    try {
      reply = comm->client->submit(wire::CommInfo{comm->id, comm->rank, flags})->reply<wire::CommInfoReply>();
    } catch (const NcclError& e) {
      warn(std::string(func) + ": no channel description: " + e.what());
      flags = 0;
    }
  }
  const void* self = comm;
  if (flags & wire::kInfoLines) {
    info(wire::kSubsysInit, format("comm %p rank %d nRanks %d nNodes %d localRanks %d localRank %d MNNVL 0", self,
                             comm->rank, comm->nranks, reply.nnodes, reply.local_ranks, reply.local_rank));
    for (const wire::InfoLine& line : reply.lines) info(line.subsys, line.text);
  }
  if (flags & wire::kGraphXml) write_file("NCCL_GRAPH_DUMP_FILE", graph_file, reply.graph_xml);
  if (flags & wire::kTopologyXml) write_file("NCCL_TOPO_DUMP_FILE", topo_file, reply.topology_xml);
  info(wire::kSubsysInit, format("%s comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %" PRIx64 " commId 0x%" PRIx64
                           " - Init COMPLETE",
                           func, self, comm->rank, comm->nranks, comm->cuda_device, comm->cuda_device,
                           bus_id_number(reply.bus_id), comm->id));
}

}  // namespace fakegpu::stub
