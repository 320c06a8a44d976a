// Conversions between double and the narrow float formats NCCL reduces: IEEE half, bfloat16,
// and the OCP 8-bit formats e4m3 and e5m2. Rounding is to nearest, ties to even. Half and
// bfloat16 overflow to infinity; the 8-bit formats saturate to their largest finite value,
// as CUDA's conversions with __NV_SATFINITE do. NaN stays NaN.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace fakegpu {

double half_to_double(uint16_t bits);
uint16_t double_to_half(double v);
double bf16_to_double(uint16_t bits);
uint16_t double_to_bf16(double v);
double e4m3_to_double(uint8_t bits);
uint8_t double_to_e4m3(double v);
double e5m2_to_double(uint8_t bits);
uint8_t double_to_e5m2(double v);

// Fast conversions between float and half / bfloat16 for the reduction kernels, with the same
// rounding as the functions above. An operation on two half or bfloat16 values computed in float
// and rounded once is correctly rounded: float's 24-bit significand is at least 2p + 2 for both
// (p = 11 and 8), so rounding twice cannot go wrong.
inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  if (exp == 0) return std::copysign(static_cast<float>(man) * 0x1p-24f, sign ? -1.0f : 1.0f);  // subnormal or zero
  if (exp == 31) return bits_float(sign | 0x7f800000 | man << 13);  // inf or NaN
  return bits_float(sign | (exp + 112) << 23 | man << 13);
}

inline uint16_t float_to_half(float f) {
  const uint32_t x = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t a = x & 0x7fffffff;
  if (a > 0x7f800000) return 0x7e00;                            // NaN
  if (a >= 0x477ff000) return sign | 0x7c00;                    // rounds to infinity (>= 65520)
  if (a < 0x38800000)                                           // below half's normal range
    return sign | static_cast<uint16_t>(std::nearbyint(bits_float(a) * 0x1p24f));
  const uint32_t rounded = a + 0xfff + ((a >> 13) & 1);         // to nearest, ties to even
  return sign | static_cast<uint16_t>((rounded - 0x38000000) >> 13);
}

inline float bf16_to_float(uint16_t b) { return bits_float(static_cast<uint32_t>(b) << 16); }

inline uint16_t float_to_bf16(float f) {
  const uint32_t x = float_bits(f);
  if ((x & 0x7fffffff) > 0x7f800000) return 0x7fc0;  // NaN
  return static_cast<uint16_t>((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

}  // namespace fakegpu
