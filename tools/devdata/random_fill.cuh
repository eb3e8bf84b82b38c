// GPU fill of random NVFP4 weight bytes / block scales from the counter-based hash (tests and benchmarks).
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>

#include "hash_rng.h"

namespace fp4moe::devdata {

// A template so that several translation units of one binary can include it.
template <int kUnused = 0>
__global__ void fill_random_bytes_kernel(uint8_t* out, int64_t n, uint64_t seed, bool scales) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = scales ? random_block_scale(seed, static_cast<uint64_t>(i)) : random_packed_byte(seed, static_cast<uint64_t>(i));
}

}  // namespace fp4moe::devdata
