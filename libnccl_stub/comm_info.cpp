// What NCCL reports about a communicator once it is up: with NCCL_DEBUG=INFO its channels,
// rings and trees in NCCL's own line formats, and the graph and topology files
// NCCL_GRAPH_DUMP_FILE / NCCL_TOPO_DUMP_FILE ask for. The coordinator's cost model knows
// them; the stub asks only when one of these is wanted.
#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <fstream>

#include "comm.h"
#include "env.h"

namespace fakegpu::stub {
namespace {

template <typename... Args>
std::string format(const char* pattern, Args... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, pattern, args...);
  return buf;
}

// The file named by `file`, when this rank is the one `picked` (default 0) names; else "".
std::string dump_file(env::Setting<std::string> file, env::Setting<int64_t> picked, int rank) {
  return rank == env::get(picked) ? env::get(file) : "";
}

void write_file(env::Setting<std::string> var, const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out.flush()) warn(std::string(env::declaration(var.id).name) + "=" + path + ": cannot write the file");
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
  const std::string graph_file = dump_file(env::kNcclGraphDumpFile, env::kNcclGraphDumpFileRank, comm->rank);
  const std::string topo_file = dump_file(env::kNcclTopoDumpFile, env::kNcclTopoDumpFileRank, comm->rank);
  uint32_t flags = (info_enabled(wire::kSubsysInit | wire::kSubsysGraph) ? wire::kInfoLines : 0u) |
                   (graph_file.empty() ? 0u : wire::kGraphXml) | (topo_file.empty() ? 0u : wire::kTopologyXml);
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
  if (flags & wire::kGraphXml) write_file(env::kNcclGraphDumpFile, graph_file, reply.graph_xml);
  if (flags & wire::kTopologyXml) write_file(env::kNcclTopoDumpFile, topo_file, reply.topology_xml);
  info(wire::kSubsysInit, format("%s comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %" PRIx64 " commId 0x%" PRIx64
                           " - Init COMPLETE",
                           func, self, comm->rank, comm->nranks, comm->cuda_device, comm->cuda_device,
                           bus_id_number(reply.bus_id), comm->id));
}

}  // namespace fakegpu::stub
