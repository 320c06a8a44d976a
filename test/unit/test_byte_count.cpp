// Byte counts in settings: FAKEGPU_COORDINATOR_MAX_BUFFER=1G means a gibibyte, not 1 byte
// (test_env.cpp checks the settings that take one).
#include <gtest/gtest.h>

#include "byte_count.h"

using namespace fakegpu;

TEST(ByteCount, SpellsBinaryMultiples) {
  EXPECT_EQ(parse_byte_count("4096"), 4096u);
  EXPECT_EQ(parse_byte_count("64K"), 64u << 10);
  EXPECT_EQ(parse_byte_count("3m"), 3u << 20);
  EXPECT_EQ(parse_byte_count("1G"), uint64_t{1} << 30);
  EXPECT_EQ(parse_byte_count("0"), 0u);
}

TEST(ByteCount, RefusesWhatIsNotOne) {
  for (const char* bad : {"", "G", "-1", "+1", "1.5G", "1T", "1GB", "1 G", " 1", "1K2", "18446744073709551616",
                          "17179869184G"})
    EXPECT_FALSE(parse_byte_count(bad)) << bad;
  EXPECT_EQ(parse_byte_count("18446744073709551615"), UINT64_MAX);
}
