// Device-side NVFP4 scalar math shared by the quantize, dequantize and GEMM kernels (raw values, no host code).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cfloat>
#include <cstdint>

namespace fp4moe::kernels {

// E2M1 code of a value already divided by its block's scale. Hopper has no E2M1 convert
// (`cvt.rn.satfinite.e2m1x2.f32` is sm_100/sm_120 only, PTX ISA "cvt"), so round in software: the code
// is the number of rounding thresholds |v| passes. Using `>` at thresholds whose lower neighbour has an
// even code (0.25, 1.25, 2.5, 5) and `>=` where the upper one is even (0.75, 1.75, 3.5) makes exact
// midpoints go to the even mantissa (round half to even); past 5 everything becomes 6 (saturate).
__device__ __forceinline__ uint32_t e2m1_encode(float v) {
  const float a = fabsf(v);
  uint32_t code = (a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) + (a >= 3.5f) + (a > 5.0f);
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

}  // namespace fp4moe::kernels
