#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <numeric>
#include <thread>
#include <vector>

#include "control_ring.h"

using namespace fakegpu;

namespace {

std::vector<uint8_t> iota_bytes(size_t n, uint8_t start) {
  std::vector<uint8_t> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

}  // namespace

TEST(ControlRing, BytesComeOutInOrderAcrossTheWrap) {
  ControlMapping rank = ControlMapping::create(64);
  ControlMapping coord = ControlMapping::map(dup(rank.fd()));  // the coordinator's own mapping
  ByteRing in = rank.to_coord(), out = coord.to_coord();
  std::vector<uint8_t> got;
  for (int round = 0; round < 10; ++round) {  // 10 x 50 bytes through 64: wraps many times
    auto chunk = iota_bytes(50, static_cast<uint8_t>(round * 50));
    ASSERT_EQ(in.write(chunk.data(), chunk.size()), 50u);
    EXPECT_EQ(out.readable(), 50u);
    std::vector<uint8_t> buf(50);
    ASSERT_EQ(out.read(buf.data(), 30), 30u);
    ASSERT_EQ(out.read(buf.data() + 30, 100), 20u);  // only what is there
    EXPECT_EQ(buf, chunk);
  }
}

TEST(ControlRing, AFullRingTakesOnlyWhatFitsAndAnEmptyOneGivesNothing) {
  ControlMapping m = ControlMapping::create(64);
  ByteRing r = m.to_rank();
  auto bytes = iota_bytes(100, 0);
  EXPECT_EQ(r.write(bytes.data(), bytes.size()), 64u);
  EXPECT_EQ(r.writable(), 0u);
  EXPECT_EQ(r.write(bytes.data(), 1), 0u);
  std::vector<uint8_t> buf(64);
  EXPECT_EQ(r.read(buf.data(), 64), 64u);
  EXPECT_EQ(r.read(buf.data(), 1), 0u);
  EXPECT_EQ(buf, std::vector<uint8_t>(bytes.begin(), bytes.begin() + 64));
  // The two directions are independent.
  EXPECT_EQ(m.to_coord().readable(), 0u);
}

TEST(ControlRing, CorruptPositionsAreRefused) {
  ControlMapping m = ControlMapping::create(64);
  m.area()->to_coord.head = 1000;  // a peer claiming more bytes than the ring holds
  ByteRing r = m.to_coord();
  uint8_t b[8];
  EXPECT_THROW(r.read(b, sizeof b), RingError);
  EXPECT_THROW(r.readable(), RingError);
}

TEST(ControlRing, MapChecksTheAreaItIsGiven) {
  EXPECT_THROW(ControlMapping::create(48), RingError);  // not a power of two
  // An unsealed memfd could shrink under the coordinator's mapping.
  int fd = memfd_create("not-sealed", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, ControlArea::kBytes + 2 * 64), 0);
  EXPECT_THROW(ControlMapping::map(fd), RingError);  // and closes fd
  // A sealed area whose header was never written.
  ControlMapping good = ControlMapping::create(64);
  good.area()->magic = 0;
  EXPECT_THROW(ControlMapping::map(dup(good.fd())), RingError);
  good.area()->magic = ControlArea::kMagic;
  EXPECT_NO_THROW(ControlMapping::map(dup(good.fd())));
}

TEST(ControlRing, ASleepingRankIsWokenOnlyWhenItSaidSo) {
  ControlMapping m = ControlMapping::create(64);
  ControlArea* area = m.area();
  wake_rank(area);  // nobody asleep: the bell does not move
  EXPECT_EQ(area->rank_bell.load(), 0u);

  ByteRing to_rank = m.to_rank();
  std::atomic<bool> woke{false};
  std::thread rank([&] {
    for (;;) {
      uint32_t bell = area->rank_bell.load();
      area->rank_asleep.store(1);
      if (to_rank.readable() > 0) break;
      futex_wait(&area->rank_bell, bell, std::chrono::seconds(10));
    }
    woke = true;
  });
  while (area->rank_asleep.load() == 0) std::this_thread::yield();
  uint8_t byte = 7;
  ASSERT_EQ(to_rank.write(&byte, 1), 1u);
  wake_rank(area);
  rank.join();
  EXPECT_TRUE(woke);
  EXPECT_GE(area->rank_bell.load(), 1u);  // it said it slept, so the waker rang
}
