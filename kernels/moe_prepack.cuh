// Prepack kernels: checkpoint-layout NVFP4 expert weights -> the tiled, bit-permuted layout the GEMMs stream.
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>

#include "kernels/weight_pack.h"

namespace fp4moe::kernels {

inline constexpr uint32_t kErrBadScale = 1u;         // a negative or NaN UE4M3 block scale
inline constexpr uint32_t kErrBadGlobalScale = 2u;   // a global scale that is not finite and > 0

enum class RowInterleave : int {
  kNone = 0,       // prepacked row r = source row r
  kGateFirst = 1,  // source [2I, K] = [gate; up]; 16-row tile r holds gate rows 8r..8r+7 then up rows 8r..8r+7
  kUpFirst = 2,    // source [2I, K] = [up; gate]; same tile order as kGateFirst
};

struct PrepackParams {
  const uint8_t* src_packed;   // [E, N, K/2], element 2j in the low nibble
  const uint8_t* src_scales;   // [E, N, K/16] UE4M3, linear
  const float* src_global;     // [E]
  bool global_is_multiplier;   // true: x = q * sf * g (ModelOpt weight_scale_2); false: x = q * sf / g
  int64_t num_experts, n, k;
  RowInterleave interleave;
  uint8_t* dst_weights;
  uint8_t* dst_scales;
  float* dst_alpha;            // [E] = 2^9 / gs
  uint32_t* error_flags;
};

// Source row of local row rho (0..15) of 16-row tile r.
__device__ __forceinline__ int64_t prepack_src_row(const PrepackParams& p, int64_t r, int rho) {
  if (p.interleave == RowInterleave::kNone) return r * 16 + rho;
  const int64_t half = p.n / 2;
  const int64_t j = r * 8 + (rho & 7);
  const bool is_gate = rho < 8;
  const bool first = (p.interleave == RowInterleave::kGateFirst) == is_gate;
  return first ? j : half + j;
}

// One thread per output 32-bit weight word.
__global__ void prepack_weights_kernel(PrepackParams p) {
  const int64_t words = p.num_experts * p.n * p.k / 8;
  const int64_t w = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (w >= words) return;
  const int64_t group = w / 128, in_group = w % 128;  // 512 B = 128 words per (e, r, g)
  const int lane = static_cast<int>(in_group / 4), s = static_cast<int>(in_group % 4);
  const auto [e, r, g] = pack::group_coords(group, p.n, p.k);
  const int gl = lane / 4, t = lane % 4;
  // The words of steps 2h and 2h+1 share bits (weight_pack.h): gather this word's from both steps' weights.
  const int half = s & 1;
  uint32_t out = 0;
#pragma unroll
  for (int wd = 0; wd < 2; ++wd) {  // word a (step s & ~1), then b
    const int step = (s & ~1) + wd;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int rho = gl + ((i >> 1) & 1) * 8;                          // w2,w3,w6,w7 are row g+8
      const int64_t kk = g * 64 + step * 16 + 2 * t + (i & 1) + ((i >> 2) & 1) * 8;  // w4..w7 are k+8
      const int64_t row = prepack_src_row(p, r, rho);
      const int64_t src = (e * p.n + row) * (p.k / 2) + kk / 2;
      uint32_t code = (kk & 1) ? (p.src_packed[src] >> 4) : (p.src_packed[src] & 0xF);
      if (p.src_scales[(e * p.n + row) * (p.k / 16) + kk / 16] == 0) code = 0;  // zero scale: keep the product 0
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        const int pos = pack::bit_pos(wd, i, b);
        if (pos / 32 == half) out |= ((code >> (3 - b)) & 1u) << (pos % 32);
      }
    }
  }
  reinterpret_cast<uint32_t*>(p.dst_weights)[w] = out;
}

// One thread per output scale byte.
__global__ void prepack_scales_kernel(PrepackParams p) {
  const int64_t bytes = p.num_experts * p.n * p.k / 16;
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= bytes) return;
  const int64_t group = i / 64;
  const int b = static_cast<int>(i % 64);
  const auto [e, r, g] = pack::group_coords(group, p.n, p.k);
  const int gl = b / 8, h = (b / 4) % 2, s = b % 4;
  const int64_t row = prepack_src_row(p, r, gl + 8 * h);
  const uint8_t src = p.src_scales[(e * p.n + row) * (p.k / 16) + g * 4 + s];
  const uint8_t enc = pack::ue4m3_to_ue5m3(src);
  if (enc == 0xFF) atomicOr(p.error_flags, kErrBadScale);
  p.dst_scales[i] = enc == 0xFF ? 0 : enc;
}

__global__ void prepack_alpha_kernel(PrepackParams p) {
  const int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (e >= p.num_experts) return;
  const float g = p.src_global[e];
  if (!(isfinite(g) && g > 0.0f)) atomicOr(p.error_flags, kErrBadGlobalScale);
  p.dst_alpha[e] = p.global_is_multiplier ? pack::kAlphaBias * g : pack::kAlphaBias / g;
}

}  // namespace fp4moe::kernels
