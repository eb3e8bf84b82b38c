// Kernels that quantize a bf16 matrix to NVFP4 (amax reduction, then one pass per 16-element block).
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cuda_bf16.h>
#include <cstdint>

#include "fp4moe/scale_layout.h"
#include "kernels/nvfp4_device.cuh"

namespace fp4moe::kernels {

// Bits of the workspace's error word.
inline constexpr uint32_t kErrNonFiniteInput = 1u;
// The caller's global scale is not finite, positive and normal (the host codec's validate_global_scale rule).
inline constexpr uint32_t kErrBadGlobalScale = 2u;

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
  uint8_t* packed;            // [rows, k/2], 8-byte aligned
  uint8_t* scales;            // layout-sized UE4M3 buffer
  const float* gs_in;         // caller's global scale (device), or null when computing it
  const uint32_t* amax_bits;  // from nvfp4_amax_kernel when computing it
  float* gs_out;              // where the computed global scale is written (may be null)
  uint32_t* error_flags;
  int64_t rows, k;
  ScaleLayout layout;
};

// One thread per scale entry of the (padded) scale grid: reads its 16 bf16 (two 16-byte loads),
// writes 8 packed bytes and 1 scale byte. Padding entries of a swizzled buffer get scale 0.
__global__ void quantize_nvfp4_kernel(QuantizeNvfp4Params p) {
  const int64_t nsc = p.k / kNvfp4BlockSize;
  const int64_t nsc_pad = scale_cols_padded(p.k, p.layout);
  const int64_t rows_pad = scale_rows_padded(p.rows, p.layout);
  const int64_t u = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t units = rows_pad * nsc_pad;
  if (u >= units) return;
  int64_t r, sc;
  split_flat_index(u, nsc_pad, units, &r, &sc);

  float gs;
  if (p.gs_in != nullptr) {
    gs = *p.gs_in;
    if (u == 0 && !usable_global_scale(gs)) atomicOr(p.error_flags, kErrBadGlobalScale);  // (one thread reports it)
  } else {
    gs = nvfp4_global_scale(__uint_as_float(*p.amax_bits));
    if (u == 0 && p.gs_out != nullptr) *p.gs_out = gs;
  }
  if (r >= p.rows || sc >= nsc) {
    p.scales[scale_offset(r, sc, nsc, p.layout)] = 0;
    return;
  }
  const uint4* src = reinterpret_cast<const uint4*>(p.in + r * p.k + sc * kNvfp4BlockSize);
  const uint4 v0 = src[0], v1 = src[1];
  const uint32_t w[8] = {v0.x, v0.y, v0.z, v0.w, v1.x, v1.y, v1.z, v1.w};
  float x[16];
  float bmax = 0.0f;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    x[2 * j] = __uint_as_float(w[j] << 16);              // bf16 -> float is a 16-bit shift
    x[2 * j + 1] = __uint_as_float(w[j] & 0xFFFF0000u);
    bmax = fmaxf(bmax, fmaxf(fabsf(x[2 * j]), fabsf(x[2 * j + 1])));
  }
  if (!isfinite(bmax)) atomicOr(p.error_flags, kErrNonFiniteInput);
  const uint8_t sf = nvfp4_block_scale(gs, bmax);
  const float sf_f = e4m3_decode(sf);
  uint32_t out[2] = {0u, 0u};
  if (sf_f != 0.0f) {
    // One IEEE division per block, a multiply per element: same ops, same order as the host codec.
    const float inv = fminf(__fdiv_rn(gs, sf_f), FLT_MAX);
#pragma unroll
    for (int i = 0; i < 16; ++i) out[i / 8] |= e2m1_encode(__fmul_rn(x[i], inv)) << ((i % 8) * 4);
  }
  *reinterpret_cast<uint2*>(p.packed + r * (p.k / 2) + sc * 8) = make_uint2(out[0], out[1]);
  p.scales[scale_offset(r, sc, nsc, p.layout)] = sf;
}

}  // namespace fp4moe::kernels
