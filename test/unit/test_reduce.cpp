#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "reduce.h"
#include "small_float.h"

using namespace fakegpu;

TEST(Reduce, IntegerAverageDividesByLargeRankCounts) {
  std::vector<int8_t> acc = {-100, 100};
  post_divide(DataType::kInt8, acc.data(), acc.size(), 200);  // 200 does not fit in int8
  EXPECT_EQ(acc, (std::vector<int8_t>{0, 0}));
  std::vector<uint8_t> u = {250};
  post_divide(DataType::kUint8, u.data(), u.size(), 128);
  EXPECT_EQ(u[0], 1);
}

TEST(Reduce, IntegersWrap) {
  std::vector<int8_t> a = {127}, b = {1};
  reduce_into(DataType::kInt8, RedOp::kSum, a.data(), b.data(), 1);
  EXPECT_EQ(a[0], -128);
  std::vector<uint32_t> c = {0x80000000u}, d = {2};
  reduce_into(DataType::kUint32, RedOp::kProd, c.data(), d.data(), 1);
  EXPECT_EQ(c[0], 0u);
}

TEST(Reduce, HalfRoundsAfterEveryOperation) {
  // 2048 + 1 is not representable in half: the sum rounds (ties to even) back to 2048.
  std::vector<uint16_t> a = {double_to_half(2048)}, b = {double_to_half(1)};
  reduce_into(DataType::kFloat16, RedOp::kSum, a.data(), b.data(), 1);
  EXPECT_EQ(half_to_double(a[0]), 2048);
  std::vector<uint16_t> c = {double_to_bf16(256)}, d = {double_to_bf16(3)};
  reduce_into(DataType::kBfloat16, RedOp::kSum, c.data(), d.data(), 1);
  EXPECT_EQ(bf16_to_double(c[0]), 260);  // 259 rounds to the even neighbour 260
}

TEST(Reduce, AverageOfFloatsPremultipliesIntegersDivide) {
  EXPECT_TRUE(plan_reduction(DataType::kFloat32, RedOp::kAvg).premultiply);
  EXPECT_TRUE(plan_reduction(DataType::kBfloat16, RedOp::kAvg).premultiply);
  EXPECT_TRUE(plan_reduction(DataType::kInt32, RedOp::kAvg).post_divide);
  std::vector<float> x = {3, 6};
  premultiply(DataType::kFloat32, x.data(), x.size(), average_scalar(DataType::kFloat32, 3));
  EXPECT_FLOAT_EQ(x[0], 3 * static_cast<float>(1.0 / 3));
  EXPECT_FLOAT_EQ(x[1], 6 * static_cast<float>(1.0 / 3));
}

TEST(Reduce, Fp8SaturatesInsteadOfOverflowing) {
  std::vector<uint8_t> a = {double_to_e4m3(448)}, b = {double_to_e4m3(448)};
  reduce_into(DataType::kFloat8e4m3, RedOp::kSum, a.data(), b.data(), 1);
  EXPECT_EQ(e4m3_to_double(a[0]), 448);
}
