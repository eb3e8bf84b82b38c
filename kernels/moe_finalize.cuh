// Finalize kernels of the down projection: the fixed-order sum over a token's k slots, or the fp32->bf16 copy.
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/ptx.cuh"

namespace fp4moe::kernels {

// Deterministic finalize: out[t, h] = bf16(sum over slots s = 0..k-1, in order, and within a slot over the
// down GEMM's K splits q = 0..splits-1, in order, of partial[q][inv[t*k+s], h]), summed in fp32 whether the
// partials are fp32 (FinalizeMode::kDeterministic) or bf16 (kDeterministicBf16). Skipped pairs (inv = -1) add
// nothing. It streams the partial sums the down GEMM just wrote (T k H of them: 100 MB of fp32 at T=512 on the
// TP8 shard), so what it needs is bytes in flight: a thread takes 16 bytes of each term (4 fp32 or 8 bf16
// columns) and loads kBatch terms before it adds them in the fixed order; kBatch = 8 (the usual k = 8, one
// split) keeps it at about 56 registers, so 4 blocks of 256 threads fit an SM (16 terms of 4 columns took 90
// registers, 2 blocks per SM, and ran at 2.6 TB/s; 8 bf16 bytes per term ran at half the fp32 rate:
// docs/perf/history.md). H is a multiple of 256 (check_shape), so of every column count here.
// Launched as a programmatic dependent of the down GEMM (ptx.cuh, griddep_wait): it waits for its sums first.
inline constexpr int kFinalizeThreads = 256;
template <class Partial>
inline constexpr int kFinalizeCols = 16 / static_cast<int>(sizeof(Partial));  // columns per thread

// Adds the kFinalizeCols partial sums in `raw` (16 bytes) to s: fp32 as they are, bf16 widened exactly (its bits
// are the high half of the fp32 word).
__device__ __forceinline__ void add_partials(float (&s)[4], const uint4& raw) {
  s[0] += __uint_as_float(raw.x); s[1] += __uint_as_float(raw.y); s[2] += __uint_as_float(raw.z); s[3] += __uint_as_float(raw.w);
}
__device__ __forceinline__ void add_partials(float (&s)[8], const uint4& raw) {
  const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    s[2 * i] += __uint_as_float(w[i] << 16);
    s[2 * i + 1] += __uint_as_float(w[i] & 0xFFFF0000u);
  }
}

template <class Partial>
__global__ void __launch_bounds__(kFinalizeThreads)
    moe_finalize_gather_kernel(const Partial* __restrict__ partial, int32_t splits, int64_t split_stride,
                               const int32_t* __restrict__ inv_perm, int32_t num_tokens, int32_t top_k, int32_t h,
                               __nv_bfloat16* __restrict__ out) {
  constexpr int kBatch = 8, kCols = kFinalizeCols<Partial>;
  ptx::griddep_wait();
  ptx::griddep_launch_dependents();  // (the pass's last kernel: the next pass's first may start as blocks leave)
  const int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t groups = h / kCols;
  if (idx >= num_tokens * groups) return;
  const int64_t t = idx / groups, c = (idx % groups) * kCols;
  const int32_t terms = top_k * splits;  // term i = (slot i / splits, split i % splits): the summation order
  const int32_t* inv = inv_perm + t * top_k;
  float s[kCols];
#pragma unroll
  for (int j = 0; j < kCols; ++j) s[j] = 0.0f;
  for (int32_t i0 = 0; i0 < terms; i0 += kBatch) {
    uint4 v[kBatch];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      v[u] = make_uint4(0u, 0u, 0u, 0u);
      const int32_t i = i0 + u;
      if (i >= terms) continue;
      const int32_t r = inv[i / splits];
      if (r >= 0)
        v[u] = __ldcs(reinterpret_cast<const uint4*>(partial + (i % splits) * split_stride + static_cast<int64_t>(r) * h + c));
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {  // a skipped pair's term is +0, which changes no sum that starts at +0
      if (i0 + u >= terms) break;
      add_partials(s, v[u]);
    }
  }
  uint32_t o[kCols / 2];
#pragma unroll
  for (int j = 0; j < kCols / 2; ++j) {
    const __nv_bfloat162 b = __floats2bfloat162_rn(s[2 * j], s[2 * j + 1]);
    o[j] = *reinterpret_cast<const uint32_t*>(&b);
  }
  if constexpr (kCols == 4) *reinterpret_cast<uint2*>(out + t * h + c) = make_uint2(o[0], o[1]);
  else *reinterpret_cast<uint4*>(out + t * h + c) = make_uint4(o[0], o[1], o[2], o[3]);
}

// Fast mode's last step: bf16 copy of the fp32 accumulation buffer [T, H].
__global__ void moe_finalize_convert_kernel(const float* __restrict__ acc32, int64_t n, __nv_bfloat16* __restrict__ out) {
  ptx::griddep_wait();
  ptx::griddep_launch_dependents();  // (as in the gather kernel)
  const int64_t i = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) * 8;
  if (i >= n) return;
  const float4 a = *reinterpret_cast<const float4*>(acc32 + i), b = *reinterpret_cast<const float4*>(acc32 + i + 4);
  __nv_bfloat162 v[4] = {__floats2bfloat162_rn(a.x, a.y), __floats2bfloat162_rn(a.z, a.w),
                         __floats2bfloat162_rn(b.x, b.y), __floats2bfloat162_rn(b.z, b.w)};
  *reinterpret_cast<uint4*>(out + i) = *reinterpret_cast<uint4*>(v);
}

}  // namespace fp4moe::kernels
