// Conversions between double and the narrow float formats NCCL reduces: IEEE half, bfloat16,
// and the OCP 8-bit formats e4m3 and e5m2. Rounding is to nearest, ties to even. Half and
// bfloat16 overflow to infinity; the 8-bit formats saturate to their largest finite value,
// as CUDA's conversions with __NV_SATFINITE do. NaN stays NaN.
#pragma once

#include <cstdint>

namespace fakegpu {

double half_to_double(uint16_t bits);
uint16_t double_to_half(double v);
double bf16_to_double(uint16_t bits);
uint16_t double_to_bf16(double v);
double e4m3_to_double(uint8_t bits);
uint8_t double_to_e4m3(double v);
double e5m2_to_double(uint8_t bits);
uint8_t double_to_e5m2(double v);

}  // namespace fakegpu
