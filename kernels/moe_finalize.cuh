// Finalize kernels of the down projection: the fixed-order sum over a token's k slots, or the fp32->bf16 copy.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace fp4moe::kernels {

// Deterministic finalize: out[t, h] = bf16(sum over slots s = 0..k-1, in order, of partial[inv[t*k+s], h]).
// Skipped pairs (inv = -1) add nothing. 8 columns per thread (two float4 loads per slot).
__global__ void moe_finalize_gather_kernel(const float* __restrict__ partial, const int32_t* __restrict__ inv_perm,
                                           int32_t num_tokens, int32_t top_k, int32_t h,
                                           __nv_bfloat16* __restrict__ out) {
  const int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t cols8 = h / 8;
  if (idx >= num_tokens * cols8) return;
  const int64_t t = idx / cols8, c = (idx % cols8) * 8;
  float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int slot = 0; slot < top_k; ++slot) {
    const int32_t r = inv_perm[t * top_k + slot];
    if (r < 0) continue;
    const float4* src = reinterpret_cast<const float4*>(partial + static_cast<int64_t>(r) * h + c);
    const float4 a = src[0], b = src[1];
    s[0] += a.x; s[1] += a.y; s[2] += a.z; s[3] += a.w;
    s[4] += b.x; s[5] += b.y; s[6] += b.z; s[7] += b.w;
  }
  uint4 o;
  __nv_bfloat162 v[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) v[i] = __floats2bfloat162_rn(s[2 * i], s[2 * i + 1]);
  o.x = *reinterpret_cast<uint32_t*>(&v[0]);
  o.y = *reinterpret_cast<uint32_t*>(&v[1]);
  o.z = *reinterpret_cast<uint32_t*>(&v[2]);
  o.w = *reinterpret_cast<uint32_t*>(&v[3]);
  *reinterpret_cast<uint4*>(out + t * h + c) = o;
}

// Fast mode's last step: bf16 copy of the fp32 accumulation buffer [T, H].
__global__ void moe_finalize_convert_kernel(const float* __restrict__ acc32, int64_t n, __nv_bfloat16* __restrict__ out) {
  const int64_t i = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) * 8;
  if (i >= n) return;
  const float4 a = *reinterpret_cast<const float4*>(acc32 + i), b = *reinterpret_cast<const float4*>(acc32 + i + 4);
  __nv_bfloat162 v[4] = {__floats2bfloat162_rn(a.x, a.y), __floats2bfloat162_rn(a.z, a.w),
                         __floats2bfloat162_rn(b.x, b.y), __floats2bfloat162_rn(b.z, b.w)};
  *reinterpret_cast<uint4*>(out + i) = *reinterpret_cast<uint4*>(v);
}

}  // namespace fp4moe::kernels
