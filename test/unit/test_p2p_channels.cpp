// Point-to-point channels: NCCL's split of a Send or Recv over its channels, and what a
// channel carries (about 40 GB/s, half each way when it both sends and receives; across the
// network no more than 14 GB/s each way).
#include <gtest/gtest.h>

#include <numeric>

#include "comm_model.h"
#include "preset_model.h"

namespace fakegpu::planner {
namespace {

using wire::CollType;

constexpr double kMiB = 1 << 20;

// One node of 8 H100: 32 p2p channels, a message on 4 of them until its parts pass 16 MiB, then
// doubled; nccl-tests' sendrecv (every channel sends and receives) moves 20 GB/s a channel each
// way: 80 GB/s at 32 and 64 MiB, then the links.
TEST(P2pChannels, SendRecvOnOneNodeRunsOnTheChannelsNcclGivesIt) {
  Preset h100("dgx-h100-1node.yaml");
  const struct {
    double mib;
    int channels;
  } rows[] = {{32, 4}, {64, 4}, {128, 8}, {256, 16}, {512, 32}, {1024, 32}};
  for (const auto& row : rows) {
    SCOPED_TRACE(row.mib);
    const uint64_t bytes = static_cast<uint64_t>(row.mib * kMiB);
    const Estimate e = h100.model.estimate(CollType::kSend, bytes);
    EXPECT_EQ(e.channels, row.channels);
    EXPECT_GE(e.data_us, bytes / (row.channels * 20.0 * 1e3) - 1e-9);
  }
  const Estimate small = h100.model.estimate(CollType::kSend, 32 << 20);
  EXPECT_NEAR(small.data_us, (32 << 20) / (4 * 20.0 * 1e3), 1e-9);
  // 32 channels carry 640 GB/s each way: one GPU's NVLink (370) sets the rate at 1 GiB.
  const Estimate large = h100.model.estimate(CollType::kSend, 1ull << 30);
  EXPECT_GT(large.data_us, (1ull << 30) / (32 * 20.0 * 1e3) * 1.5);
}

// A lone Send has its channels to itself: 40 GB/s each, twice what the sendrecv ring gets.
TEST(P2pChannels, ALoneSendHasItsChannelsWholeRate) {
  Preset h100("dgx-h100-1node.yaml");
  const uint64_t bytes = 32 << 20;
  const Estimate lone = h100.model.estimate_p2p(0, 1, bytes);
  EXPECT_EQ(lone.channels, 4);
  EXPECT_NEAR(lone.data_us, bytes / (4 * 40.0 * 1e3), 1e-9);
  EXPECT_LT(lone.data_us, h100.model.estimate(CollType::kSend, bytes).data_us);
}

// AlltoAll on 8 x B200 at 64 MiB: 8 MiB per peer on 4 channels, 28 channels both sending and
// receiving, 560 GB/s each way (the links would carry more). From 1 GiB the peers' channels
// outnumber the communicator's 32. Gather's root only receives: its links set the rate.
TEST(P2pChannels, AlltoAllSharesItsChannelsAmongPeers) {
  Preset b200("dgx-b200-1node.yaml");
  const double each_way = 20.0 * 1965 / 1980;  // B200's clock
  const uint64_t mid = 64 << 20, big = 1ull << 30;
  const Estimate a = b200.model.estimate(CollType::kAlltoAll, mid);
  EXPECT_EQ(a.channels, 28);
  EXPECT_NEAR(a.data_us, mid / 8.0 * 7 / (28 * each_way * 1e3), 1e-9);
  const Estimate b = b200.model.estimate(CollType::kAlltoAll, big);
  EXPECT_EQ(b.channels, 32);
  EXPECT_NEAR(b.data_us, big / 8.0 * 7 / (32 * each_way * 1e3), 1e-6);
  const Estimate g = b200.model.estimate(CollType::kGather, mid);
  EXPECT_LT(g.data_us, mid / 8.0 * 7 / (28 * 2 * each_way * 1e3) * 2);
  EXPECT_GT(g.data_us, mid / 8.0 * 7 / (28 * 2 * each_way * 1e3));
}

// A channel's copy loop runs on one SM, at its clock: 8 x A100 (1410 MHz) move a 128 MiB
// sendrecv on 8 channels at 14.2 GB/s each way, where H100 (1980 MHz) move 20.
TEST(P2pChannels, ChannelsCopyAtTheirSmsClock) {
  const uint64_t bytes = 128 << 20;
  const Estimate a100 = Preset("dgx-a100-1node.yaml").model.estimate(CollType::kSend, bytes);
  const Estimate h100 = Preset("dgx-h100-1node.yaml").model.estimate(CollType::kSend, bytes);
  ASSERT_EQ(a100.channels, 8);
  ASSERT_EQ(h100.channels, 8);
  EXPECT_NEAR(a100.data_us, bytes / (8 * 20.0 * 1410 / 1980 * 1e3), 1e-6);
  EXPECT_NEAR(h100.data_us, bytes / (8 * 20.0 * 1e3), 1e-6);
}

// Across nodes NCCL gives a network peer a channel per 14 GB/s of its NIC (4 for 400G) and
// counts parts in the network's 128 KiB chunk: a 1 GiB message takes 4 channels.
TEST(P2pChannels, AcrossNodesAMessageTakesTheNetworksChannels) {
  Preset two("dgx-h100-2node.yaml");
  EXPECT_EQ(two.model.estimate(CollType::kSend, 1ull << 30).channels, 4);
  EXPECT_EQ(two.model.estimate_p2p(0, 8, 1ull << 30).channels, 4);
  // The NIC, not the channels (160 GB/s), sets a lone send's rate across nodes.
  const Estimate e = two.model.estimate_p2p(0, 8, 1ull << 30);
  EXPECT_GT(e.data_us, (1ull << 30) / (4 * 40.0 * 1e3) * 2);
}

// Over the network a channel carries the 14 GB/s each way NCCL sizes a peer's channels by, below
// what its SM copies over NVLink: one GPU on each of two nodes, told two channels a network
// peer, sends round the ring at 28 GB/s, not at the 400G NIC's 47.5, and so does a lone Send.
TEST(P2pChannels, ANetworkChannelCarriesWhatNcclSizesItFor) {
  TuningEnv two_channels;
  two_channels.channels_per_net_peer = 2;
  const Topology topo = Preset("dgx-h100-2node.yaml").topo;
  const CommModel pair(topo, {0, 8}, two_channels);
  ASSERT_EQ(pair.nnodes(), 2);
  const uint64_t bytes = 1ull << 30;
  const Estimate ring = pair.estimate(CollType::kSend, bytes);
  EXPECT_EQ(ring.channels, 2);
  EXPECT_NEAR(ring.data_us, bytes / (2 * 14.0 * 1e3), 1e-6);
  const Estimate lone = pair.estimate_p2p(0, 1, bytes);
  EXPECT_EQ(lone.channels, 2);
  EXPECT_NEAR(lone.data_us, bytes / (2 * 14.0 * 1e3), 1e-6);
  // With NCCL's own count, four channels (56 GB/s) leave the NIC to set the rate.
  const CommModel own(topo, {0, 8}, TuningEnv{});
  EXPECT_GT(own.estimate(CollType::kSend, bytes).data_us, bytes / (4 * 14.0 * 1e3) * 1.1);
}

// NCCL's p2p settings move the split as they move NCCL's: a smaller NVLink chunk doubles a
// 32 MiB message's channels (parts may hold 32 chunks), NCCL_MAX_P2P_NCHANNELS bounds them,
// NCCL_NCHANNELS_PER_NET_PEER lets a network peer take more than one round's share, and a smaller
// NCCL_P2P_PER_CHANNEL_NET_BW gives a 400G NIC's peer more channels (8 at 7 GB/s, not 4 at 14).
TEST(P2pChannels, NcclsP2pSettingsMoveTheSplit) {
  TuningEnv small_chunk;
  small_chunk.p2p_nvl_chunksize = 128 * 1024;
  EXPECT_EQ(Preset("dgx-h100-1node.yaml").model.estimate(CollType::kSend, 32 << 20).channels, 4);
  EXPECT_EQ(Preset("dgx-h100-1node.yaml", small_chunk).model.estimate(CollType::kSend, 32 << 20).channels, 8);

  TuningEnv few;
  few.max_p2p_channels = 8;
  const Estimate capped = Preset("dgx-h100-1node.yaml", few).model.estimate(CollType::kSend, 1ull << 30);
  EXPECT_EQ(capped.channels, 8);
  EXPECT_NEAR(capped.data_us, (1ull << 30) / (8 * 20.0 * 1e3), 1e-6);

  TuningEnv wide;
  wide.channels_per_net_peer = 8;
  EXPECT_EQ(Preset("dgx-h100-2node.yaml").model.estimate(CollType::kSend, 1ull << 30).channels, 4);
  EXPECT_EQ(Preset("dgx-h100-2node.yaml", wide).model.estimate(CollType::kSend, 1ull << 30).channels, 8);

  TuningEnv thin;
  thin.p2p_per_channel_net_bw = 7;
  EXPECT_EQ(Preset("dgx-h100-2node.yaml").model.estimate_p2p(0, 8, 1ull << 30).channels, 4);
  EXPECT_EQ(Preset("dgx-h100-2node.yaml", thin).model.estimate_p2p(0, 8, 1ull << 30).channels, 8);
}

}  // namespace
}  // namespace fakegpu::planner
