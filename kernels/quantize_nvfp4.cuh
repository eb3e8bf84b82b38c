// Kernels that quantize a bf16 matrix to NVFP4 (amax reduction, then one pass per 16-element block).
#pragma once

#include <cuda_bf16.h>
#include <cstdint>

#include "fp4moe/scale_layout.h"
#include "kernels/nvfp4_device.cuh"

namespace fp4moe::kernels {

// Bits of the workspace's error word.
inline constexpr uint32_t kErrNonFiniteInput = 1u;

// Max of |x| over the tensor as the bits of a non-negative float. |bf16| bit patterns (sign cleared)
// order like the values they encode, so the reduction runs on integers; the float is the bits << 16.
// Any pattern >= 0x7F80 (Inf or NaN) raises kErrNonFiniteInput.
__global__ void nvfp4_amax_kernel(const uint4* __restrict__ in, int64_t num_vec8, uint32_t* __restrict__ amax_bits,
                                  uint32_t* __restrict__ error_flags) {
  uint32_t m = 0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < num_vec8;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint4 v = in[i];
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      m = max(m, w[j] & 0x7FFFu);
      m = max(m, (w[j] >> 16) & 0x7FFFu);
    }
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) m = max(m, __shfl_xor_sync(0xFFFFFFFFu, m, off));
  if ((threadIdx.x & 31) == 0 && m != 0) {
    atomicMax(amax_bits, m << 16);
    if (m >= 0x7F80u) atomicOr(error_flags, kErrNonFiniteInput);
  }
}

struct QuantizeNvfp4Params {
  const __nv_bfloat16* in;    // [rows, k] row-major, 16-byte aligned
  uint8_t* packed;            // [rows, k/2], 4-byte aligned
  uint8_t* scales;            // layout-sized UE4M3 buffer
  const float* gs_in;         // caller's global scale (device), or null when computing it
  const uint32_t* amax_bits;  // from nvfp4_amax_kernel when computing it
  float* gs_out;              // where the computed global scale is written (may be null)
  uint32_t* error_flags;
  int64_t rows, k;
  ScaleLayout layout;
};

// Two lanes per 16-element block (each lane 8 elements = one 16-byte load, so a warp's load covers 512
// contiguous bytes and its 4-byte store 128), the block's amax combined with one shuffle. Lanes of the
// (padded) scale grid's padding write scale 0. One thread per half block of the padded grid.
__global__ void quantize_nvfp4_kernel(QuantizeNvfp4Params p) {
  const int64_t nsc = p.k / kNvfp4BlockSize;
  const int64_t nsc_pad = scale_cols_padded(p.k, p.layout);
  const int64_t rows_pad = scale_rows_padded(p.rows, p.layout);
  const int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t units = rows_pad * nsc_pad;  // blocks of 16
  // The grid is a whole number of warps over 2 * units threads; lanes past the end stay for the shuffle.
  const bool live = t < 2 * units;
  const int64_t u = live ? t >> 1 : 0;
  const int half = static_cast<int>(t & 1);
  // 64-bit division costs several times a 32-bit one; the grid almost always fits 32 bits.
  int64_t r, sc;
  if (units <= 0xFFFFFFFFll) {
    const uint32_t u32 = static_cast<uint32_t>(u), n32 = static_cast<uint32_t>(nsc_pad);
    r = u32 / n32;
    sc = u32 - static_cast<uint32_t>(r) * n32;
  } else {
    r = u / nsc_pad;
    sc = u % nsc_pad;
  }
  float gs;
  if (p.gs_in != nullptr) {
    gs = *p.gs_in;
  } else {
    gs = nvfp4_global_scale(__uint_as_float(*p.amax_bits));
    if (t == 0 && p.gs_out != nullptr) *p.gs_out = gs;
  }
  const bool real = live && r < p.rows && sc < nsc;
  float x[8];
  float bmax = 0.0f;
  if (real) {
    const uint4 v = *reinterpret_cast<const uint4*>(p.in + r * p.k + sc * kNvfp4BlockSize + half * 8);
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      x[2 * j] = __uint_as_float(w[j] << 16);  // bf16 -> float is a 16-bit shift
      x[2 * j + 1] = __uint_as_float(w[j] & 0xFFFF0000u);
      bmax = fmaxf(bmax, fmaxf(fabsf(x[2 * j]), fabsf(x[2 * j + 1])));
    }
  }
  bmax = fmaxf(bmax, __shfl_xor_sync(0xFFFFFFFFu, bmax, 1));  // the other half of the block
  if (!live) return;
  if (!real) {
    if (half == 0) p.scales[scale_offset(r, sc, nsc, p.layout)] = 0;
    return;
  }
  if (!isfinite(bmax)) atomicOr(p.error_flags, kErrNonFiniteInput);
  const uint8_t sf = nvfp4_block_scale(gs, bmax);
  const float sf_f = e4m3_decode(sf);
  uint32_t out = 0;
  if (sf_f != 0.0f) {
    // One IEEE division per block, a multiply per element: same ops, same order as the host codec.
    const float inv = fminf(__fdiv_rn(gs, sf_f), FLT_MAX);
#pragma unroll
    for (int i = 0; i < 8; ++i) out |= e2m1_encode(__fmul_rn(x[i], inv)) << (i * 4);
  }
  *reinterpret_cast<uint32_t*>(p.packed + r * (p.k / 2) + sc * 8 + half * 4) = out;
  if (half == 0) p.scales[scale_offset(r, sc, nsc, p.layout)] = sf;
}

}  // namespace fp4moe::kernels
