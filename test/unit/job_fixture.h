// A Job driven directly, without sockets: the fixture the Job tests share.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "job.h"
#include "reduce.h"

namespace fakegpu::coord::testing {

using namespace fakegpu::wire;

inline ClusterConfig four_rank_cluster() {
  return parse_cluster_config(R"(version: 1
cluster: {name: test}
nodes:
  - {id: n0, ranks: [0, 1], gpus: [{profile: h100}, {profile: h100}]}
  - {id: n1, ranks: [2, 3], gpus: [{profile: h100}, {profile: h100}]}
fabric:
  intra_node: {type: nvlink, bandwidth_gbps: 3600, latency_us: 1}
  inter_node: {type: infiniband, bandwidth_gbps: 400, latency_us: 5}
)", "test.yaml");
}

struct Sent {
  ClientId client;
  OutFrame frame;
};

class RecordingOutbox : public Outbox {
 public:
  void send(ClientId client, OutFrame frame) override { sent.push_back({client, std::move(frame)}); }
  void disconnect(ClientId client) override { disconnected.push_back(client); }
  // Removes and returns the frames sent to one client.
  std::vector<OutFrame> take(ClientId client) {
    std::vector<OutFrame> out;
    for (auto it = sent.begin(); it != sent.end();) {
      if (it->client == client) {
        out.push_back(std::move(it->frame));
        it = sent.erase(it);
      } else {
        ++it;
      }
    }
    return out;
  }
  std::vector<Sent> sent;
  std::vector<ClientId> disconnected;
};

class JobTest : public ::testing::Test {
 protected:
  JobTest() : JobTest("") {}
  // With a token, every client must present it.
  explicit JobTest(const std::string& token)
      : job(four_rank_cluster(), ServerInfo{"unix", "test.sock", "test.yaml", token}, out) {}

  template <typename Msg>
  void post(ClientId c, const Msg& msg, const std::vector<uint8_t>& bulk = {}) {
    auto body = encode_fields(msg);
    FrameHeader h{Msg::kType, next_request++, static_cast<uint32_t>(body.size()), body.size() + bulk.size()};
    body.insert(body.end(), bulk.begin(), bulk.end());
    job.on_frame(c, h, std::move(body));
  }

  void connect(ClientId c, int env_rank = -1) {
    job.on_connect(c);
    Hello h;
    h.env_rank = env_rank;
    h.pid = 1000 + static_cast<uint32_t>(c);
    h.hostname = "host";
    post(c, h);
    auto frames = out.take(c);
    ASSERT_EQ(frames.size(), 1u);
    ASSERT_EQ(frames[0].type, MsgType::kWelcome);
  }

  // Joins clients 1..n as ranks 0..n-1 of one communicator; returns its id.
  uint64_t init_comm(int n) {
    CommKey key = {};
    key.bytes[0] = static_cast<uint8_t>(++keys);
    for (int r = 0; r < n; ++r) post(ClientId(r + 1), CommInit{key, n, r, r, ""});
    uint64_t id = 0;
    for (int r = 0; r < n; ++r) {
      auto frames = out.take(ClientId(r + 1));
      EXPECT_EQ(frames.size(), 1u);
      EXPECT_EQ(frames[0].type, MsgType::kCommInitDone);
      auto done = decode_fields<CommInitDone>(frames[0].fields.data(), frames[0].fields.size());
      if (r == 0) id = done.comm_id;
      EXPECT_EQ(done.comm_id, id);
    }
    return id;
  }

  static std::vector<uint8_t> floats(std::vector<float> v) {
    std::vector<uint8_t> b(v.size() * sizeof(float));
    std::memcpy(b.data(), v.data(), b.size());
    return b;
  }

  static std::vector<float> result_of(const OutFrame& f) {
    std::vector<float> v;
    for (const Bulk& b : f.bulk) {
      size_t at = v.size();
      v.resize(at + b.size / sizeof(float));
      std::memcpy(v.data() + at, b.buffer->data() + b.offset, b.size);
    }
    return v;
  }

  static Collective allreduce(uint64_t comm, int rank, uint64_t seq, uint64_t count, RedOp op = RedOp::kSum) {
    Collective c;
    c.comm_id = comm;
    c.rank = rank;
    c.seq = seq;
    c.dtype = static_cast<uint8_t>(DataType::kFloat32);
    c.op = static_cast<uint8_t>(op);
    c.count = count;
    return c;
  }

  static std::string error_text(const OutFrame& f) {
    EXPECT_EQ(f.type, MsgType::kError);
    return decode_fields<ErrorReply>(f.fields.data(), f.fields.size()).message;
  }

  RecordingOutbox out;
  Job job;
  uint64_t next_request = 1;
  int keys = 0;
};

}  // namespace fakegpu::coord::testing
