#include <gtest/gtest.h>

#include <cmath>

#include "small_float.h"

using namespace fakegpu;

TEST(SmallFloat, HalfKnownValues) {
  EXPECT_EQ(double_to_half(1.0), 0x3c00);
  EXPECT_EQ(double_to_half(-2.0), 0xc000);
  EXPECT_EQ(double_to_half(65504.0), 0x7bff);       // largest finite
  EXPECT_EQ(double_to_half(65520.0), 0x7c00);       // rounds up to infinity
  EXPECT_EQ(double_to_half(65519.0), 0x7bff);
  EXPECT_EQ(double_to_half(std::ldexp(1.0, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(double_to_half(std::ldexp(1.0, -26)), 0x0000);  // below half of it
  EXPECT_EQ(double_to_half(1.0 + std::ldexp(1.0, -11)), 0x3c00);  // tie rounds to even
  EXPECT_EQ(double_to_half(1.0 + 3 * std::ldexp(1.0, -11)), 0x3c02);
  EXPECT_TRUE(std::isnan(half_to_double(double_to_half(NAN))));
  EXPECT_EQ(half_to_double(0x3555), 0.333251953125);
}

TEST(SmallFloat, Bfloat16KnownValues) {
  EXPECT_EQ(double_to_bf16(1.0), 0x3f80);
  EXPECT_EQ(double_to_bf16(1.0 + std::ldexp(1.0, -8)), 0x3f80);  // tie to even
  EXPECT_EQ(double_to_bf16(1.0 + 3 * std::ldexp(1.0, -8)), 0x3f82);
  EXPECT_EQ(double_to_bf16(3.0e38 * 10), 0x7f80);
  EXPECT_EQ(bf16_to_double(0xc040), -3.0);
}

TEST(SmallFloat, Fp8KnownValues) {
  EXPECT_EQ(double_to_e4m3(1.0), 0x38);
  EXPECT_EQ(double_to_e4m3(448.0), 0x7e);
  EXPECT_EQ(double_to_e4m3(1000.0), 0x7e);   // saturates
  EXPECT_EQ(double_to_e4m3(-1000.0), 0xfe);
  EXPECT_EQ(double_to_e4m3(std::ldexp(1.0, -9)), 0x01);  // smallest subnormal
  EXPECT_TRUE(std::isnan(e4m3_to_double(0x7f)));
  EXPECT_EQ(e4m3_to_double(0x7e), 448.0);
  EXPECT_EQ(double_to_e5m2(1.0), 0x3c);
  EXPECT_EQ(double_to_e5m2(57344.0), 0x7b);
  EXPECT_EQ(double_to_e5m2(1e9), 0x7b);  // saturates rather than becoming infinity
  EXPECT_TRUE(std::isinf(e5m2_to_double(0x7c)));
}

TEST(SmallFloat, EveryEncodingRoundTrips) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    double h = half_to_double(static_cast<uint16_t>(b));
    if (!std::isnan(h)) {
      EXPECT_EQ(double_to_half(h), b) << std::hex << b;
    }
    double f = bf16_to_double(static_cast<uint16_t>(b));
    if (!std::isnan(f)) {
      EXPECT_EQ(double_to_bf16(f), b) << std::hex << b;
    }
  }
  for (uint32_t b = 0; b < 0x100; ++b) {
    double x = e4m3_to_double(static_cast<uint8_t>(b));
    if (!std::isnan(x)) {
      EXPECT_EQ(double_to_e4m3(x), b) << std::hex << b;
    }
    double y = e5m2_to_double(static_cast<uint8_t>(b));
    if (!std::isnan(y) && !std::isinf(y)) {
      EXPECT_EQ(double_to_e5m2(y), b) << std::hex << b;
    }
  }
}

TEST(SmallFloat, FastConversionsAgreeWithTheReferenceCodec) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    auto h = static_cast<uint16_t>(b);
    double ref = half_to_double(h);
    float fast = half_to_float(h);
    if (std::isnan(ref)) {
      EXPECT_TRUE(std::isnan(fast)) << std::hex << b;
    } else {
      EXPECT_EQ(static_cast<double>(fast), ref) << std::hex << b;
    }
    double bref = bf16_to_double(h);
    if (!std::isnan(bref)) {
      EXPECT_EQ(static_cast<double>(bf16_to_float(h)), bref) << std::hex << b;
    }
  }
  // Every float with a spread of bit patterns: the fast rounding matches rounding the exact value.
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 4099) {
    float f = bits_float(static_cast<uint32_t>(u));
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_half(f), double_to_half(f)) << std::hex << u;
    ASSERT_EQ(float_to_bf16(f), double_to_bf16(f)) << std::hex << u;
  }
  // Ties and the edges of the ranges.
  for (float f : {65504.0f, 65519.99f, 65520.0f, 0x1p-24f, 0x1p-25f, 0x1.8p-25f, 0x1p-14f, 1.0f + 0x1p-11f,
                  1.0f + 3 * 0x1p-11f, 1.0f + 0x1p-8f, 3.0e38f}) {
    EXPECT_EQ(float_to_half(f), double_to_half(f)) << f;
    EXPECT_EQ(float_to_bf16(f), double_to_bf16(f)) << f;
    EXPECT_EQ(float_to_half(-f), double_to_half(-f)) << f;
  }
}
