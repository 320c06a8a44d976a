// The stub's connection to the coordinator (client.h), against a fake coordinator on a Unix
// socket: the handshake, requests and their replies, errors the coordinator sends, and a
// coordinator that goes away.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>

#include "client.h"
#include "fake_coordinator.h"

namespace fakegpu::stub {
namespace {

using test::FakeCoordinator;
using test::Frame;

wire::Simulate one_op_simulation() {
  wire::Simulate sim;
  sim.ops.push_back({7, 1, wire::CollType::kAllReduce, -1, 4096});
  return sim;
}

// Answers every Simulate with a time of 12.5 us per op.
void answer_simulations(const Frame& frame, FakeCoordinator::Connection& conn) {
  ASSERT_EQ(frame.header.type, wire::MsgType::kSimulate);
  auto sim = frame.decode<wire::Simulate>();
  conn.reply(frame.header.request_id, wire::SimulateDone{12.5 * static_cast<double>(sim.ops.size())});
}

TEST(StubClient, HandshakeSaysWhoTheRankIs) {
  FakeCoordinator coordinator(answer_simulations);
  std::shared_ptr<Client> client = Client::get(coordinator.endpoint());
  ASSERT_TRUE(client);
  EXPECT_FALSE(client->connection_lost());
  std::vector<Frame> frames = coordinator.frames();
  ASSERT_GE(frames.size(), 1u);
  ASSERT_EQ(frames[0].header.type, wire::MsgType::kHello);
  auto hello = frames[0].decode<wire::Hello>();
  EXPECT_EQ(hello.protocol_version, wire::kProtocolVersion);
  EXPECT_EQ(hello.pid, static_cast<uint32_t>(getpid()));
  EXPECT_EQ(hello.role, wire::ClientRole::kRank);
  EXPECT_GE(hello.chunk_bytes, wire::kMinChunkBytes);
  // The same endpoint gives the same connection: one per process.
  EXPECT_EQ(Client::get(coordinator.endpoint()), client);
}

TEST(StubClient, ARequestGetsItsOwnReply) {
  FakeCoordinator coordinator(answer_simulations);
  auto client = Client::get(coordinator.endpoint());
  wire::Simulate two = one_op_simulation();
  two.ops.push_back(two.ops[0]);
  auto first = client->submit(one_op_simulation());
  auto second = client->submit(two);
  // Waited for in the other order: each request still gets the reply to its own id.
  EXPECT_DOUBLE_EQ(second->reply<wire::SimulateDone>().time_us, 25.0);
  EXPECT_DOUBLE_EQ(first->reply<wire::SimulateDone>().time_us, 12.5);
  auto frames = coordinator.frames();
  ASSERT_GE(frames.size(), 2u);
  auto sent = frames.back().decode<wire::Simulate>();
  ASSERT_EQ(sent.ops.size(), 2u);
  EXPECT_EQ(sent.ops[1].comm_id, 7u);
  EXPECT_EQ(sent.ops[1].bytes, 4096u);
}

TEST(StubClient, ARequestsBulkDataTravelsWithItAndTheReplysLandsInTheBuffer) {
  FakeCoordinator coordinator([](const Frame& frame, FakeCoordinator::Connection& conn) {
    // Echoes the bulk data back, each byte plus one.
    std::vector<uint8_t> back = frame.bulk;
    for (auto& b : back) ++b;
    conn.reply(frame.header.request_id, wire::CollectiveDone{frame.decode<wire::Collective>().seq, 0, -1}, back.data(),
               back.size());
  });
  auto client = Client::get(coordinator.endpoint());
  wire::Collective desc;
  desc.seq = 3;
  const std::vector<uint8_t> send = {1, 2, 3, 4, 5};
  std::vector<uint8_t> recv(send.size());
  auto done = client->submit(desc, send.data(), send.size(), recv.data(), recv.size())->reply<wire::CollectiveDone>();
  EXPECT_EQ(done.seq, 3u);
  EXPECT_EQ(recv, (std::vector<uint8_t>{2, 3, 4, 5, 6}));
}

TEST(StubClient, AReplyTooLargeForItsBufferIsAnError) {
  FakeCoordinator coordinator([](const Frame& frame, FakeCoordinator::Connection& conn) {
    const std::vector<uint8_t> too_much(64, 7);
    conn.reply(frame.header.request_id, wire::CollectiveDone{}, too_much.data(), too_much.size());
  });
  auto client = Client::get(coordinator.endpoint());
  std::vector<uint8_t> recv(8);
  auto request = client->submit(wire::Collective{}, nullptr, 0, recv.data(), recv.size());
  try {
    request->reply<wire::CollectiveDone>();
    FAIL() << "a 64-byte reply fitted an 8-byte buffer";
  } catch (const NcclError& e) {
    EXPECT_EQ(e.code(), ncclInternalError);
    EXPECT_NE(std::string(e.what()).find("8-byte buffer"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(client->connection_lost());  // the connection itself is still in step
}

TEST(StubClient, TheCoordinatorsErrorBecomesTheCallsResult) {
  FakeCoordinator coordinator([](const Frame& frame, FakeCoordinator::Connection& conn) {
    conn.fail(frame.header.request_id, wire::Status::kInvalidArgument, "count differs from rank 0's");
  });
  auto client = Client::get(coordinator.endpoint());
  auto request = client->submit(one_op_simulation());
  try {
    request->reply<wire::SimulateDone>();
    FAIL() << "an error reply was taken for a result";
  } catch (const NcclError& e) {
    EXPECT_EQ(e.code(), ncclInvalidArgument);
    EXPECT_STREQ(e.what(), "count differs from rank 0's");
  }
  // An error answers one request; the connection goes on.
  EXPECT_FALSE(client->connection_lost());
}

TEST(StubClient, AnAnswerOfTheWrongKindIsAnInternalError) {
  FakeCoordinator coordinator([](const Frame& frame, FakeCoordinator::Connection& conn) {
    conn.reply(frame.header.request_id, wire::CollectiveDone{});
  });
  auto client = Client::get(coordinator.endpoint());
  try {
    client->submit(one_op_simulation())->reply<wire::SimulateDone>();
    FAIL() << "a CollectiveDone was read as a SimulateDone";
  } catch (const NcclError& e) {
    EXPECT_EQ(e.code(), ncclInternalError);
  }
}

TEST(StubClient, ARefusedHandshakeFailsTheConnectionWithTheCoordinatorsReason) {
  FakeCoordinator coordinator([](const Frame&, FakeCoordinator::Connection&) {});
  coordinator.refuse_hello(wire::Status::kInvalidUsage, "this job needs a token");
  try {
    Client::get(coordinator.endpoint());
    FAIL() << "a refused client connected";
  } catch (const NcclError& e) {
    EXPECT_EQ(e.code(), ncclInvalidUsage);
    EXPECT_STREQ(e.what(), "this job needs a token");
  }
}

TEST(StubClient, ACoordinatorThatGoesAwayFailsWhatWaitsAndWhatComesAfter) {
  std::atomic<int> seen{0};
  FakeCoordinator coordinator([&](const Frame&, FakeCoordinator::Connection& conn) {
    ++seen;
    conn.close();  // dies without answering
  });
  auto client = Client::get(coordinator.endpoint());
  auto request = client->submit(one_op_simulation());
  try {
    request->reply<wire::SimulateDone>();
    FAIL() << "a request was answered by a coordinator that died";
  } catch (const NcclError& e) {
    EXPECT_EQ(e.code(), ncclSystemError);
    EXPECT_NE(std::string(e.what()).find("lost connection to the fakegpu coordinator"), std::string::npos) << e.what();
  }
  EXPECT_EQ(seen.load(), 1);
  EXPECT_TRUE(client->connection_lost());
  try {
    client->submit(one_op_simulation());
    FAIL() << "a request was sent over a lost connection";
  } catch (const NcclError& e) {
    EXPECT_EQ(e.code(), ncclSystemError);
  }
}

}  // namespace
}  // namespace fakegpu::stub
