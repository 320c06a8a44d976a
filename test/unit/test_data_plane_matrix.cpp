// The coordinator's data plane over the matrix of collectives x data types, each across rank
// counts, reduction ops and sizes (one element, a few, and more than a 64 KiB chunk), in one
// process: the Job is driven directly, the data travels in the frames, and every element of
// every rank's result is compared with a reference computed here.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "coll_shape.h"
#include "job_fixture.h"
#include "reduce.h"
#include "small_float.h"

using namespace fakegpu;
using namespace fakegpu::coord;
using namespace fakegpu::coord::testing;

namespace {

// Writes v (a small integer, or what a reduction of them gives) as one element of dtype.
void put(DataType dtype, uint8_t* at, double v) {
  switch (dtype) {
    case DataType::kInt32: { int32_t x = static_cast<int32_t>(v); std::memcpy(at, &x, 4); break; }
    case DataType::kInt64: { int64_t x = static_cast<int64_t>(v); std::memcpy(at, &x, 8); break; }
    case DataType::kUint8: *at = static_cast<uint8_t>(v); break;
    case DataType::kFloat32: { float x = static_cast<float>(v); std::memcpy(at, &x, 4); break; }
    case DataType::kFloat64: std::memcpy(at, &v, 8); break;
    case DataType::kFloat16: { uint16_t x = double_to_half(v); std::memcpy(at, &x, 2); break; }
    case DataType::kBfloat16: { uint16_t x = double_to_bf16(v); std::memcpy(at, &x, 2); break; }
    default: ADD_FAILURE() << "no test encoding for " << dtype_name(static_cast<int>(dtype));
  }
}

double get(DataType dtype, const uint8_t* at) {
  switch (dtype) {
    case DataType::kInt32: { int32_t x; std::memcpy(&x, at, 4); return x; }
    case DataType::kInt64: { int64_t x; std::memcpy(&x, at, 8); return static_cast<double>(x); }
    case DataType::kUint8: return *at;
    case DataType::kFloat32: { float x; std::memcpy(&x, at, 4); return x; }
    case DataType::kFloat64: { double x; std::memcpy(&x, at, 8); return x; }
    case DataType::kFloat16: { uint16_t x; std::memcpy(&x, at, 2); return half_to_double(x); }
    case DataType::kBfloat16: { uint16_t x; std::memcpy(&x, at, 2); return bf16_to_double(x); }
    default: return NAN;
  }
}

// Rank r's i-th input: 1, 2 or 3, so sums, products (3^4 = 81) and averages of up to four
// ranks are exact in every type tested, bfloat16 and uint8 included.
double input(int r, uint64_t i) { return static_cast<double>((i * 7 + static_cast<uint64_t>(r)) % 3 + 1); }

double reduce(RedOp op, DataType dtype, const std::vector<double>& v) {
  double acc = v[0];
  for (size_t k = 1; k < v.size(); ++k) {
    switch (op) {
      case RedOp::kSum: case RedOp::kAvg: acc += v[k]; break;
      case RedOp::kProd: acc *= v[k]; break;
      case RedOp::kMax: acc = std::max(acc, v[k]); break;
      case RedOp::kMin: acc = std::min(acc, v[k]); break;
      default: ADD_FAILURE() << "unexpected op";
    }
  }
  if (op != RedOp::kAvg) return acc;
  // Integers divide the sum, truncating; floating types average.
  return is_floating(dtype) ? acc / v.size() : std::trunc(acc / v.size());
}

struct Case {
  CollType coll;
  DataType dtype;
};

std::string describe(const Case& c) {
  return fmt::format("{}_{}", wire::coll_type_name(c.coll), dtype_name(static_cast<int>(c.dtype)));
}
std::string case_name(const ::testing::TestParamInfo<Case>& info) { return describe(info.param); }
void PrintTo(const Case& c, std::ostream* os) { *os << describe(c); }

class DataPlaneMatrix : public JobTest, public ::testing::WithParamInterface<Case> {
 protected:
  DataPlaneMatrix() {
    for (ClientId c = 1; c <= 4; ++c) connect(c, static_cast<int>(c) - 1);
  }

  // Runs one collective over the first `n` clients and checks every rank's result.
  void check(int n, RedOp op, uint64_t count) {
    const auto [coll, dtype] = GetParam();
    const size_t elem = dtype_size(static_cast<int>(dtype));
    const int root = n - 1;
    SCOPED_TRACE(fmt::format("{} ranks, {}, count {}", n, redop_name(static_cast<int>(op)), count));
    const uint64_t comm = init_comm(n);
    for (int r = 0; r < n; ++r) {
      CollShape shape;
      ASSERT_TRUE(coll_shape(coll, count, r, root, n, &shape));
      std::vector<uint8_t> data(shape.send_elems * elem);
      for (uint64_t i = 0; i < shape.send_elems; ++i) put(dtype, data.data() + i * elem, input(r, i));
      Collective c = allreduce(comm, r, 1, count, op);
      c.coll = coll;
      c.dtype = static_cast<uint8_t>(dtype);
      c.root = has_root(coll) ? root : -1;
      post(ClientId(r + 1), c, data);
    }
    for (int r = 0; r < n; ++r) {
      auto frames = out.take(ClientId(r + 1));
      ASSERT_EQ(frames.size(), 1u);
      ASSERT_EQ(frames[0].type, MsgType::kCollectiveDone) << error_text(frames[0]);
      std::vector<uint8_t> got;
      for (const Bulk& b : frames[0].bulk) got.insert(got.end(), b.buffer->begin() + b.offset, b.buffer->begin() + b.offset + b.size);
      CollShape shape;
      coll_shape(coll, count, r, root, n, &shape);
      ASSERT_EQ(got.size(), shape.recv_elems * elem) << "rank " << r;
      for (uint64_t i = 0; i < shape.recv_elems; ++i) {
        const double want = expected(coll, dtype, op, n, r, root, count, i);
        const double have = get(dtype, got.data() + i * elem);
        // Floating averages scale each input by 1/n before summing: allow their rounding.
        const double slack = op == RedOp::kAvg && is_floating(dtype) ? std::abs(want) * 1e-2 : 0;
        if (std::abs(have - want) > slack) {
          ADD_FAILURE() << "rank " << r << " element " << i << ": got " << have << ", want " << want;
          return;
        }
      }
    }
  }

  // Element i of rank r's result.
  static double expected(CollType coll, DataType dtype, RedOp op, int n, int r, int root, uint64_t count, uint64_t i) {
    std::vector<double> column;
    switch (coll) {
      case CollType::kAllReduce:
      case CollType::kReduce:
        for (int k = 0; k < n; ++k) column.push_back(input(k, i));
        return reduce(op, dtype, column);
      case CollType::kReduceScatter:
        for (int k = 0; k < n; ++k) column.push_back(input(k, static_cast<uint64_t>(r) * count + i));
        return reduce(op, dtype, column);
      case CollType::kBroadcast: return input(root, i);
      case CollType::kAllGather: return input(static_cast<int>(i / count), i % count);
      default: ADD_FAILURE() << "unexpected collective"; return NAN;
    }
  }
};

TEST_P(DataPlaneMatrix, EveryRankGetsTheReferenceResult) {
  const bool reduces = is_reduction(GetParam().coll);
  // AVG exists for every type; the others where they do not overflow the type's small range.
  const std::vector<RedOp> ops = reduces ? std::vector<RedOp>{RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin,
                                                             RedOp::kAvg}
                                         : std::vector<RedOp>{RedOp::kSum};
  for (int n : {2, 3, 4})
    for (RedOp op : ops)
      for (uint64_t count : {uint64_t{1}, uint64_t{5}, uint64_t{16411}}) check(n, op, count);
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (CollType coll : {CollType::kAllReduce, CollType::kReduce, CollType::kReduceScatter, CollType::kBroadcast,
                        CollType::kAllGather})
    for (DataType dtype : {DataType::kInt32, DataType::kInt64, DataType::kUint8, DataType::kFloat32,
                           DataType::kFloat64, DataType::kFloat16, DataType::kBfloat16})
      cases.push_back({coll, dtype});
  return cases;
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(Collectives, DataPlaneMatrix, ::testing::ValuesIn(all_cases()), case_name);
