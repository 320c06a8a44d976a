// Operations that move much data run off the event loop: the Job hands their work to its data
// plane and replies when it is done, serving everything else meanwhile.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <deque>

#include "job_fixture.h"

using namespace fakegpu;
using namespace fakegpu::coord;
using namespace fakegpu::coord::testing;

namespace {

// Holds the work until the test runs it, as a busy data-plane thread would.
class DeferredDataPlane : public DataPlane {
 public:
  void run(std::function<void()> work, std::function<void()> then) override {
    queue.emplace_back(std::move(work), std::move(then));
  }
  void run_all() {
    while (!queue.empty()) {
      auto next = std::move(queue.front());
      queue.pop_front();
      next.first();
      next.second();
    }
  }
  std::deque<std::pair<std::function<void()>, std::function<void()>>> queue;
};

class DataPlaneTest : public JobTest {
 protected:
  DataPlaneTest() { job.use_data_plane(plane); }

  // Shares `floats` as client c's device-memory segment `segment`; returns its mapping here.
  float* share(ClientId c, uint64_t segment, size_t floats) {
    int fd = memfd_create("segment", MFD_CLOEXEC);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(ftruncate(fd, floats * sizeof(float)), 0);
    void* mine = mmap(nullptr, floats * sizeof(float), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    EXPECT_NE(mine, MAP_FAILED);
    mappings.emplace_back(mine, floats * sizeof(float));
    auto body = encode_fields(ShareSegment{segment, floats * sizeof(float)});
    FrameHeader h{MsgType::kShareSegment, next_request++, static_cast<uint32_t>(body.size()), body.size()};
    job.on_frame(c, h, std::move(body), fd);  // the Job owns fd now
    return static_cast<float*>(mine);
  }
  ~DataPlaneTest() override {
    for (auto [p, n] : mappings) munmap(p, n);
  }

  DeferredDataPlane plane;
  std::vector<std::pair<void*, size_t>> mappings;
};

constexpr size_t kLarge = Job::kAsyncDataBytes / sizeof(float);  // elements of a call that goes to the plane

}  // namespace

TEST_F(DataPlaneTest, ALargeAllReduceRepliesWhenItsDataHasMoved) {
  for (ClientId c = 1; c <= 2; ++c) connect(c, static_cast<int>(c) - 1);
  uint64_t comm = init_comm(2);
  float* buf[2];
  for (int r = 0; r < 2; ++r) {
    buf[r] = share(ClientId(r + 1), 7, kLarge);
    for (size_t i = 0; i < kLarge; ++i) buf[r][i] = static_cast<float>(r + 1);
  }
  for (int r = 0; r < 2; ++r) {
    Collective c = allreduce(comm, r, 1, kLarge);
    c.send = c.recv = BufferRef{7, 0};
    post(ClientId(r + 1), c);
  }
  ASSERT_EQ(plane.queue.size(), 1u);
  EXPECT_TRUE(out.sent.empty()) << "no reply before the data has moved";
  EXPECT_EQ(buf[0][0], 1.0f);

  // Meanwhile a small operation on another communicator completes at once, on this thread.
  uint64_t other = init_comm(2);
  post(1, allreduce(other, 0, 1, 2), floats({1, 2}));
  post(2, allreduce(other, 1, 1, 2), floats({3, 4}));
  for (ClientId c : {1, 2}) EXPECT_EQ(result_of(out.take(c).at(0)), (std::vector<float>{4, 6}));
  EXPECT_EQ(plane.queue.size(), 1u);

  plane.run_all();
  for (ClientId c : {1, 2}) {
    auto frames = out.take(c);
    ASSERT_EQ(frames.size(), 1u);
    EXPECT_EQ(frames[0].type, MsgType::kCollectiveDone);
  }
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(buf[r][0], 3.0f);
    EXPECT_EQ(buf[r][kLarge - 1], 3.0f);
  }
}

// A rank that disconnects while its operation's data is moving: its segment stays mapped until
// the work is done, and the reply to the gone rank goes nowhere.
TEST_F(DataPlaneTest, ARankLeavingWhileItsDataMovesIsHarmless) {
  for (ClientId c = 1; c <= 2; ++c) connect(c, static_cast<int>(c) - 1);
  uint64_t comm = init_comm(2);
  float* buf[2];
  for (int r = 0; r < 2; ++r) {
    buf[r] = share(ClientId(r + 1), 9, kLarge);
    for (size_t i = 0; i < kLarge; ++i) buf[r][i] = 2.0f;
  }
  for (int r = 0; r < 2; ++r) {
    Collective c = allreduce(comm, r, 1, kLarge);
    c.send = c.recv = BufferRef{9, 0};
    post(ClientId(r + 1), c);
  }
  job.on_disconnect(2);
  plane.run_all();
  EXPECT_EQ(buf[0][kLarge / 2], 4.0f);
  EXPECT_EQ(buf[1][kLarge / 2], 4.0f) << "the gone rank's segment was still written, not unmapped under the work";
  EXPECT_EQ(out.take(1).at(0).type, MsgType::kCollectiveDone);
}

// A large send to a rank's device memory moves on the plane too; both sides hear when it is done.
TEST_F(DataPlaneTest, ALargeSendMovesOnThePlane) {
  for (ClientId c = 1; c <= 2; ++c) connect(c, static_cast<int>(c) - 1);
  uint64_t comm = init_comm(2);
  float* src = share(1, 3, kLarge);
  float* dst = share(2, 3, kLarge);
  for (size_t i = 0; i < kLarge; ++i) src[i] = static_cast<float>(i);
  Collective send = allreduce(comm, 0, 1, kLarge), recv = allreduce(comm, 1, 1, kLarge);
  send.coll = CollType::kSend, send.root = 1, send.send = BufferRef{3, 0};
  recv.coll = CollType::kRecv, recv.root = 0, recv.recv = BufferRef{3, 0};
  post(1, send);
  post(2, recv);
  ASSERT_EQ(plane.queue.size(), 1u);
  EXPECT_TRUE(out.sent.empty());
  plane.run_all();
  EXPECT_EQ(out.take(1).at(0).type, MsgType::kCollectiveDone);
  EXPECT_EQ(out.take(2).at(0).type, MsgType::kCollectiveDone);
  EXPECT_EQ(dst[12345], 12345.0f);
}
