// Counter-based random numbers (splitmix64 of seed ^ index) identical on host and device, so large test
// weights can be generated on the GPU and the host reference can regenerate just the rows it needs.
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>

#include "fp4moe/detail/hd.h"

namespace fp4moe::devdata {

FP4MOE_HD inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
FP4MOE_HD inline uint64_t hash_at(uint64_t seed, uint64_t index) { return mix64(seed * 0x2545F4914F6CDD1Dull ^ mix64(index)); }

// A packed byte of two uniformly random E2M1 codes (every code, -0 included).
FP4MOE_HD inline uint8_t random_packed_byte(uint64_t seed, uint64_t index) {
  return static_cast<uint8_t>(hash_at(seed, index) & 0xFF);
}

// A UE4M3 block scale: mostly normal values in [2^-4, 2^4), 3% zero, 3% subnormal (0x01..0x07), and
// 1% at the top of the range (up to 448), so the prepack's re-encoding of every kind is exercised.
FP4MOE_HD inline uint8_t random_block_scale(uint64_t seed, uint64_t index) {
  const uint64_t h = hash_at(seed ^ 0x5CA1Eull, index);
  const uint32_t pick = static_cast<uint32_t>(h % 100);
  if (pick < 3) return 0;
  if (pick < 6) return static_cast<uint8_t>(1 + (h >> 8) % 7);
  if (pick < 7) return static_cast<uint8_t>(0x70 + (h >> 8) % 15);  // 2^7 .. 448
  return static_cast<uint8_t>(0x18 + (h >> 8) % 64);                // exponents 3..10: 2^-4 .. 2^4
}

}  // namespace fp4moe::devdata
