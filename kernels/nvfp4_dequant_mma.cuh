// In-register NVFP4 -> bf16 dequantization of one mma.m16n8k16 A fragment (see include/fp4moe/weight_pack.h).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "fp4moe/weight_pack.h"
#include "kernels/ptx.cuh"

namespace fp4moe::kernels {

// Rotate right: funnel shift of a word with itself (one SHF instruction).
__device__ __forceinline__ uint32_t ror(uint32_t x, int r) { return __funnelshift_r(x, x, r); }

// Scales of two k16 steps (s0 = 2h, s1 = 2h + 1) of one row as a bf16x2 (S_s0, S_s1): prmt moves bytes
// s0 and s1 of the 4 UE5M3 bytes into the two halves (selector 4 reads a zero byte from the second
// operand), then byte * 16 + bias is the bf16 bit pattern of scale * 2^117 in each half (one LEA/IMAD).
__device__ __forceinline__ uint32_t scale_pair2(uint32_t scale_bytes, int h) {
  const uint32_t sel = h == 0 ? 0x4140u : 0x4342u;
  return ptx::prmt(scale_bytes, 0u, sel) * 16u + (pack::kScaleBf16Bias | (pack::kScaleBf16Bias << 16));
}

// bf16x2 multiply by one half of `s` broadcast to both lanes; ptxas folds the broadcast into the
// instruction's operand selector (HMUL2 ... R.H0_H0 / R.H1_H1), so it costs nothing extra.
template <int kHalf>
__device__ __forceinline__ uint32_t mul_by_half(uint32_t x, uint32_t s) {
  const __nv_bfloat162 xv = *reinterpret_cast<const __nv_bfloat162*>(&x);
  const __nv_bfloat162 sv = *reinterpret_cast<const __nv_bfloat162*>(&s);
  const __nv_bfloat162 r = __hmul2(xv, kHalf == 0 ? __low2bfloat162(sv) : __high2bfloat162(sv));
  return *reinterpret_cast<const uint32_t*>(&r);
}

// 8 packed E2M1 weights -> the 4 bf16x2 registers of an A fragment, times their block scales.
// s_g / s_g8: scale_pair2() of rows g and g+8; kHalf picks this step's scale. 7 integer-pipe ops (+2 shifts
// that can issue as IMAD) + 4 bf16x2 multiplies for 8 weights.
template <int kHalf>
__device__ __forceinline__ void dequant_a_fragment(uint32_t q, uint32_t s_g, uint32_t s_g8, uint32_t (&a)[4]) {
  constexpr uint32_t M = pack::kPairMask;
  const uint32_t p0 = q & M;
  const uint32_t p1 = (q << 4) & M;
  const uint32_t p2 = ror(q, 6) & M;
  // ((q << 6) & kLastPairShl6) | ((q >> 2) & ~kLastPairShl6): truth table 0xE4 = (a & c) | (b & ~c).
  const uint32_t p3 = ptx::lop3<0xE4>(q << 6, q >> 2, pack::kLastPairShl6) & M;
  a[0] = mul_by_half<kHalf>(p0, s_g);
  a[1] = mul_by_half<kHalf>(p1, s_g8);
  a[2] = mul_by_half<kHalf>(p2, s_g);
  a[3] = mul_by_half<kHalf>(p3, s_g8);
}

}  // namespace fp4moe::kernels
