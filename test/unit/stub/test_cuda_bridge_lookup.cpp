// How fakegpu's libraries accept the runtime's bridge table (cuda_bridge_lookup.h): only a
// table of their own version and size, with one line saying why when they refuse one.
#include <gtest/gtest.h>

#include "cuda_bridge_lookup.h"

namespace {

fakegpu_cuda_bridge_table table_of(uint32_t version, uint32_t size) {
  fakegpu_cuda_bridge_table table{};
  table.version = version;
  table.size = size;
  return table;
}

// What this process's fakegpu_cuda_bridge (below) hands out: the stand-in for a runtime.
const fakegpu_cuda_bridge_table* g_offered = nullptr;

}  // namespace

// Found by name as the runtime's would be (the test program exports its symbols).
extern "C" __attribute__((visibility("default"))) const fakegpu_cuda_bridge_table* fakegpu_cuda_bridge(unsigned version) {
  return version == FAKEGPU_CUDA_BRIDGE_VERSION ? g_offered : nullptr;
}

namespace fakegpu {
namespace {

TEST(CudaBridgeLookup, AcceptsATableOfItsOwnVersionAndSize) {
  const auto table = table_of(FAKEGPU_CUDA_BRIDGE_VERSION, sizeof(fakegpu_cuda_bridge_table));
  std::string why;
  EXPECT_EQ(accept_cuda_bridge(&table, &why), &table);
  EXPECT_EQ(why, "");
}

TEST(CudaBridgeLookup, RefusesAnotherVersion) {
  const auto table = table_of(FAKEGPU_CUDA_BRIDGE_VERSION + 1, sizeof(fakegpu_cuda_bridge_table));
  std::string why;
  EXPECT_EQ(accept_cuda_bridge(&table, &why), nullptr);
  EXPECT_NE(why.find("bridge version " + std::to_string(FAKEGPU_CUDA_BRIDGE_VERSION + 1) + ", not " +
                     std::to_string(FAKEGPU_CUDA_BRIDGE_VERSION)),
            std::string::npos)
      << why;
}

TEST(CudaBridgeLookup, RefusesATableOfAnotherSize) {
  // A field added without a new version number.
  const auto table = table_of(FAKEGPU_CUDA_BRIDGE_VERSION, sizeof(fakegpu_cuda_bridge_table) + sizeof(void*));
  std::string why;
  EXPECT_EQ(accept_cuda_bridge(&table, &why), nullptr);
  EXPECT_NE(why.find(std::to_string(sizeof(fakegpu_cuda_bridge_table) + sizeof(void*)) + "-byte bridge table"),
            std::string::npos)
      << why;
}

TEST(CudaBridgeLookup, ARuntimeThatRefusesTheVersionGivesNoTable) {
  std::string why;
  EXPECT_EQ(accept_cuda_bridge(nullptr, &why), nullptr);
  EXPECT_NE(why.find("does not offer bridge version"), std::string::npos) << why;
}

TEST(CudaBridgeLookup, FindingAMismatchingTableSaysSoOnceAndGivesNothing) {
  const auto table = table_of(FAKEGPU_CUDA_BRIDGE_VERSION + 1, sizeof(fakegpu_cuda_bridge_table));
  g_offered = &table;
  testing::internal::CaptureStderr();
  const fakegpu_cuda_bridge_table* first = find_cuda_bridge("lookup test");
  const fakegpu_cuda_bridge_table* second = find_cuda_bridge("lookup test");
  const std::string said = testing::internal::GetCapturedStderr();
  g_offered = nullptr;
  EXPECT_EQ(first, nullptr);
  EXPECT_EQ(second, nullptr);
  EXPECT_NE(said.find("fakegpu: lookup test: CUDA runtime bridge: "), std::string::npos) << said;
  EXPECT_NE(said.find("going on as over a foreign CUDA runtime"), std::string::npos) << said;
  EXPECT_EQ(said.find('\n'), said.size() - 1) << "not one line: " << said;
}

TEST(CudaBridgeLookup, FindingAGoodTableGivesIt) {
  const auto table = table_of(FAKEGPU_CUDA_BRIDGE_VERSION, sizeof(fakegpu_cuda_bridge_table));
  g_offered = &table;
  const fakegpu_cuda_bridge_table* found = find_cuda_bridge("lookup test, good table");
  g_offered = nullptr;
  EXPECT_EQ(found, &table);
}

}  // namespace
}  // namespace fakegpu
