// Routing preparation on the GPU: group the T*k (token, slot) pairs by expert, deterministically.
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>

#include "kernels/moe_routing_warp.cuh"
#include "kernels/ptx.cuh"

namespace fp4moe::kernels {

// Exclusive block-wide prefix sum over up to blockDim.x values (one per thread); returns the total.
__device__ __forceinline__ int32_t block_exclusive_scan(int32_t v, int32_t* out, int32_t* warp_sums) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = (blockDim.x + 31) >> 5;
  int32_t incl = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int32_t y = __shfl_up_sync(0xFFFFFFFFu, incl, o);
    if (lane >= o) incl += y;
  }
  if (lane == 31) warp_sums[warp] = incl;
  __syncthreads();
  if (warp == 0) {
    int32_t s = lane < nwarps ? warp_sums[lane] : 0;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int32_t y = __shfl_up_sync(0xFFFFFFFFu, s, o);
      if (lane >= o) s += y;
    }
    if (lane < nwarps) warp_sums[lane] = s;  // inclusive per warp
  }
  __syncthreads();
  const int32_t before = (warp > 0 ? warp_sums[warp - 1] : 0) + incl - v;
  *out = before;
  const int32_t total = warp_sums[nwarps - 1];
  __syncthreads();
  return total;
}

// One block of 1024 threads. Dynamic shared memory: (2E + 32E/2 + 64) int32 (see routing_smem_bytes()).
// Order inside an expert is by pair index (stable), so the permutation is a pure function of the ids.
// Ids are global (expert parallelism): a pair of another rank's expert is skipped without a flag (local_expert).
__global__ void __launch_bounds__(1024) moe_routing_kernel(RoutingParams p, int32_t num_global_experts) {
  extern __shared__ int32_t sm[];
  const int E = p.num_experts;
  int32_t* cnt = sm;                                            // [E]
  int32_t* base = sm + E;                                       // [E]
  int32_t* warp_sums = sm + 2 * E;                              // [32]
  uint16_t* wcnt = reinterpret_cast<uint16_t*>(sm + 2 * E + 32);  // [32][E]
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  // Lets the gate_up kernel (a programmatic dependent launch) take its SMs now; it waits for this grid's
  // completion before it reads the tables (ptx.cuh, griddepcontrol).
  ptx::griddep_launch_dependents();

  for (int e = tid; e < E; e += blockDim.x) cnt[e] = 0;
  if (tid == 0) *p.error_flags = 0;  // this kernel is the flags' only writer in a run
  __syncthreads();
  uint32_t err = 0;
  for (int i = tid; i < p.num_pairs; i += blockDim.x) {
    const int32_t e = local_expert(p, num_global_experts, p.topk_ids[i], p.topk_weights[i], &err);
    if (e >= 0) atomicAdd(&cnt[e], 1);
  }
  if (err) atomicOr(p.error_flags, err);
  __syncthreads();

  // Offsets and chunk table: thread e owns expert e (E <= blockDim.x).
  const int32_t my_cnt = tid < E ? cnt[tid] : 0;
  int32_t my_off = 0, my_chunk_off = 0;
  const int32_t total = block_exclusive_scan(my_cnt, &my_off, warp_sums);
  const int32_t my_chunks = (my_cnt + p.block_m - 1) / p.block_m;
  const int32_t total_chunks = block_exclusive_scan(my_chunks, &my_chunk_off, warp_sums);
  if (tid < E) {
    p.expert_offsets[tid] = my_off;
    base[tid] = my_off;
    for (int c = 0; c < my_chunks; ++c) {
      p.chunk_expert[my_chunk_off + c] = tid;
      p.chunk_start[my_chunk_off + c] = my_off + c * p.block_m;
      p.chunk_rows[my_chunk_off + c] = min(p.block_m, my_cnt - c * p.block_m);
    }
  }
  if (tid == 0) {
    p.expert_offsets[E] = total;
    *p.num_chunks = total_chunks;
  }
  __syncthreads();

  // Stable placement, 1024 pairs per round: rank among equal ids inside the warp (match + popc), plus
  // the counts of the same id in lower warps of this round, plus what earlier rounds placed.
  for (int round = 0; round < p.num_pairs; round += blockDim.x) {
    for (int j = tid; j < 32 * E; j += blockDim.x) wcnt[j] = 0;
    __syncthreads();
    const int i = round + tid;
    int32_t e = -1;
    if (i < p.num_pairs) {
      uint32_t ignored = 0;  // (flags were raised in the counting pass)
      e = local_expert(p, num_global_experts, p.topk_ids[i], p.topk_weights[i], &ignored);
    }
    const int key = e >= 0 ? e : E + lane;  // skipped pairs get a key of their own
    const uint32_t peers = __match_any_sync(0xFFFFFFFFu, key);
    const int rank = __popc(peers & ((1u << lane) - 1u));
    if (e >= 0 && rank == 0) wcnt[warp * E + e] = static_cast<uint16_t>(__popc(peers));
    __syncthreads();
    if (e >= 0) {
      int32_t pos = base[e] + rank;
      for (int w = 0; w < warp; ++w) pos += wcnt[w * E + e];
      p.perm_pair[pos] = i;
      p.inv_perm[i] = pos;
    } else if (i < p.num_pairs) {
      p.inv_perm[i] = -1;
    }
    __syncthreads();
    for (int x = tid; x < E; x += blockDim.x) {
      int32_t s = 0;
      for (int w = 0; w < 32; ++w) s += wcnt[w * E + x];
      base[x] += s;
    }
    __syncthreads();
  }
}

constexpr int64_t routing_smem_bytes(int64_t num_experts) { return (2 * num_experts + 32) * 4 + 32 * num_experts * 2; }

}  // namespace fp4moe::kernels
