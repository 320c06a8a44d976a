// The job's use of the cost model: pricing completed operations onto the modeled timeline,
// describing a communicator's channels the way NCCL logs them, and ncclGroupSimulateEnd.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "job.h"
#include "nccl_info.h"
#include "nccl_memory.h"
#include "topo_xml_dump.h"

namespace fakegpu::coord {

using wire::CollType;
using wire::Status;

namespace {

// The slowest kind of link a point-to-point transfer crosses.
const char* p2p_path(const planner::Topology& topo, const planner::Estimate& e) {
  bool pcie = false, nvlink = false;
  if (e.per_byte_links)
    for (const planner::LinkLoad& l : *e.per_byte_links) {
      const planner::LinkKind kind = topo.links[l.link].kind;
      if (planner::is_nic(kind)) return "network";
      pcie |= planner::is_pcie(kind);
      nvlink |= planner::is_nvlink(kind);
    }
  return pcie ? "PCIe" : nvlink ? "NVLink" : "none";
}

}  // namespace

// Prices the call on its communicator's GPUs and places it on the job's modeled timeline.
wire::CollectiveDone Job::count_completed(const wire::Collective& call, uint64_t bytes, Comm& comm, double ready_us,
                                          std::vector<Trace::RankTrack> tracks) {
  ++completed_ops_;
  stats_.count_call(call.coll, bytes);
  wire::CollectiveDone done;
  done.seq = call.seq;
  const planner::CommModel* model = model_of(comm);
  if (!model) return done;
  planner::Estimate e;
  try {
    e = call.coll == CollType::kSend
            ? model->estimate_p2p(call.rank, call.root, bytes, call.flags & wire::kSendsAndReceives)
            : model->estimate(call.coll, bytes, call.root);
  } catch (const planner::TuningError& err) {
    stats_.count_unpriced(call.coll, err.what());
    return done;
  }
  // Collectives of a communicator run one after another. Sends and receives run as soon as
  // both ends' streams reach them, so those of one NCCL group run side by side, sharing links;
  // without ready times (NVIDIA's runtime keeps no modeled clock) they queue like collectives.
  // A latency-bound operation (its data phase no longer than its fixed cost) threads its few
  // packets through other traffic instead of waiting for it: a message of an all-to-all's token
  // counts does not wait out another communicator's all-gather. A collective's time is then a
  // function of what its ranks know between them (their streams' times, and the ends of the
  // communicator's operations each took part in), which lets ranks exchanging it among
  // themselves (peer_exchange.h) compute it as done here.
  const bool collective = call.coll != CollType::kSend;
  const bool latency_bound = e.data_us <= e.latency_us;
  done.uncontended_us = e.time_us;
  done.latency_bound = collective && latency_bound;
  LinkTimeline::Span span;
  if (latency_bound && ready_us >= 0) {
    span = timeline_.place_unhindered(collective ? std::max(comm.clock_us, ready_us) : ready_us, e);
    done.modeled_us = e.time_us;  // exactly: a rank adds it to the start it computed
  } else {
    double clock = collective || ready_us < 0 ? comm.clock_us : ready_us;
    span = timeline_.place(&clock, e, ready_us);
    done.modeled_us = span.end_us - span.start_us;
  }
  done.start_us = span.start_us;
  if (collective) {
    done.connects = planner::nccl_pieces(e.algo);
  } else {
    const planner::NcclP2pMemory p2p = planner::nccl_p2p_memory(*model, call.rank, call.root);
    done.p2p_send_bytes = p2p.send;
    done.p2p_recv_bytes = p2p.recv;
    done.p2p_pool_bytes = p2p.pool;
  }
  // The sum each rank computes from the reply, so the clocks ranks keep and this one agree to
  // the bit.
  comm.clock_us = std::max(comm.clock_us, done.start_us + done.modeled_us);
  trace_.record({comm.id, call.coll, bytes, span.start_us, span.end_us, e.algo, e.proto, e.channels, e.per_byte_links},
                std::move(tracks));
  // Sends of one size differ by path, so each path gets its own row.
  stats_.count_priced({comm.id, call.coll, bytes, call.coll == CollType::kSend ? p2p_path(topology_, e) : ""}, e);
  return done;
}

wire::NcclMemory Job::nccl_memory(Comm& comm, int rank) {
  const planner::CommModel* model = model_of(comm);
  if (!model) return {};
  return planner::nccl_memory_plan(*model, rank);
}

const planner::CommModel* Job::model_of(Comm& comm) {
  if (!comm.model && !comm.unmodeled) {
    std::vector<int> gpus;
    for (const Member& m : comm.members) {
      if (m.global_rank < 0 || m.global_rank >= static_cast<int>(topology_.gpus.size())) {
        comm.unmodeled = true;
        return nullptr;
      }
      gpus.push_back(m.global_rank);
    }
    auto& model = models_[gpus];
    if (!model) model = std::make_shared<const planner::CommModel>(topology_, gpus, tuning_);
    comm.model = model;
  }
  return comm.model.get();
}

nlohmann::json Job::trace() const {
  std::vector<Trace::RankActivity> activity;
  for (const auto& [id, c] : clients_)
    if ((!c.activity.empty() || !c.memory.empty()) && c.global_rank >= 0) {
      const wire::RankMemory* gpu = rank_gpu_memory(c);
      activity.push_back({c.global_rank, &c.activity, gpu ? &gpu->samples : nullptr});
    }
  return trace_.to_json(topology_, activity);
}

void Job::handle_comm_info(ClientId id, const wire::CommInfo& msg, uint64_t request_id) {
  Comm* comm = member_comm(id, msg.comm_id, msg.rank, request_id, nullptr, /*allow_failed=*/true);
  if (!comm) return;
  const planner::CommModel* model = model_of(*comm);
  if (!model) {
    reply_error(id, request_id, Status::kInvalidUsage,
                fmt::format("communicator {}: not every rank's GPU is in the cluster config, so it has no modeled "
                            "channels to describe",
                            comm->id));
    return;
  }
  wire::CommInfoReply out;
  planner::RankPlace place = planner::rank_place(*model, msg.rank);
  out.nnodes = place.nnodes;
  out.local_ranks = place.local_ranks;
  out.local_rank = place.local_rank;
  out.bus_id = topology_.gpus[model->gpu_of(msg.rank)].bus_id;
  if (msg.flags & wire::kInfoLines) out.lines = planner::init_info_lines(*model, msg.rank);
  if (msg.flags & wire::kGraphXml) out.graph_xml = planner::graph_xml(*model, msg.rank);
  if (msg.flags & wire::kTopologyXml)
    out.topology_xml = planner::topology_xml(topology_, topology_.gpus[model->gpu_of(msg.rank)].node);
  reply(id, request_id, out);
}

// A group's calls run nothing: each is priced on its communicator. Calls of one communicator
// run one after another, its Send/Recv side by side; communicators run side by side.
void Job::handle_simulate(ClientId id, const wire::Simulate& msg, uint64_t request_id) {
  std::map<uint64_t, std::pair<double, double>> per_comm;  // comm -> (collectives, longest p2p)
  // (comm, rank) pairs that send and (comm, rank) pairs that receive: a rank doing both on a
  // communicator copies both ways on its channels, as in the runtime's groups.
  std::set<std::pair<uint64_t, int>> sending, receiving;
  for (const wire::SimOp& op : msg.ops) {
    if (op.coll == CollType::kSend) sending.insert({op.comm_id, op.rank});
    if (op.coll == CollType::kRecv) receiving.insert({op.comm_id, op.rank});
  }
  for (const wire::SimOp& op : msg.ops) {
    Comm* comm = member_comm(id, op.comm_id, op.rank, request_id, nullptr, /*allow_failed=*/true);
    if (!comm) return;
    const planner::CommModel* model = model_of(*comm);
    if (!model) continue;  // unknown GPUs: nothing to price
    const int n = static_cast<int>(comm->members.size());
    const bool p2p = op.coll == CollType::kSend || op.coll == CollType::kRecv;
    if (op.root >= n || (p2p && op.root < 0)) {
      reply_error(id, request_id, Status::kInvalidArgument,
                  fmt::format("ncclGroupSimulateEnd: {} with root/peer {} on communicator {} of {} ranks",
                              wire::coll_type_name(op.coll), op.root, comm->id, n));
      return;
    }
    try {
      auto& [colls, longest_p2p] = per_comm[comm->id];
      if (op.coll == CollType::kSend)
        longest_p2p = std::max(longest_p2p, model->estimate_p2p(op.rank, op.root, op.bytes,
                                                                receiving.count({op.comm_id, op.rank}) > 0).time_us);
      else if (op.coll == CollType::kRecv)  // priced as its sender's Send, the sender's other calls unknown here
        longest_p2p = std::max(longest_p2p, model->estimate_p2p(op.root, op.rank, op.bytes,
                                                                sending.count({op.comm_id, op.rank}) > 0).time_us);
      else
        colls += model->estimate(op.coll, op.bytes, std::max(0, op.root)).time_us;
    } catch (const planner::TuningError& e) {
      reply_error(id, request_id, Status::kInvalidUsage, std::string("ncclGroupSimulateEnd: ") + e.what());
      return;
    }
  }
  wire::SimulateDone done;
  for (const auto& [comm, times] : per_comm) done.time_us = std::max(done.time_us, times.first + times.second);
  reply(id, request_id, done);
}

}  // namespace fakegpu::coord
