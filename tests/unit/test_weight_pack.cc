// Host checks of the prepacked weight format (include/fp4moe/weight_pack.h): the bit layout is a bijection,
// the kernel's shift/rotate/mask extraction (restated here) yields value * 2^-126 as bf16 for every code in
// every position, and the UE5M3 scale re-encoding gives bf16(scale * 2^117) exactly, so the product the
// kernel forms is e2m1 * scale * 2^-9 without rounding.
// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>

#include "fp4moe/bf16.h"
#include "fp4moe/nvfp4.h"
#include "kernels/weight_pack.h"

namespace fp4moe {
namespace {

// The two words of k16 steps 2h and 2h+1 from their 16 codes (word w's weight i = codes[w][i]).
void pack_words(const uint8_t (&codes)[2][8], uint32_t (&q)[2]) {
  q[0] = q[1] = 0;
  for (int w = 0; w < 2; ++w)
    for (int i = 0; i < 8; ++i)
      for (int b = 0; b < 4; ++b) {
        const int pos = pack::bit_pos(w, i, b);
        q[pos / 32] |= ((codes[w][i] >> (3 - b)) & 1u) << (pos % 32);
      }
}

uint32_t rotl(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

// The two words' bf16x2 registers as kernels/nvfp4_dequant_mma.cuh extracts them (before the scale multiply).
void extract(const uint32_t (&q)[2], uint32_t (&p)[2][4]) {
  constexpr uint32_t M = pack::kPairMask;
  const uint32_t r = (q[0] & pack::kMergeMask) | ((q[1] << 2) & ~pack::kMergeMask);
  for (int w = 0; w < 2; ++w) {
    p[w][0] = q[w] & M;
    p[w][1] = (q[w] << 4) & M;
    p[w][2] = rotl(q[w], 10) & M;
  }
  p[0][3] = (r << 6) & M;
  p[1][3] = rotl(r, 12) & M;
}

TEST(WeightPack, GroupCoordsInvertTheGroupOffsets) {
  const int64_t n = 96, k = 320;  // 6 tiles of 16 rows, 5 groups of 64
  for (int64_t group = 0; group < 3 * 6 * 5; ++group) {
    const pack::GroupCoords c = pack::group_coords(group, n, k);
    EXPECT_EQ(pack::weight_group_offset(c.e, c.r, c.g, n, k), group * pack::kWeightGroupBytes) << group;
    EXPECT_EQ(pack::scale_group_offset(c.e, c.r, c.g, n, k), group * pack::kScaleGroupBytes) << group;
  }
}

TEST(WeightPack, BitLayoutIsABijection) {
  std::set<int> seen;
  for (int w = 0; w < 2; ++w)
    for (int i = 0; i < 8; ++i)
      for (int b = 0; b < 4; ++b) {
        const int p = pack::bit_pos(w, i, b);
        ASSERT_GE(p, 0);
        ASSERT_LT(p, 64);
        ASSERT_TRUE(seen.insert(p).second) << "bit " << p << " used twice";
      }
}

TEST(WeightPack, ExtractionGivesEveryCodeTimesTwoToTheMinus126InEveryPosition) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 4096; ++trial) {
    uint8_t codes[2][8];
    for (auto& word : codes)
      for (auto& c : word) c = static_cast<uint8_t>(rng() & 0xF);
    if (trial < 16)  // every code in every position
      for (auto& word : codes)
        for (auto& c : word) c = static_cast<uint8_t>(trial);
    uint32_t q[2], p[2][4];
    pack_words(codes, q);
    extract(q, p);
    for (int w = 0; w < 2; ++w)
      for (int pair = 0; pair < 4; ++pair)
        for (int half = 0; half < 2; ++half) {
          const uint8_t code = codes[w][2 * pair + half];
          const float got = bf16_to_float(static_cast<uint16_t>(p[w][pair] >> (16 * half)));
          const float want = std::ldexp(e2m1_to_float(code), -126);
          ASSERT_EQ(got, want) << "code " << int(code) << " word " << w << " pair " << pair << " half " << half;
          ASSERT_EQ(std::signbit(got), (code & 8) != 0) << "sign of code " << int(code);
        }
  }
}

TEST(WeightPack, ScaleReencodingIsExactAndTheProductNeedsNoRounding) {
  for (int b = 0; b <= 0x7E; ++b) {
    const uint8_t enc = pack::ue4m3_to_ue5m3(static_cast<uint8_t>(b));
    ASSERT_NE(enc, 0xFF) << b;
    const uint16_t bits = static_cast<uint16_t>(enc * 16u + pack::kScaleBf16Bias);
    const double s = bf16_to_float(bits);
    const double sf = e4m3_to_float(static_cast<uint8_t>(b));
    if (b == 0) {
      EXPECT_EQ(s, std::ldexp(1.0, 108)) << "a zero scale maps to 2^-9 * 2^117 (its block's codes are zeroed)";
      continue;
    }
    ASSERT_EQ(s, sf * std::ldexp(1.0, 117)) << "code " << b;
    // raw weight (value * 2^-126) times the scale, rounded to bf16 as the HMUL2 does: exact.
    for (uint8_t code = 0; code < 16; ++code) {
      const double raw = std::ldexp(e2m1_to_float(code), -126);
      const double exact = raw * s;
      ASSERT_EQ(round_to_bf16(static_cast<float>(exact)), static_cast<float>(exact)) << b << " " << int(code);
      ASSERT_EQ(exact, e2m1_to_float(code) * sf * std::ldexp(1.0, -9));
    }
  }
  EXPECT_EQ(pack::ue4m3_to_ue5m3(0x7F), 0xFF) << "NaN rejected";
  EXPECT_EQ(pack::ue4m3_to_ue5m3(0xB8), 0xFF) << "negative rejected";
}

}  // namespace
}  // namespace fp4moe
