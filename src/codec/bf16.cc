// Host bfloat16 conversions: bf16 is the top 16 bits of an IEEE float, rounded to nearest even.
// SPDX-License-Identifier: Apache-2.0
#include "fp4moe/bf16.h"

#include <cstring>

namespace fp4moe {

uint16_t float_to_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0) {
    return static_cast<uint16_t>((u >> 16) | 0x0040u);  // keep NaN a (quiet) NaN
  }
  // Add 0x7fff plus the lowest kept bit: rounds half to even on the 16 dropped bits.
  const uint32_t lsb = (u >> 16) & 1u;
  u += 0x7fffu + lsb;
  return static_cast<uint16_t>(u >> 16);
}

float bf16_to_float(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace fp4moe
