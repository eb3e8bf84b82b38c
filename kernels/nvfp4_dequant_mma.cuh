// In-register NVFP4 -> bf16 dequantization of one mma.m16n8k16 A fragment (see kernels/weight_pack.h).
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/weight_pack.h"
#include "kernels/ptx.cuh"

namespace fp4moe::kernels {

// Multipliers that ptxas cannot see as literals, so x * mul stays an IMAD on the FMA pipe. With a literal
// power of two it emits some of these shifts, and the scale's multiply-add, as SHF or LEA on the integer ALU,
// the pipe the dequantizer saturates with its LOP3s. The GEMM kernels take them as a kernel parameter
// (RoutingParams::dequant_mul, = kDequantMul), read through the parameter constant bank: in a __constant__ array
// the first read misses the constant cache behind the block's first weight copies.
struct DequantMul {
  uint32_t x16, x64, x4;  // x << 4, x << 6, x << 2
};
inline constexpr DequantMul kDequantMul{16u, 64u, 4u};

// Rotate left: funnel shift of a word with itself (one SHF instruction).
__device__ __forceinline__ uint32_t rotl(uint32_t x, int r) { return __funnelshift_l(x, x, r); }

// Scales of two k16 steps (s0 = 2h, s1 = 2h + 1) of one row as a bf16x2 (S_s0, S_s1): prmt moves bytes
// s0 and s1 of the 4 UE5M3 bytes into the two halves (selector 4 reads a zero byte from the second
// operand), then byte * 16 + bias is the bf16 bit pattern of scale * 2^117 in each half (one IMAD).
__device__ __forceinline__ uint32_t scale_pair2(uint32_t scale_bytes, int h, const DequantMul& mul) {
  const uint32_t sel = h == 0 ? 0x4140u : 0x4342u;
  return ptx::prmt(scale_bytes, 0u, sel) * mul.x16 + (pack::kScaleBf16Bias | (pack::kScaleBf16Bias << 16));
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

// The 16 packed E2M1 weights of k16 steps 2h and 2h+1 (words qa, qb; kernels/weight_pack.h) -> the
// 4 bf16x2 registers of each step's A fragment, times their block scales. s_g / s_g8: scale_pair2() of rows
// g and g+8 (half 0 = step 2h, half 1 = step 2h+1). 9 LOP3s and 3 rotations on the integer ALU, 4 IMADs and
// 8 bf16x2 multiplies on the FMA pipe for 16 weights.
__device__ __forceinline__ void dequant_a_fragments(uint32_t qa, uint32_t qb, uint32_t s_g, uint32_t s_g8,
                                                    const DequantMul& mul, uint32_t (&a)[4], uint32_t (&b)[4]) {
  constexpr uint32_t M = pack::kPairMask;
  // The bits pairs 0..2 leave: a's in place, b's shifted left by 2; truth table 0xE4 = (a & c) | (b & ~c).
  const uint32_t r = ptx::lop3<0xE4>(qa, qb * mul.x4, pack::kMergeMask);
  a[0] = mul_by_half<0>(qa & M, s_g);
  a[1] = mul_by_half<0>((qa * mul.x16) & M, s_g8);
  a[2] = mul_by_half<0>(rotl(qa, 10) & M, s_g);
  a[3] = mul_by_half<0>((r * mul.x64) & M, s_g8);
  b[0] = mul_by_half<1>(qb & M, s_g);
  b[1] = mul_by_half<1>((qb * mul.x16) & M, s_g8);
  b[2] = mul_by_half<1>(rotl(qb, 10) & M, s_g);
  b[3] = mul_by_half<1>(rotl(r, 12) & M, s_g8);
}

}  // namespace fp4moe::kernels
