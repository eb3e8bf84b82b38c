// The prepacked NVFP4 weight layout that fp4moe's GEMM kernels stream: bit positions, tile order, scale
// encoding. Shared (constexpr) by the prepack kernel, the GEMM kernels, the host reference and tests.
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>

#include "fp4moe/detail/hd.h"

namespace fp4moe::pack {

// A lane's 8 E2M1 weights of one mma.m16n8k16 A fragment (k16 step s) live in 32-bit word s of its 16 bytes,
// except that the words of steps 2h and 2h+1 trade two bits (bit_pos below: a's weights 6 and 7 keep their e1 in
// word b, b's weights 6 and 7 their m in word a). The weights of a fragment:
//   w0,w1 = (row g,   k 2t, 2t+1)   w2,w3 = (row g+8, k 2t, 2t+1)
//   w4,w5 = (row g,   k 2t+8, +9)   w6,w7 = (row g+8, k 2t+8, +9)     (g = lane/4, t = lane%4)
// Each pair must land with its signs at bf16 bits 15/31 and its (e1 e0 m) at bits 8..6 / 24..22: a bf16
// whose value is the E2M1 value times 2^-126 (exponent field = E2M1 exponent; zero stays zero, the E2M1
// subnormal 0.5 becomes a bf16 subnormal). The 2^126 goes into the scale.
// The words of k16 steps 2h and 2h+1 (a, b) are decoded together; their bits are placed so that
//   pair 0 = a & kPairMask,  pair 1 = (a << 4) & kPairMask,  pair 2 = rotl(a, 10) & kPairMask   (same for b),
//   r = (a & kMergeMask) | ((b << 2) & ~kMergeMask)   (the 8 bits of each word that pairs 0..2 leave),
//   a's pair 3 = (r << 6) & kPairMask,   b's pair 3 = rotl(r, 12) & kPairMask.
// 12 integer-ALU ops per 16 weights (9 LOP3, 3 rotations; the 4 left shifts run as IMAD on the FMA pipe),
// the fewest a search over shift/rotate layouts of one and two words found (a word alone needs 7 per 8
// weights: its fourth pair has to merge bits from two shifts). The dequantizer is ALU-bound (leaving ALU ops out
// speeds the layer up: docs/perf/history.md), so this matters.
// bit_pos(w, i, b): where bit b (0 sign, 1 e1, 2 e0, 3 m) of weight i of word w (0 = a, 1 = b) lives:
// bit pos % 32 of word pos / 32 of the pair.
FP4MOE_HD constexpr int bit_pos(int w, int i, int b) {
  constexpr int kPos[2][8][4] = {
      {
          {15, 8, 7, 6}, {31, 24, 23, 22},    // a & M
          {11, 4, 3, 2}, {27, 20, 19, 18},    // a << 4
          {5, 30, 29, 28}, {21, 14, 13, 12},  // rotl(a, 10)
          {9, 32, 1, 0}, {25, 48, 17, 16},    // r << 6: bits of a (in kMergeMask) and of b << 2
      },
      {
          {47, 40, 39, 38}, {63, 56, 55, 54},  // b & M
          {43, 36, 35, 34}, {59, 52, 51, 50},  // b << 4
          {37, 62, 61, 60}, {53, 46, 45, 44},  // rotl(b, 10)
          {33, 58, 57, 26}, {49, 42, 41, 10},  // rotl(r, 12)
      },
  };
  return kPos[w][i][b];
}
inline constexpr uint32_t kPairMask = 0x81C081C0u;   // sign 15/31, bits 8..6 / 24..22
inline constexpr uint32_t kMergeMask = 0x06030603u;  // the bits of r taken from a (the rest from b << 2)

// Tile order: expert e, 16-row tile r (N/16 of them), 64-wide K group g (K/64): 512 bytes
// = 32 lanes x 16 bytes (4 words: k16 steps 0..3 of the group, decoded as the pairs 0/1 and 2/3). Scales of
// the same (e, r, g): 64 bytes
// = lane group g (8) x {row g, row g+8} x 4 k16 steps, one byte each.
inline constexpr int kGroupK = 64;
inline constexpr int kWeightGroupBytes = 512;
inline constexpr int kScaleGroupBytes = 64;

FP4MOE_HD constexpr int64_t weight_group_offset(int64_t e, int64_t r, int64_t g, int64_t n, int64_t k) {
  return ((e * (n / 16) + r) * (k / kGroupK) + g) * kWeightGroupBytes;
}
FP4MOE_HD constexpr int64_t scale_group_offset(int64_t e, int64_t r, int64_t g, int64_t n, int64_t k) {
  return ((e * (n / 16) + r) * (k / kGroupK) + g) * kScaleGroupBytes;
}
// The inverse: (expert, 16-row tile, K group) of the group with index `group` (offset / group bytes).
struct GroupCoords {
  int64_t e, r, g;
};
FP4MOE_HD constexpr GroupCoords group_coords(int64_t group, int64_t n, int64_t k) {
  const int64_t k64 = k / kGroupK, n16 = n / 16;
  return GroupCoords{group / (k64 * n16), (group / k64) % n16, group % k64};
}

// Scales are re-encoded as "UE5M3": every UE4M3 value (subnormals included) is 2^e * (1 + m/8) with
// e in [-9, 8]; byte = ((e + 9) << 3) | m. Then bf16 bits of (scale * 2^117) are just byte * 16 + 0x7580
// (one integer multiply-add in the kernel), and raw_weight * that = value * scale * 2^-9 exactly.
// A zero scale becomes byte 0 and the prepack zeroes its block's codes, so the product is still 0.
// Returns 0xFF for codes that are not a non-negative finite UE4M3 (the prepack rejects them).
FP4MOE_HD constexpr uint8_t ue4m3_to_ue5m3(uint8_t b) {
  if (b & 0x80) return 0xFF;            // negative scale
  if (b == 0x7F) return 0xFF;           // NaN
  if ((b >> 3) != 0) return static_cast<uint8_t>(b + 16);  // normal: e = E - 7, so e + 9 = E + 2
  switch (b & 7) {                      // subnormal m * 2^-9, renormalised
    case 0: return 0;
    case 1: return 0;                   // 2^-9
    case 2: return 8;                   // 2^-8
    case 3: return 12;                  // 1.5 * 2^-8
    case 4: return 16;                  // 2^-7
    case 5: return 18;                  // 1.25 * 2^-7
    case 6: return 20;                  // 1.5 * 2^-7
    default: return 22;                 // 1.75 * 2^-7
  }
}
inline constexpr uint32_t kScaleBf16Bias = 0x7580u;  // (117 + 127 - 9) << 7
// Exponent bias carried through the MMA: weights come out as value * scale * 2^-9; the epilogue's
// alpha = 2^9 / global_scale undoes it.
inline constexpr float kAlphaBias = 512.0f;

}  // namespace fp4moe::pack
