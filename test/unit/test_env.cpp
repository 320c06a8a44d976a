// Settings from the environment (common/env/env.def): each parsed one way, malformed ones refused
// with a message naming the variable, and docs/usage.md's table printed from the declarations.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "env.h"
#include "job_fixture.h"
#include "trace.h"
#include "tuning_from_env.h"
#include "wire.h"

using namespace fakegpu;

namespace {

// The value `text` gives the setting, as the reader would see it.
template <typename T>
std::optional<T> parsed(env::Setting<T> s, const char* text) {
  std::optional<env::Value> v = env::parse(env::declaration(s.id), text);
  if (!v) return std::nullopt;
  return std::get<T>(*v);
}

// The message parsing `text` fails with ("" when it does not fail).
template <typename T>
std::string refusal(env::Setting<T> s, const char* text) {
  try {
    parsed(s, text);
  } catch (const env::SettingError& e) {
    return e.what();
  }
  return "";
}

// Sets a variable for one test and unsets it after, whatever the test does.
struct Assigned {
  env::Id id;
  template <typename T>
  Assigned(env::Setting<T> s, const std::string& text) : id(s.id) {
    env::assign(s, text);
  }
  ~Assigned() { env::assign(id, ""); }
};

}  // namespace

TEST(Env, FlagsTakeTheUsualSpellings) {
  for (const char* yes : {"1", "true", "TRUE", "yes", "On"}) EXPECT_EQ(parsed(env::kForceStaging, yes), true) << yes;
  for (const char* no : {"0", "false", "No", "OFF"}) EXPECT_EQ(parsed(env::kControlRing, no), false) << no;
  EXPECT_EQ(parsed(env::kForceStaging, nullptr), false);  // the defaults
  EXPECT_EQ(parsed(env::kControlRing, ""), true);
  EXPECT_EQ(refusal(env::kForceStaging, "2"),
            "FAKEGPU_FORCE_STAGING=2: expected 1 or 0 (or true/false, yes/no, on/off)");
  EXPECT_NE(refusal(env::kControlRing, "enabled"), "");
}

TEST(Env, ByteCountsTakeBinarySuffixesAndABound) {
  EXPECT_EQ(parsed(env::kStagingChunkBytes, "64K"), 64u << 10);
  EXPECT_EQ(parsed(env::kStagingChunkBytes, "4096"), 4096u);
  EXPECT_EQ(parsed(env::kStagingChunkBytes, nullptr), uint64_t{1} << 20);
  EXPECT_EQ(refusal(env::kStagingChunkBytes, "4095"),
            "FAKEGPU_STAGING_CHUNK_BYTES=4095: expected a byte count of at least 4096 (a number, optionally with K, M or "
            "G)");
  for (const char* bad : {"1x", "1GB", "-4096", "1.5M"}) EXPECT_NE(refusal(env::kStagingChunkBytes, bad), "") << bad;
  EXPECT_EQ(parsed(env::kCoordinatorMaxBuffer, "1G"), uint64_t{1} << 30);  // a gibibyte, not 1 byte
  EXPECT_EQ(parsed(env::kCoordinatorMaxBuffer, nullptr), std::nullopt);    // no default: the reader decides
  EXPECT_NE(refusal(env::kCoordinatorMaxBuffer, "0"), "");
}

TEST(Env, DurationsAreWholeMillisecondsAboveZero) {
  EXPECT_EQ(parsed(env::kCoordinatorTimeout, "250"), std::chrono::milliseconds(250));
  EXPECT_EQ(parsed(env::kCoordinatorTimeout, nullptr), std::chrono::minutes(10));
  EXPECT_EQ(parsed(env::kConnectTimeout, nullptr), std::chrono::seconds(20));
  EXPECT_EQ(refusal(env::kDeadlockTimeout, "0"),
            "FAKEGPU_DEADLOCK_TIMEOUT_MS=0: expected a whole number of milliseconds above 0");
  for (const char* bad : {"-5", "1.5", "10s", " 10", "+10", "99999999999999999999"})
    EXPECT_NE(refusal(env::kConnectTimeout, bad), "") << bad;
}

TEST(Env, ChoicesAreExactExceptForNcclsOwnWords) {
  EXPECT_EQ(parsed(env::kTimeMode, "paced"), "paced");
  EXPECT_EQ(parsed(env::kTimeMode, nullptr), "modeled");
  EXPECT_EQ(refusal(env::kTimeMode, "PACED"), "FAKEGPU_TIME_MODE=PACED: expected one of modeled, paced, wall");
  EXPECT_EQ(refusal(env::kPayload, "all"), "FAKEGPU_PAYLOAD=all: expected one of none, small");
  EXPECT_EQ(parsed(env::kPayload, "small"), "small");
  EXPECT_EQ(parsed(env::kPayload, nullptr), std::nullopt);
  EXPECT_EQ(parsed(env::kNcclDebug, "info"), "INFO");  // as NCCL reads it, and spelled as declared
  EXPECT_NE(refusal(env::kNcclDebug, "verbose"), "");
}

TEST(Env, IntegersStayWithinTheirBounds) {
  EXPECT_EQ(parsed(env::kDeviceCount, "1"), 1);
  EXPECT_EQ(parsed(env::kDeviceCount, "255"), 255);
  EXPECT_EQ(parsed(env::kDeviceCount, ""), std::nullopt);
  EXPECT_EQ(refusal(env::kDeviceCount, "256"), "FAKEGPU_DEVICE_COUNT=256: expected a whole number from 1 to 255");
  for (const char* bad : {"0", "-1", "8x", "0x8", "eight"}) EXPECT_NE(refusal(env::kDeviceCount, bad), "") << bad;
  EXPECT_EQ(refusal(env::kTraceMaxOps, "0"), "FAKEGPU_TRACE_MAX_OPS=0: expected a whole number of at least 1");
  EXPECT_EQ(parsed(env::kNcclNvlsEnable, nullptr), 2);
}

TEST(Env, EveryDeclarationIsWellFormed) {
  std::set<std::string> names;
  for (const env::Declaration* d = env::begin_declarations(); d != env::end_declarations(); ++d) {
    SCOPED_TRACE(d->name);
    EXPECT_TRUE(names.insert(d->name).second) << "declared twice";
    const std::string name = d->name;
    EXPECT_TRUE(name.rfind("FAKEGPU_", 0) == 0 || name.rfind("NCCL_", 0) == 0);
    EXPECT_NO_THROW(env::parse(*d, nullptr)) << "its default is malformed";
    EXPECT_NE(d->readers, 0u);
  }
  EXPECT_STRNE(env::begin_declarations()->doc, "") << "the first row has no row above to join";
  // Defaults that other code also knows.
  EXPECT_EQ(parsed(env::kTraceMaxOps, nullptr), static_cast<int64_t>(coord::Trace::kDefaultMaxOps));
  EXPECT_EQ(parsed(env::kStagingChunkBytes, nullptr), wire::kDefaultChunkBytes);
  EXPECT_EQ(env::declaration(env::kStagingChunkBytes.id).min, static_cast<int64_t>(wire::kMinChunkBytes));
}

TEST(Env, TheEnvironmentIsReadOnceAndAssignedThrough) {
  Assigned guard(env::kNcclTopoDumpFileRank, "3");
  EXPECT_EQ(env::get(env::kNcclTopoDumpFileRank), 3);
  setenv("NCCL_TOPO_DUMP_FILE_RANK", "5", 1);  // behind its back: not seen
  EXPECT_EQ(env::get(env::kNcclTopoDumpFileRank), 3);
  env::assign(env::kNcclTopoDumpFileRank, "7");
  EXPECT_EQ(env::get(env::kNcclTopoDumpFileRank), 7);
  EXPECT_STREQ(std::getenv("NCCL_TOPO_DUMP_FILE_RANK"), "7");  // and what it starts sees it
}

TEST(Env, AMalformedValueFailsEveryReadAndTheCheckOfItsReaders) {
  Assigned guard(env::kNcclGraphDumpFileRank, "first");
  for (int i = 0; i < 2; ++i) {
    try {
      env::get(env::kNcclGraphDumpFileRank);
      ADD_FAILURE() << "taken";
    } catch (const env::SettingError& e) {
      EXPECT_STREQ(e.what(), "NCCL_GRAPH_DUMP_FILE_RANK=first: expected a whole number from 0 to 2147483647");
    }
  }
  EXPECT_THROW(env::check(env::kStub), env::SettingError);
  EXPECT_NO_THROW(env::check(env::kLauncher));  // not a variable fgpu reads
}

TEST(Env, TheCoordinatorReadsItsSettingsThroughIt) {
  coord::testing::RecordingOutbox out;
  auto make = [&] { return coord::Job(coord::testing::four_rank_cluster(), coord::ServerInfo{}, out); };
  {
    Assigned limit(env::kCoordinatorMaxBuffer, "1G");
    EXPECT_EQ(make().max_buffer_bytes(), uint64_t{1} << 30);
  }
  {
    Assigned limit(env::kCoordinatorMaxBuffer, "1X");
    EXPECT_THROW(make(), env::SettingError);
  }
  Assigned algo(env::kNcclAlgo, "ring,warp");
  try {
    planner::tuning_from_env();
    ADD_FAILURE() << "NCCL_ALGO=ring,warp was taken";
  } catch (const env::SettingError& e) {
    EXPECT_NE(std::string(e.what()).find("NCCL_ALGO=ring,warp"), std::string::npos) << e.what();
  }
}

// A cluster's entry that tuning_from_env refuses, with a message that holds `says`.
static void expect_refused(const NcclSetting& entry, const std::string& says) {
  try {
    planner::tuning_from_env({entry});
    ADD_FAILURE() << entry.name << "=" << entry.value << " was taken from the cluster";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

TEST(Env, TheClusterNcclConfHoldsWhereTheEnvironmentIsSilent) {
  const std::vector<NcclSetting> conf = {{"NCCL_PROTO", "Simple", "c.yaml:2:10"}, {"NCCL_NVLS_ENABLE", "0", "c.yaml:2:30"},
                                         {"NCCL_MAX_NCHANNELS", "4", "c.yaml:2:50"}, {"NCCL_MIN_CTAS", "24", "c.yaml:2:70"}};
  planner::TuningEnv t = planner::tuning_from_env(conf);
  EXPECT_EQ(t.min_ctas, 24);
  EXPECT_EQ(t.max_ctas, 0);
  EXPECT_TRUE(t.proto_forced);
  EXPECT_EQ(t.proto_enabled[planner::kAllReduce][planner::kLL], 0);
  EXPECT_EQ(t.proto_enabled[planner::kAllReduce][planner::kSimple], 1);
  EXPECT_EQ(t.nvls_enable, 0);
  EXPECT_EQ(t.max_channels, 4);
  EXPECT_FALSE(t.algo_forced);  // the cluster leaves NCCL_ALGO alone
  {
    Assigned proto(env::kNcclProto, "LL");  // the job's own setting wins
    Assigned nvls(env::kNcclNvlsEnable, "1");
    t = planner::tuning_from_env(conf);
    EXPECT_EQ(t.proto_enabled[planner::kAllReduce][planner::kLL], 1);
    EXPECT_EQ(t.proto_enabled[planner::kAllReduce][planner::kSimple], 0);
    EXPECT_EQ(t.nvls_enable, 1);
    EXPECT_EQ(t.max_channels, 4);
  }
  expect_refused({"NCCL_ALGO", "ring,warp", "c.yaml:4:21"},
                 "c.yaml:4:21: cluster.nccl_conf.NCCL_ALGO: NCCL_ALGO=ring,warp");
}

// Buffer and chunk sizes come the same way: the job's setting over the cluster's, NCCL's
// default (0 here) where neither sets one; a value that is no number names its place.
TEST(Env, BufferAndChunkSizesComeFromTheEnvironmentOrTheCluster) {
  EXPECT_EQ(planner::tuning_from_env().buffsize, 0);
  const std::vector<NcclSetting> conf = {{"NCCL_BUFFSIZE", "8388608", "c.yaml:2:10"},
                                         {"NCCL_NVLS_CHUNKSIZE", "524288", "c.yaml:2:40"}};
  planner::TuningEnv t = planner::tuning_from_env(conf);
  EXPECT_EQ(t.buffsize, 8388608);
  EXPECT_EQ(t.nvls_chunksize, 524288);
  EXPECT_EQ(t.nvls_tree_max_chunksize, 0);
  {
    Assigned buffsize(env::kNcclBuffsize, "2097152");
    Assigned tree(env::kNcclNvlsTreeMaxChunksize, "65536");
    t = planner::tuning_from_env(conf);
    EXPECT_EQ(t.buffsize, 2097152);
    EXPECT_EQ(t.nvls_tree_max_chunksize, 65536);
  }
  {
    Assigned chunk(env::kNcclP2pNvlChunksize, "131072");
    Assigned peer(env::kNcclNchannelsPerNetPeer, "8");
    Assigned per_channel(env::kNcclP2pPerChannelNetBw, "7");
    t = planner::tuning_from_env({{"NCCL_MAX_P2P_NCHANNELS", "16", "c.yaml:3:5"}});
    EXPECT_EQ(t.p2p_nvl_chunksize, 131072);
    EXPECT_EQ(t.channels_per_net_peer, 8);
    EXPECT_EQ(t.p2p_per_channel_net_bw, 7);
    EXPECT_EQ(t.max_p2p_channels, 16);
    EXPECT_EQ(t.p2p_net_chunksize, 0);
  }
  expect_refused({"NCCL_BUFFSIZE", "8M", "c.yaml:3:12"}, "c.yaml:3:12: cluster.nccl_conf.NCCL_BUFFSIZE");
}

TEST(Env, DocsTableIsGenerated) {
  const std::string path = std::string(FAKEGPU_SOURCE_DIR) + "/docs/usage.md";
  std::ifstream in(path);
  ASSERT_TRUE(in) << "cannot read " << path;
  std::string line, table;
  bool inside = false, found = false;
  while (std::getline(in, line)) {
    if (line.rfind("<!-- end env-table -->", 0) == 0) inside = false;
    if (inside) table += line + "\n";
    if (line.rfind("<!-- env-table:", 0) == 0) inside = found = true;
  }
  ASSERT_TRUE(found) << path << " has no <!-- env-table: ... --> marker";
  EXPECT_EQ(table, env::markdown_table())
      << "the table of environment variables in docs/usage.md is not the one common/env/env.def declares: run "
         "scripts/update-env-table after building, and edit the declarations, not the table";
}

// The NCCL release modeled: FAKEGPU_NCCL_VERSION over the cluster's cluster.nccl_version, the
// newest without either; a version outside the releases modeled names its place and the range.
TEST(Env, TheNcclReleaseComesFromTheEnvironmentOrTheCluster) {
  ClusterConfig cluster;
  EXPECT_EQ(planner::tuning_from_env(cluster).nccl_version, planner::kNewestNcclModeled);
  cluster.nccl_version = {"nccl_version", "2.21.5", "c.yaml:2:30"};
  EXPECT_EQ(planner::tuning_from_env(cluster).nccl_version, 22105);
  {
    Assigned version(env::kNcclVersion, "2.19");
    EXPECT_EQ(planner::tuning_from_env(cluster).nccl_version, 21900);
  }
  {
    Assigned version(env::kNcclVersion, "2.9.9");
    try {
      planner::tuning_from_env(cluster);
      ADD_FAILURE() << "FAKEGPU_NCCL_VERSION=2.9.9 was taken";
    } catch (const env::SettingError& e) {
      EXPECT_NE(std::string(e.what()).find("FAKEGPU_NCCL_VERSION '2.9.9': fakegpu models NCCL 2.18 to 2.30"),
                std::string::npos)
          << e.what();
    }
  }
  cluster.nccl_version.value = "latest";
  try {
    planner::tuning_from_env(cluster);
    ADD_FAILURE() << "cluster.nccl_version: latest was taken";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("c.yaml:2:30: cluster.nccl_version 'latest': not an NCCL version"),
              std::string::npos)
        << e.what();
  }
}

TEST(Env, NcclVersionsReadAsNcclWritesThem) {
  EXPECT_EQ(planner::parse_nccl_version("2.18.5+cuda12.2", "v"), 21805);
  EXPECT_EQ(planner::parse_nccl_version("v2.27.7-1", "v"), 22707);
  EXPECT_EQ(planner::parse_nccl_version("22903", "v"), 22903);
  EXPECT_EQ(planner::parse_nccl_version("2.30", "v"), 23000);
  EXPECT_EQ(planner::nccl_version_name(22105), "2.21.5");
  EXPECT_EQ(planner::nccl_version_name(22100), "2.21");
  EXPECT_EQ(planner::nearest_nccl_modeled(21602), planner::kOldestNcclModeled);
  EXPECT_EQ(planner::nearest_nccl_modeled(23102), planner::kNewestNcclModeled);
  EXPECT_THROW(planner::parse_nccl_version("2.31", "v"), planner::TuningError);
  EXPECT_THROW(planner::parse_nccl_version("2.17.1", "v"), planner::TuningError);
  EXPECT_THROW(planner::parse_nccl_version("2.x", "v"), planner::TuningError);
}
