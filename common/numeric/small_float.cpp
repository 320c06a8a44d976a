#include "small_float.h"

#include <cmath>
#include <limits>

namespace fakegpu {
namespace {

struct Format {
  int exp_bits;
  int man_bits;
  bool has_inf;      // all-ones exponent means inf/NaN (IEEE); e4m3 uses it for normal numbers
  bool saturate;     // out-of-range values become the largest finite value instead of inf
  uint32_t nan_bits; // canonical NaN, without sign

  int bias() const { return (1 << (exp_bits - 1)) - 1; }
  uint32_t exp_mask() const { return (1u << exp_bits) - 1; }
  double max_finite() const {
    // IEEE: the largest exponent below all-ones, full mantissa. e4m3: all-ones exponent,
    // mantissa one below all-ones (all-ones is NaN).
    int top = has_inf ? static_cast<int>(exp_mask()) - 1 : static_cast<int>(exp_mask());
    double mantissa = has_inf ? 2.0 - std::ldexp(1.0, -man_bits) : 2.0 - std::ldexp(2.0, -man_bits);
    return std::ldexp(mantissa, top - bias());
  }
};

constexpr Format kHalf{5, 10, true, false, 0x7e00};
constexpr Format kBf16{8, 7, true, false, 0x7fc0};
constexpr Format kE4m3{4, 3, false, true, 0x7f};
constexpr Format kE5m2{5, 2, true, true, 0x7e};

double decode(const Format& f, uint32_t bits) {
  const uint32_t sign = bits >> (f.exp_bits + f.man_bits) & 1;
  const uint32_t exp = bits >> f.man_bits & f.exp_mask();
  const uint32_t man = bits & ((1u << f.man_bits) - 1);
  double v;
  if (f.has_inf && exp == f.exp_mask()) {
    v = man == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else if (!f.has_inf && exp == f.exp_mask() && man == (1u << f.man_bits) - 1) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (exp == 0) {
    v = std::ldexp(static_cast<double>(man), 1 - f.bias() - f.man_bits);
  } else {
    v = std::ldexp(static_cast<double>(man | (1u << f.man_bits)), static_cast<int>(exp) - f.bias() - f.man_bits);
  }
  return sign ? -v : v;
}

uint32_t encode(const Format& f, double v) {
  const uint32_t sign_bit = 1u << (f.exp_bits + f.man_bits);
  if (std::isnan(v)) return f.nan_bits;
  const uint32_t sign = std::signbit(v) ? sign_bit : 0;
  double a = std::fabs(v);
  const int min_exp = 1 - f.bias();
  if (a != 0 && !std::isinf(a)) {
    // Round to the format's precision at this magnitude (fixed quantum below the normal range).
    int e = std::max(std::ilogb(a), min_exp);
    double quantum = std::ldexp(1.0, e - f.man_bits);
    a = std::nearbyint(a / quantum) * quantum;
  }
  if (a > f.max_finite()) {
    if (f.saturate) a = f.max_finite();
    else return sign | f.exp_mask() << f.man_bits;  // infinity
  }
  if (a == 0) return sign;
  int e = std::ilogb(a);
  if (e < min_exp)  // subnormal
    return sign | static_cast<uint32_t>(std::ldexp(a, f.man_bits - min_exp));
  uint32_t man = static_cast<uint32_t>(std::ldexp(a, f.man_bits - e)) - (1u << f.man_bits);
  return sign | static_cast<uint32_t>(e + f.bias()) << f.man_bits | man;
}

}  // namespace

double half_to_double(uint16_t bits) { return decode(kHalf, bits); }
uint16_t double_to_half(double v) { return static_cast<uint16_t>(encode(kHalf, v)); }
double bf16_to_double(uint16_t bits) { return decode(kBf16, bits); }
uint16_t double_to_bf16(double v) { return static_cast<uint16_t>(encode(kBf16, v)); }
double e4m3_to_double(uint8_t bits) { return decode(kE4m3, bits); }
uint8_t double_to_e4m3(double v) { return static_cast<uint8_t>(encode(kE4m3, v)); }
double e5m2_to_double(uint8_t bits) { return decode(kE5m2, bits); }
uint8_t double_to_e5m2(double v) { return static_cast<uint8_t>(encode(kE5m2, v)); }

}  // namespace fakegpu
