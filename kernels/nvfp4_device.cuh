// Device-side NVFP4 scalar math shared by the quantize, dequantize and GEMM kernels (raw values, no host code).
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cfloat>
#include <cstdint>

namespace fp4moe::kernels {

// E2M1 code of a value already divided by its block's scale. Hopper has no E2M1 convert
// (`cvt.rn.satfinite.e2m1x2.f32` is sm_100/sm_120 only, PTX ISA "cvt"), so round in software:
// - |v| >= 1: E2M1 keeps 1 mantissa bit, so round the fp32 bit pattern to 1 mantissa bit, half to even
//   (add 0x1FFFFF plus the kept bit, i.e. bit 22), and read exponent and that bit: (bits >> 22) - 252 is the
//   code (1.0 -> 2 ... 6.0 -> 7); larger values saturate to 7.
// - |v| < 1: the codes 0, 1, 2 are 0, 0.5, 1.0, a uniform step, so the code is rint(2|v|), half to even.
// Exact midpoints (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5) go to the even mantissa, as the host codec does.
__device__ __forceinline__ uint32_t e2m1_encode(float v) {
  const float a = fabsf(v);
  const uint32_t bits = __float_as_uint(a);
  const uint32_t big = min(((bits + 0x1FFFFFu + ((bits >> 22) & 1u)) >> 22) - 252u, 7u);
  const uint32_t small = __float2uint_rn(2.0f * a);
  const uint32_t code = a < 1.0f ? small : big;
  return code | (__float_as_uint(v) >> 31 << 3);  // sign bit into bit 3 (-0 kept as 0x8)
}

__device__ __forceinline__ float e2m1_decode(uint32_t code) {
  // 2*magnitude for codes 0..7 is {0,1,2,3,4,6,8,12}: one byte each, packed into two words.
  constexpr uint32_t kLo = 0x03020100u, kHi = 0x0C080604u;
  const uint32_t c = code & 7u;
  const uint32_t twice = ((c < 4 ? kLo : kHi) >> ((c & 3u) * 8u)) & 0xFFu;
  const float m = 0.5f * static_cast<float>(twice);
  return (code & 8u) ? -m : m;
}

// Nearest E4M3 with saturation to +-448. cuda_fp8.h lowers this to `cvt.rn.satfinite.e4m3x2.f32`
// on sm_89+ (PTX ISA "cvt": https://docs.nvidia.com/cuda/parallel-thread-execution/#data-movement-and-conversion-instructions-cvt).
__device__ __forceinline__ uint8_t e4m3_encode(float v) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
}

// E4M3 -> float, exact (every E4M3 value is an fp16 value; `cvt.rn.f16x2.e4m3x2` on sm_89+).
__device__ __forceinline__ float e4m3_decode(uint8_t code) {
  const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(code), __NV_E4M3);
  return __half2float(__half(h));
}

// The recipe's global scale, written with explicit IEEE round-to-nearest ops so that no compiler
// contraction can make it differ from the host codec (src/nvfp4_codec.cc).
__device__ __forceinline__ float nvfp4_global_scale(float amax) {
  if (!(amax > 0.0f)) return 1.0f;
  const float gs = __fdiv_rn(448.0f * 6.0f, amax);
  return isinf(gs) ? FLT_MAX : gs;
}

__device__ __forceinline__ uint8_t nvfp4_block_scale(float gs, float block_amax) {
  return e4m3_encode(__fdiv_rn(__fmul_rn(gs, block_amax), 6.0f));
}

// Row and column of flat index u (< units) of a grid with `cols` columns. A 64-bit division costs several
// times a 32-bit one and the grids of these kernels nearly always have fewer than 2^32 units: then it
// divides in 32 bits.
__device__ __forceinline__ void split_flat_index(int64_t u, int64_t cols, int64_t units, int64_t* row, int64_t* col) {
  if (units <= 0xFFFFFFFFll) {
    const uint32_t u32 = static_cast<uint32_t>(u), n32 = static_cast<uint32_t>(cols), r32 = u32 / n32;
    *row = r32;
    *col = u32 - r32 * n32;
  } else {
    *row = u / cols;
    *col = u % cols;
  }
}

}  // namespace fp4moe::kernels
