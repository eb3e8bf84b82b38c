// Finalize kernels of the down projection: the fixed-order sum over a token's k slots, or the fp32->bf16 copy.
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/ptx.cuh"

namespace fp4moe::kernels {

// Deterministic finalize: out[t, h] = bf16(sum over slots s = 0..k-1, in order, and within a slot over the
// down GEMM's K splits q = 0..splits-1, in order, of partial[q][inv[t*k+s], h]). Skipped pairs (inv = -1)
// add nothing. 4 columns per thread. The k * splits terms are latency-bound L2 reads (the down kernel just
// wrote them), so they are loaded kBatch at a time before being added in the fixed order.
// Launched as a programmatic dependent of the down GEMM (ptx.cuh, griddep_wait): it waits for its sums first.
__global__ void moe_finalize_gather_kernel(const float* __restrict__ partial, int32_t splits, int64_t split_stride,
                                           const int32_t* __restrict__ inv_perm, int32_t num_tokens, int32_t top_k,
                                           int32_t h, __nv_bfloat16* __restrict__ out) {
  constexpr int kBatch = 16;
  ptx::griddep_wait();
  const int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t cols4 = h / 4;
  if (idx >= num_tokens * cols4) return;
  const int64_t t = idx / cols4, c = (idx % cols4) * 4;
  const int32_t terms = top_k * splits;  // term i = (slot i / splits, split i % splits): the summation order
  float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int32_t i0 = 0; i0 < terms; i0 += kBatch) {
    float4 v[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      v[u] = make_float4(0.f, 0.f, 0.f, 0.f);
      const int32_t i = i0 + u;
      if (i >= terms) continue;
      const int32_t r = inv_perm[t * top_k + i / splits];
      if (r >= 0) v[u] = *reinterpret_cast<const float4*>(partial + (i % splits) * split_stride + static_cast<int64_t>(r) * h + c);
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {  // a skipped pair's term is +0, which changes no sum that starts at +0
      if (i0 + u >= terms) break;
      s.x += v[u].x; s.y += v[u].y; s.z += v[u].z; s.w += v[u].w;
    }
  }
  const __nv_bfloat162 lo = __floats2bfloat162_rn(s.x, s.y), hi = __floats2bfloat162_rn(s.z, s.w);
  uint2 o;
  o.x = *reinterpret_cast<const uint32_t*>(&lo);
  o.y = *reinterpret_cast<const uint32_t*>(&hi);
  *reinterpret_cast<uint2*>(out + t * h + c) = o;
}

// Fast mode's last step: bf16 copy of the fp32 accumulation buffer [T, H].
__global__ void moe_finalize_convert_kernel(const float* __restrict__ acc32, int64_t n, __nv_bfloat16* __restrict__ out) {
  ptx::griddep_wait();
  const int64_t i = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) * 8;
  if (i >= n) return;
  const float4 a = *reinterpret_cast<const float4*>(acc32 + i), b = *reinterpret_cast<const float4*>(acc32 + i + 4);
  __nv_bfloat162 v[4] = {__floats2bfloat162_rn(a.x, a.y), __floats2bfloat162_rn(a.z, a.w),
                         __floats2bfloat162_rn(b.x, b.y), __floats2bfloat162_rn(b.z, b.w)};
  *reinterpret_cast<uint4*>(out + i) = *reinterpret_cast<uint4*>(v);
}

}  // namespace fp4moe::kernels
