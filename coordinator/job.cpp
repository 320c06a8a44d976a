#include "job.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <utility>

#include "env.h"
#include "tuning_from_env.h"

namespace fakegpu::coord {

using wire::Status;

namespace {

uint64_t default_max_buffer_bytes() {
  if (std::optional<uint64_t> n = env::find(env::kCoordinatorMaxBuffer)) return *n;
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  while (meminfo >> key >> kib)
    if (key == "MemAvailable:") return std::min<uint64_t>(kib * 1024 / 2, wire::kMaxBodyBytes);
  return uint64_t{1} << 30;
}

// Compares in time that does not depend on where the strings differ, so the token cannot be
// found a byte at a time.
bool same_secret(const std::string& given, const std::string& expected) {
  if (given.size() != expected.size()) return false;  // the length is not the secret
  unsigned diff = 0;
  for (size_t i = 0; i < given.size(); ++i) diff |= static_cast<unsigned char>(given[i] ^ expected[i]);
  return diff == 0;
}

}  // namespace

Job::Job(ClusterConfig cluster, ServerInfo server, Outbox& out)
    : cluster_(std::move(cluster)),
      topology_(planner::Topology::from_config(cluster_)),
      server_(std::move(server)),
      out_(out),
      started_(std::chrono::system_clock::now()),
      timeline_(topology_),
      // FAKEGPU_TRACE_MAX_OPS: how many operations the trace keeps (the first ones).
      trace_(static_cast<size_t>(env::get(env::kTraceMaxOps))),
      max_buffer_bytes_(default_max_buffer_bytes()),
      // FAKEGPU_COORDINATOR_TIMEOUT_MS: how long ranks wait for a peer that never posts. Generous
      // by default, like torch's, so a slow but healthy job never trips it.
      rendezvous_timeout_(env::get(env::kCoordinatorTimeout)),
      // FAKEGPU_DEADLOCK_TIMEOUT_MS: how long ranks that wait only for each other must stay quiet
      // before they are declared deadlocked.
      deadlock_timeout_(std::min<std::chrono::milliseconds>(env::get(env::kDeadlockTimeout), rendezvous_timeout_)) {
  // The coordinator models with the NCCL_* overrides of the environment it was started in,
  // which fgpu passes on from the job's, over those the cluster gives every job (nccl_conf).
  tuning_ = planner::tuning_from_env(cluster_);
  if (std::optional<std::string> list = env::find(env::kRepresentative); list && !list->empty())
    representatives_ = parse_rank_list(*list, cluster_.world_size());
}

std::string Job::too_big(uint64_t bytes, const std::string& what) const {
  return fmt::format("{} needs {} bytes buffered in the coordinator, more than its limit of {} bytes "
                     "(FAKEGPU_COORDINATOR_MAX_BUFFER; by default half the memory available). Buffers in fake "
                     "device memory (cudaMalloc) over the unix transport are used in place, with no such copy",
                     what, bytes, max_buffer_bytes_);
}

void Job::on_oversized_frame(ClientId id, const wire::FrameHeader& header, std::vector<uint8_t> fields) {
  std::string what = fmt::format("a {} frame from {}", wire::msg_type_name(header.type), describe_client(id));
  if (header.type == wire::MsgType::kCollective) {
    try {
      auto msg = wire::decode_fields<wire::Collective>(fields.data(), fields.size());
      what = fmt::format("{} from rank {} of communicator {}", wire::coll_type_name(msg.coll), msg.rank, msg.comm_id);
      std::string why = too_big(header.body_bytes, what);
      // Its peers could never complete the operation: fail the communicator, not just this call.
      if (Comm* comm = member_comm(id, msg.comm_id, msg.rank, header.request_id)) {
        comm->failure = why;
        fail_pending(*comm, Status::kSystemError, why);
        reply_error(id, header.request_id, Status::kSystemError, why);
      }
      return;
    } catch (const wire::WireError&) {
      // fall through: answer as for any other oversized frame
    }
  }
  reply_error(id, header.request_id, Status::kSystemError, too_big(header.body_bytes, what));
}

SharedFd::~SharedFd() {
  if (fd >= 0) ::close(fd);
}

uint64_t OutFrame::bulk_bytes() const {
  uint64_t n = 0;
  for (const Bulk& b : bulk) n += b.size;
  return n;
}

void Job::reply_error(ClientId client, uint64_t request_id, Status code, const std::string& message) {
  if (is_stand_in(client)) return;  // its representative hears the same error
  auto it = clients_.find(client);
  if (it != clients_.end()) ++it->second.errors;
  stats_.count_error(message, it != clients_.end() ? it->second.global_rank : -1);
  reply(client, request_id, wire::ErrorReply{static_cast<int32_t>(code), message});
}

std::string Job::describe_client(ClientId id) const {
  auto it = clients_.find(id);
  if (it == clients_.end()) return fmt::format("client {}", id);
  const Client& c = it->second;
  if (c.stood_in) return fmt::format("global rank {} (stood in for by {})", c.global_rank, describe_client(c.representative));
  if (c.global_rank < 0) return fmt::format("pid {} on {}", c.hello.pid, c.hello.hostname);
  return fmt::format("global rank {} (pid {} on {})", c.global_rank, c.hello.pid, c.hello.hostname);
}

uint64_t Job::chunk_bytes_of(ClientId id) const {
  auto it = clients_.find(id);
  return it == clients_.end() ? 0 : it->second.hello.chunk_bytes;
}

void Job::on_connect(ClientId client) { clients_[client]; }

bool Job::greeted(ClientId client) const {
  auto it = clients_.find(client);
  return it != clients_.end() && it->second.greeted;
}

void Job::on_frame(ClientId id, const wire::FrameHeader& header, std::vector<uint8_t> body, int fd,
                   std::shared_ptr<std::vector<uint8_t>> payload) {
  Client& client = clients_[id];
  // Closes the descriptor unless a handler (only ShareSegment's) takes it.
  struct FdOwner {
    int fd;
    ~FdOwner() {
      if (fd >= 0) ::close(fd);
    }
  } owned{fd};
  try {
    if (header.request_id == 0) throw wire::WireError("request id 0 is reserved");
    if (header.type != wire::MsgType::kCollective && header.type != wire::MsgType::kRankActivity &&
        header.type != wire::MsgType::kRankOperators && header.type != wire::MsgType::kRankMemory &&
        header.type != wire::MsgType::kGroupRanks)
      ++awaited_frames_;
    if (header.type != wire::MsgType::kCollective && (header.bulk_bytes() != 0 || payload))
      throw wire::WireError(fmt::format("{} frame carries unexpected bulk data", wire::msg_type_name(header.type)));
    auto fields = [&](auto tag) { return wire::decode_fields<decltype(tag)>(body.data(), header.fields_bytes); };
    if (!client.greeted) {
      if (header.type != wire::MsgType::kHello)
        throw wire::WireError(fmt::format("expected Hello as the first frame, got {}", wire::msg_type_name(header.type)));
      handle_hello(id, client, fields(wire::Hello{}), header.request_id);
      return;
    }
    if (client.observer) {
      if (header.type != wire::MsgType::kStatusQuery)
        throw wire::WireError(fmt::format("an observer may not send {}", wire::msg_type_name(header.type)));
      fields(wire::StatusQuery{});
      handle_status_query(id, header.request_id);
      return;
    }
    switch (header.type) {
      case wire::MsgType::kCommInit: handle_comm_init(id, client, fields(wire::CommInit{}), header.request_id); break;
      case wire::MsgType::kCommSplit: handle_comm_split(id, fields(wire::CommSplit{}), header.request_id); break;
      case wire::MsgType::kCommDestroy: handle_comm_destroy(id, fields(wire::CommDestroy{}), header.request_id); break;
      case wire::MsgType::kCommShrink: handle_comm_shrink(id, fields(wire::CommShrink{}), header.request_id); break;
      case wire::MsgType::kCommRevoke: handle_comm_revoke(id, fields(wire::CommRevoke{}), header.request_id); break;
      case wire::MsgType::kCommInfo: handle_comm_info(id, fields(wire::CommInfo{}), header.request_id); break;
      case wire::MsgType::kSimulate: handle_simulate(id, fields(wire::Simulate{}), header.request_id); break;
      case wire::MsgType::kRankActivity: handle_rank_activity(client, fields(wire::RankActivity{})); break;
      case wire::MsgType::kRankOperators: handle_rank_operators(client, fields(wire::RankOperators{})); break;
      case wire::MsgType::kRankMemory: handle_rank_memory(client, fields(wire::RankMemory{})); break;
      case wire::MsgType::kGroupRanks: handle_group_ranks(client, fields(wire::GroupRanks{})); break;
      case wire::MsgType::kShareSegment: {
        auto msg = fields(wire::ShareSegment{});
        handle_share_segment(client, msg, std::exchange(owned.fd, -1));
        break;
      }
      case wire::MsgType::kCollective: {
        auto msg = fields(wire::Collective{});
        if (!(msg.flags & wire::kPeerExchange)) ++awaited_frames_;
        size_t bulk_offset = 0;
        if (!payload && header.bulk_bytes() != 0) {
          bulk_offset = header.fields_bytes;
          payload = std::make_shared<std::vector<uint8_t>>(std::move(body));
        }
        handle_collective(id, msg, std::move(payload), bulk_offset, header.request_id);
        break;
      }
      default:
        throw wire::WireError(fmt::format("a client may not send {}", wire::msg_type_name(header.type)));
    }
  } catch (const wire::WireError& e) {
    // A malformed frame means the stream can no longer be trusted: answer and drop only this client.
    reply_error(id, header.request_id, Status::kInternalError, fmt::format("protocol error: {}", e.what()));
    out_.disconnect(id);
  } catch (const std::exception& e) {
    // Anything else (memory ran out, or a bug) fails this request and drops this client, whose
    // peers then hear of it: the job ends with errors and a report, never with a crash.
    std::string why = fmt::format("the coordinator failed to handle a {} frame from {}: {}",
                                  wire::msg_type_name(header.type), describe_client(id), e.what());
    fmt::print(stderr, "fakegpu-coordinator: internal error: {}\n", why);
    reply_error(id, header.request_id, Status::kInternalError, why);
    out_.disconnect(id);
  }
}

void Job::handle_hello(ClientId id, Client& client, const wire::Hello& hello, uint64_t request_id) {
  if (hello.protocol_version != wire::kProtocolVersion) {
    reply_error(id, request_id, Status::kInvalidUsage,
                fmt::format("protocol version mismatch: the rank's libnccl speaks version {} but this coordinator "
                            "speaks version {}; use libraries and coordinator from the same fakegpu build",
                            hello.protocol_version, wire::kProtocolVersion));
    out_.disconnect(id);
    return;
  }
  if (!server_.token.empty() && !same_secret(hello.token, server_.token)) {
    fmt::print(stderr, "fakegpu-coordinator: refused pid {} on {}: {} FAKEGPU_COORDINATOR_TOKEN\n", hello.pid,
               hello.hostname, hello.token.empty() ? "no" : "a wrong");
    reply_error(id, request_id, Status::kInvalidUsage,
                hello.token.empty() ? "this coordinator requires a token: set FAKEGPU_COORDINATOR_TOKEN to its value"
                                    : "FAKEGPU_COORDINATOR_TOKEN does not match the coordinator's token");
    out_.disconnect(id);
    return;
  }
  if (hello.chunk_bytes != 0 && hello.chunk_bytes < wire::kMinChunkBytes) {
    reply_error(id, request_id, Status::kInvalidArgument,
                fmt::format("FAKEGPU_STAGING_CHUNK_BYTES of {} is below the minimum of {} bytes", hello.chunk_bytes,
                            wire::kMinChunkBytes));
    out_.disconnect(id);
    return;
  }
  client.greeted = true;
  client.observer = hello.role == wire::ClientRole::kObserver;
  client.hello = hello;
  if (hello.env_rank >= 0 && hello.env_rank < cluster_.world_size()) client.global_rank = hello.env_rank;
  wire::Welcome w;
  w.world_size = static_cast<uint32_t>(cluster_.world_size());
  w.client_id = id;
  w.cluster_name = cluster_.name;
  reply(id, request_id, w);
}

Comm* Job::member_comm(ClientId client, uint64_t comm_id, int rank, uint64_t request_id,
                            const uint64_t* op_seq, bool allow_failed) {
  Comm* found = comms_.find(comm_id);
  if (!found) {
    reply_error(client, request_id, Status::kInvalidUsage, fmt::format("unknown communicator {}", comm_id));
    return nullptr;
  }
  Comm& comm = *found;
  if (rank < 0 || rank >= static_cast<int>(comm.members.size()) || comm.members[rank].client != client) {
    reply_error(client, request_id, Status::kInvalidUsage,
                fmt::format("{} is not rank {} of communicator {}", describe_client(client), rank, comm_id));
    return nullptr;
  }
  if (comm.members[rank].destroyed) {
    reply_error(client, request_id, Status::kInvalidUsage,
                fmt::format("rank {} of communicator {} was already destroyed", rank, comm_id));
    return nullptr;
  }
  // A rank joining an operation that already failed learns that failure, the root cause,
  // rather than what its peers did after hearing of it.
  const bool joins_failed_op = op_seq && comm.ops.count(*op_seq) && !comm.ops.at(*op_seq).failure.empty();
  if (!comm.failure.empty() && !joins_failed_op && !allow_failed) {
    ++comm.refused;
    reply_error(client, request_id, Status::kRemoteError, comm.failure);
    return nullptr;
  }
  return &comm;
}

void Job::handle_comm_destroy(ClientId id, const wire::CommDestroy& msg, uint64_t request_id) {
  Comm* found = comms_.find(msg.comm_id);
  if (!found || msg.rank < 0 || msg.rank >= static_cast<int>(found->members.size()) ||
      found->members[msg.rank].client != id) {
    reply_error(id, request_id, Status::kInvalidUsage,
                fmt::format("ncclCommDestroy: {} is not rank {} of communicator {}", describe_client(id), msg.rank,
                            msg.comm_id));
    return;
  }
  Comm& comm = *found;
  comm.members[msg.rank].destroyed = true;
  if (stands_in()) retire_stand_ins(comm, id);
  reply(id, request_id, wire::Ack{});
  // Operations its peers already posted can never complete: tell them now rather than at the timeout.
  for (auto& [seq, op] : comm.ops)
    if (op.failure.empty() && !op.request_ids[msg.rank]) fail_departed(comm, seq, op, msg.rank);
  retire_if_finished(msg.comm_id);
}

void Job::handle_comm_revoke(ClientId id, const wire::CommRevoke& msg, uint64_t request_id) {
  Comm* comm = member_comm(id, msg.comm_id, msg.rank, request_id, nullptr, /*allow_failed=*/true);
  if (!comm) return;
  if (comm->failure.empty())
    comm->failure = fmt::format("communicator {} was revoked by rank {}", comm->id, msg.rank);
  fail_pending(*comm, Status::kRemoteError, comm->failure);
  reply(id, request_id, wire::Ack{});
}

void Job::on_disconnect(ClientId id) {
  auto cit = clients_.find(id);
  if (cit == clients_.end()) return;
  if (!cit->second.greeted || cit->second.observer) {  // nothing of it belongs in the report
    clients_.erase(cit);
    return;
  }
  cit->second.disconnected = true;
  cit->second.segments.clear();  // unmapped once no operation's data still moves in them
  departed_.push_back(id);
  // Any communicator this client still belonged to can no longer complete an operation:
  // fail what is pending so its peers get an error instead of waiting forever.
  for (auto& [comm_id, comm] : comms_) {
    for (size_t r = 0; r < comm.members.size(); ++r) {
      const Member& m = comm.members[r];
      if (m.client != id || m.destroyed) continue;
      std::string why = fmt::format("rank {} of communicator {} ({}) disconnected without destroying it", r, comm_id,
                                    describe_client(id));
      if (comm.failure.empty()) {
        comm.failure = why;
        fail_pending(comm, Status::kRemoteError, why);
      }
      fail_regrouping(comm, static_cast<int>(r), why);  // even on a failed comm: survivors may be regrouping
    }
  }
  // The ranks it stood for leave with it.
  std::vector<uint64_t> left = comms_.comms_of(id);
  for (auto& [other_id, other] : clients_)
    if (other.stood_in && other.representative == id && !other.disconnected) {
      other.disconnected = true;
      for (uint64_t comm_id : comms_.comms_of(other_id)) left.push_back(comm_id);
    }
  for (uint64_t comm_id : left) retire_if_finished(comm_id);
  forget_departed_clients();
}

}  // namespace fakegpu::coord
