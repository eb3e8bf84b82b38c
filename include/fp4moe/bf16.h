// Host-side bfloat16 bit conversions (round to nearest even), for references, tests and tools.
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>

namespace fp4moe {

// float -> bf16 bits, round to nearest, ties to even; NaN stays a quiet NaN.
uint16_t float_to_bf16(float x);
// bf16 bits -> float (exact).
float bf16_to_float(uint16_t b);
// Round a float through bf16 and back.
inline float round_to_bf16(float x) { return bf16_to_float(float_to_bf16(x)); }

}  // namespace fp4moe
