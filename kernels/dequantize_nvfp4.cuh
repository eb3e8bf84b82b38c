// Kernel that expands an NVFP4 matrix back to bf16: x = bf16(e2m1 * scale * (1 / global_scale)).
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cuda_bf16.h>
#include <cstdint>

#include "fp4moe/scale_layout.h"
#include "kernels/nvfp4_device.cuh"

namespace fp4moe::kernels {

struct DequantizeNvfp4Params {
  const uint8_t* packed;  // [rows, k/2], 8-byte aligned
  const uint8_t* scales;  // UE4M3 in `layout`
  const float* gs;        // global scale (device)
  __nv_bfloat16* out;     // [rows, k], 16-byte aligned
  int64_t rows, k;
  ScaleLayout layout;
  uint32_t* error_flags;  // optional (null: nothing recorded)
};

// Bits of DequantizeNvfp4Args::error_flags.
inline constexpr uint32_t kErrDequantBadGlobalScale = 1u;  // not finite, positive and normal
inline constexpr uint32_t kErrDequantBadScaleByte = 2u;    // the sign bit set, or the E4M3 NaN pattern

// One thread per 16-element block: 8 packed bytes + 1 scale in, 32 bytes out.
__global__ void dequantize_nvfp4_kernel(DequantizeNvfp4Params p) {
  const int64_t nsc = p.k / kNvfp4BlockSize;
  const int64_t u = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t units = p.rows * nsc;
  if (u >= units) return;
  int64_t r, sc;
  split_flat_index(u, nsc, units, &r, &sc);
  const uint2 q = *reinterpret_cast<const uint2*>(p.packed + r * (p.k / 2) + sc * 8);
  const uint8_t sbyte = p.scales[scale_offset(r, sc, nsc, p.layout)];
  const float sf = e4m3_decode(sbyte);
  const float gs = *p.gs;
  const float inv_gs = __frcp_rn(gs);  // IEEE 1/gs, as the host's 1.0f / gs
  if (p.error_flags != nullptr) {  // (what the host codec rejects; one thread reports the global scale)
    if (u == 0 && !usable_global_scale(gs)) atomicOr(p.error_flags, kErrDequantBadGlobalScale);
    if (!usable_ue4m3_scale(sbyte)) atomicOr(p.error_flags, kErrDequantBadScaleByte);
  }
  const uint32_t qw[2] = {q.x, q.y};
  uint32_t o[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const uint32_t byte = (qw[j / 4] >> ((j % 4) * 8)) & 0xFFu;
    // e2m1 * sf is exact in fp32 (2 + 4 significant bits); the multiply by 1/gs rounds once, as on the host.
    const float lo = __fmul_rn(e2m1_decode(byte & 0xF) * sf, inv_gs);
    const float hi = __fmul_rn(e2m1_decode(byte >> 4) * sf, inv_gs);
    const __nv_bfloat162 b = __floats2bfloat162_rn(lo, hi);
    o[j] = *reinterpret_cast<const uint32_t*>(&b);
  }
  uint4* dst = reinterpret_cast<uint4*>(p.out + r * p.k + sc * kNvfp4BlockSize);
  dst[0] = make_uint4(o[0], o[1], o[2], o[3]);
  dst[1] = make_uint4(o[4], o[5], o[6], o[7]);
}

}  // namespace fp4moe::kernels
