// Test-data helpers: seeded random matrices (the seed is printed by each test so a failure can be replayed).
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "fp4moe/bf16.h"

namespace fp4moe::devdata {

// A fresh seed per call (from std::random_device), so every run checks new inputs.
inline uint64_t fresh_seed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

// bf16 values: normal(0, 1) scaled per row by 2^U(-row_exp, row_exp) (default 8: blocks span many scale
// exponents, some beyond E4M3's range), with a sprinkling of exact zeros and 50x outliers. Never all zeros.
inline std::vector<uint16_t> random_bf16_matrix(int64_t rows, int64_t k, uint64_t seed, int row_exp = 8) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> expo(-row_exp, row_exp), pick(0, 99);
  std::vector<uint16_t> v(static_cast<size_t>(rows * k));
  for (int64_t r = 0; r < rows; ++r) {
    const float row_scale = std::ldexp(1.0f, expo(rng));
    for (int64_t c = 0; c < k; ++c) {
      const int p = pick(rng);
      float x = nd(rng) * row_scale;
      if (p == 0) x = 0.0f;
      if (p == 1) x *= 50.0f;
      v[static_cast<size_t>(r * k + c)] = float_to_bf16(x);
    }
  }
  return v;
}

}  // namespace fp4moe::devdata
