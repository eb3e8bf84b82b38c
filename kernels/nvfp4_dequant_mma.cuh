// In-register NVFP4 -> bf16 dequantization of one mma.m16n8k16 A fragment (see include/fp4moe/weight_pack.h).
#pragma once

#include <cstdint>

#include "fp4moe/weight_pack.h"
#include "kernels/ptx.cuh"

namespace fp4moe::kernels {

// Rotate right: funnel shift of a word with itself (one SHF instruction).
__device__ __forceinline__ uint32_t ror(uint32_t x, int r) { return __funnelshift_r(x, x, r); }

// bf16x2 (S, S) for k16 step `s` (0..3) from 4 UE5M3 scale bytes: prmt copies byte s into bytes 0 and 2
// (selector 4 picks a zero byte from the second operand), then byte * 16 + bias is the bf16 bit pattern
// of scale * 2^117 in each half (one IMAD).
__device__ __forceinline__ uint32_t scale_pair(uint32_t scale_bytes, int s) {
  const uint32_t dup = ptx::prmt(scale_bytes, 0u, 0x4040u | static_cast<uint32_t>(s) | (static_cast<uint32_t>(s) << 8));
  return dup * 16u + (pack::kScaleBf16Bias | (pack::kScaleBf16Bias << 16));
}

// 8 packed E2M1 weights -> the 4 bf16x2 registers of an A fragment, times their block scales.
// s_row_g / s_row_g8: scale_pair() of rows g and g+8. 9 integer ops + 4 bf16x2 multiplies for 8 weights.
__device__ __forceinline__ void dequant_a_fragment(uint32_t q, uint32_t s_row_g, uint32_t s_row_g8, uint32_t (&a)[4]) {
  constexpr uint32_t M = pack::kPairMask;
  const uint32_t p0 = q & M;
  const uint32_t p1 = ror(q, 4) & M;
  const uint32_t p2 = ror(q, 10) & M;
  // (ror6 & kLastPairRot6) | (ror14 & ~kLastPairRot6): truth table 0xE4 = (a & c) | (b & ~c).
  const uint32_t p3 = ptx::lop3<0xE4>(ror(q, 6), ror(q, 14), pack::kLastPairRot6) & M;
  a[0] = ptx::mul_bf16x2(p0, s_row_g);
  a[1] = ptx::mul_bf16x2(p1, s_row_g8);
  a[2] = ptx::mul_bf16x2(p2, s_row_g);
  a[3] = ptx::mul_bf16x2(p3, s_row_g8);
}

}  // namespace fp4moe::kernels
