// Writes the wire fuzzer's seed frames, one file each, with the current encoder: a valid frame
// of every message type plus a few broken ones. The checked-in corpus (test/fuzz/corpus/wire)
// came from here; after a protocol change, rerun it on that directory to refresh the seeds.
//   make_wire_seeds DIR
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "wire.h"

namespace {
using namespace fakegpu::wire;
using Bytes = std::vector<uint8_t>;

// Header, fields, then bulk_bytes of a recognisable pattern.
template <typename Msg>
Bytes frame(const Msg& msg, uint64_t request_id = 1, size_t bulk_bytes = 0) {
  Bytes fields = encode_fields(msg);
  FrameHeader header{Msg::kType, request_id, static_cast<uint32_t>(fields.size()), fields.size() + bulk_bytes};
  Bytes out(kHeaderBytes);
  encode_header(header, out.data());
  out.insert(out.end(), fields.begin(), fields.end());
  for (size_t i = 0; i < bulk_bytes; ++i) out.push_back(static_cast<uint8_t>(i * 7));
  return out;
}

Bytes truncated(Bytes frame, size_t drop) {
  frame.resize(frame.size() > drop ? frame.size() - drop : 0);
  return frame;
}

CommKey some_key() {
  CommKey key;
  for (size_t i = 0; i < kCommKeyBytes; ++i) key.bytes[i] = static_cast<uint8_t>(0xa0 + i);
  return key;
}

std::vector<std::pair<std::string, Bytes>> seeds() {
  Hello hello;
  hello.env_rank = 1;
  hello.env_world_size = 2;
  hello.pid = 4242;
  hello.hostname = "node-a";
  hello.chunk_bytes = kDefaultChunkBytes;
  Hello foreign = hello;
  foreign.protocol_version = kProtocolVersion + 1;
  Hello observer = hello;
  observer.role = ClientRole::kObserver;
  observer.token = "0123456789abcdef";

  Collective allreduce;
  allreduce.comm_id = 1;
  allreduce.rank = 1;
  allreduce.seq = 3;
  allreduce.dtype = 7;  // ncclFloat32
  allreduce.count = 4;
  Collective shared = allreduce;
  shared.coll = CollType::kAllGather;
  shared.send = {2, 64};
  shared.recv = {2, 4096};
  Collective send = allreduce;
  send.coll = CollType::kSend;
  send.root = 0;
  send.flags = kNoPayload;

  CommShrink shrink;
  shrink.parent_comm = 1;
  shrink.shrink_index = 1;
  shrink.excluded = {2, 5};

  CommInfoReply info;
  info.nnodes = 2;
  info.local_ranks = 8;
  info.bus_id = "0000:01:00.0";
  info.lines = {{kSubsysInit, "Init COMPLETE"}, {kSubsysGraph, "Ring 00 : 0 1"}};
  info.graph_xml = "<graphs/>";

  Simulate sim;
  sim.ops = {{1, 0, CollType::kAllReduce, -1, 1 << 20}, {1, 0, CollType::kSend, 1, 4096}};

  Bytes bad_magic = frame(hello);
  bad_magic[0] ^= 0xff;

  return {
      {"hello.bin", frame(hello)},
      {"hello_foreign_version.bin", frame(foreign)},
      {"hello_truncated.bin", truncated(frame(hello), 3)},
      {"hello_observer.bin", frame(observer)},
      {"status_query.bin", frame(StatusQuery{})},
      {"open_control_ring.bin", frame(OpenControlRing{1 << 18})},
      {"payload_chunk.bin", frame(PayloadChunk{8192, 20000}, 1, 64)},
      {"status_reply.bin", frame(StatusReply{}, 2, 64)},
      {"welcome.bin", frame(Welcome{kProtocolVersion, 16, 7, "dev-cluster"})},
      {"error.bin", frame(ErrorReply{static_cast<int32_t>(Status::kInvalidUsage), "bad rank"})},
      {"comm_init.bin", frame(CommInit{some_key(), 8, 3, 3, "tp"})},
      {"comm_init_done.bin", frame(CommInitDone{9, 3})},
      {"comm_split.bin", frame(CommSplit{9, 3, 1, 0, 3})},
      {"comm_split_done.bin", frame(CommSplitDone{10, 4, 1, 3})},
      {"comm_destroy.bin", frame(CommDestroy{9, 3})},
      {"ack.bin", frame(Ack{})},
      {"collective_inline.bin", frame(allreduce, 2, 16)},
      {"collective_shared.bin", frame(shared)},
      {"collective_send_no_payload.bin", frame(send)},
      {"collective_header_only.bin", truncated(frame(allreduce, 2, 16), 16 + encode_fields(allreduce).size())},
      {"collective_done.bin", frame(CollectiveDone{3, 12.5}, 2, 16)},
      {"share_segment.bin", frame(ShareSegment{2, 1 << 20})},
      {"comm_shrink.bin", frame(shrink)},
      {"comm_revoke.bin", frame(CommRevoke{9, 3})},
      {"comm_info.bin", frame(CommInfo{9, 3, kInfoLines | kGraphXml})},
      {"comm_info_reply.bin", frame(info)},
      {"simulate.bin", frame(sim)},
      {"simulate_done.bin", frame(SimulateDone{812.5})},
      {"bad_magic.bin", bad_magic},
  };
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir);
  for (const auto& [name, bytes] : seeds()) {
    std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!out) {
      std::fprintf(stderr, "cannot write %s\n", (dir / name).c_str());
      return 1;
    }
  }
  return 0;
}
