// Routing preparation on the GPU: group the T*k (token, slot) pairs by expert, deterministically.
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>

#include "kernels/moe_routing_layout.h"
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

// Stable placement of pairs [begin, end) at base[e] onwards (base: this block's first row of each expert, advanced
// as it places), 1024 pairs per round: rank among equal ids inside the warp (match + popc), plus the counts of the
// same id in lower warps of this round, plus what earlier rounds placed. Every thread of the block calls it.
__device__ __forceinline__ void routing_place(const RoutingParams& p, int32_t num_global_experts, int begin, int end,
                                              int32_t* base, uint16_t* wcnt) {
  const int E = p.num_experts;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  for (int round = begin; round < end; round += blockDim.x) {
    for (int j = tid; j < 32 * E; j += blockDim.x) wcnt[j] = 0;
    __syncthreads();
    const int i = round + tid;
    int32_t e = -1;
    if (i < end) {
      uint32_t ignored = 0;  // (flags were raised in the counting pass)
      float w;
      e = pair_local_expert(p, num_global_experts, i, &w, &ignored);
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
    } else if (i < end) {
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

// The chunk table (chunks of at most block_m rows per expert, in expert order) and the expert offsets, from each
// expert's count: thread e owns expert e (E <= blockDim.x). Returns thread e's first row (its expert's offset).
__device__ __forceinline__ int32_t routing_tables(const RoutingParams& p, int32_t my_cnt, int32_t* warp_sums, bool write) {
  const int E = p.num_experts, tid = threadIdx.x;
  int32_t my_off = 0, my_chunk_off = 0;
  const int32_t total = block_exclusive_scan(my_cnt, &my_off, warp_sums);
  const int32_t my_chunks = (my_cnt + p.block_m - 1) / p.block_m;
  const int32_t total_chunks = block_exclusive_scan(my_chunks, &my_chunk_off, warp_sums);
  if (write && tid < E) {
    p.expert_offsets[tid] = my_off;
    for (int c = 0; c < my_chunks; ++c) {
      p.chunk_expert[my_chunk_off + c] = tid;
      p.chunk_start[my_chunk_off + c] = my_off + c * p.block_m;
      p.chunk_rows[my_chunk_off + c] = min(p.block_m, my_cnt - c * p.block_m);
    }
  }
  if (write && tid == 0) {
    p.expert_offsets[E] = total;
    *p.num_chunks = total_chunks;
  }
  return my_off;
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
  const int tid = threadIdx.x;
  // The forward pass's first kernel, launched as a programmatic dependent of whatever kernel the stream ran before
  // (the router that wrote the ids, the previous layer that still reads the workspace): it waits for that one
  // before it reads or writes anything (a no-op after a plain launch).
  ptx::griddep_wait();
  // Lets the gate_up kernel (a programmatic dependent launch) take its SMs now; it waits for this grid's
  // completion before it reads the tables (ptx.cuh, griddepcontrol).
  ptx::griddep_launch_dependents();

  for (int e = tid; e < E; e += blockDim.x) cnt[e] = 0;
  if (tid == 0) *p.error_flags = 0;  // this kernel is the flags' only writer in a run
  __syncthreads();
  uint32_t err = 0;
  for (int i = tid; i < p.num_pairs; i += blockDim.x) {
    float w;
    const int32_t e = pair_local_expert(p, num_global_experts, i, &w, &err);
    if (e >= 0) atomicAdd(&cnt[e], 1);
  }
  if (err) atomicOr(p.error_flags, err);
  __syncthreads();

  // Offsets and chunk table: thread e owns expert e (E <= blockDim.x).
  const int32_t my_off = routing_tables(p, tid < E ? cnt[tid] : 0, warp_sums, true);
  if (tid < E) base[tid] = my_off;
  __syncthreads();

  routing_place(p, num_global_experts, 0, p.num_pairs, base, wcnt);
}

// ---- Many pairs (prefill): the same tables from many blocks ------------------------------------------------------
// One block walks all pairs in rounds of 1024, about 4 us each (T=16384, k=8: 128 rounds, 520 us on the H200). Above
// kRoutingOneBlockMaxPairs the pairs are cut into ranges of kRoutingRange, one per block, in two kernels:
// moe_routing_count_kernel counts each range's pairs per expert into counts[block][E]; moe_routing_place_kernel
// (a programmatic dependent of it) gives each block its experts' first rows -- the expert's offset plus the counts
// of the ranges before its own -- and places its range as the one-block kernel places a round. Ranges are in pair
// order, so the permutation is the one-block kernel's (stable by pair index), bit for bit.
// (kRoutingOneBlockMaxPairs, kRoutingRange and the grid: kernels/moe_routing_layout.h, which host code reads too.)

// Grid: routing_blocks(num_pairs) blocks of 1024 threads; dynamic shared memory routing_count_smem_bytes(E).
__global__ void __launch_bounds__(1024) moe_routing_count_kernel(RoutingParams p, int32_t num_global_experts,
                                                                 int32_t* counts, uint32_t* block_flags) {
  extern __shared__ int32_t sm[];
  const int E = p.num_experts, tid = threadIdx.x;
  int32_t* cnt = sm;  // [E], then the block's error flags
  ptx::griddep_wait();  // (the forward pass's first kernel: as in moe_routing_kernel)
  ptx::griddep_launch_dependents();  // the place kernel may start; it waits for this grid before reading counts
  for (int e = tid; e < E; e += blockDim.x) cnt[e] = 0;
  if (tid == 0) cnt[E] = 0;
  __syncthreads();
  const int begin = static_cast<int>(blockIdx.x * kRoutingRange);
  const int end = min(p.num_pairs, begin + static_cast<int>(kRoutingRange));
  uint32_t err = 0;
  for (int i = begin + tid; i < end; i += blockDim.x) {
    float w;
    const int32_t e = pair_local_expert(p, num_global_experts, i, &w, &err);
    if (e >= 0) atomicAdd(&cnt[e], 1);
  }
  if (err) atomicOr(reinterpret_cast<uint32_t*>(&cnt[E]), err);
  __syncthreads();
  for (int e = tid; e < E; e += blockDim.x) counts[static_cast<int64_t>(blockIdx.x) * E + e] = cnt[e];
  if (tid == 0) block_flags[blockIdx.x] = static_cast<uint32_t>(cnt[E]);
}

// Grid: as the count kernel's; dynamic shared memory routing_smem_bytes(E). Block 0 writes the expert offsets,
// the chunk table and the error flags.
__global__ void __launch_bounds__(1024) moe_routing_place_kernel(RoutingParams p, int32_t num_global_experts,
                                                                 const int32_t* counts, const uint32_t* block_flags) {
  extern __shared__ int32_t sm[];
  const int E = p.num_experts, tid = threadIdx.x;
  int32_t* base = sm + E;                                         // [E]
  int32_t* warp_sums = sm + 2 * E;                                // [32]
  uint16_t* wcnt = reinterpret_cast<uint16_t*>(sm + 2 * E + 32);  // [32][E]
  ptx::griddep_wait();  // the count kernel's counts (PTX ISA "griddepcontrol")
  ptx::griddep_launch_dependents();
  int32_t total = 0, before = 0;
  if (tid < E)
    for (int b = 0; b < static_cast<int>(gridDim.x); ++b) {
      const int32_t c = counts[static_cast<int64_t>(b) * E + tid];
      total += c;
      before += b < static_cast<int>(blockIdx.x) ? c : 0;
    }
  const int32_t my_off = routing_tables(p, total, warp_sums, blockIdx.x == 0);
  if (tid < E) base[tid] = my_off + before;
  if (blockIdx.x == 0 && tid == 0) {
    uint32_t f = 0;
    for (int b = 0; b < static_cast<int>(gridDim.x); ++b) f |= block_flags[b];
    *p.error_flags = f;
  }
  __syncthreads();
  const int begin = static_cast<int>(blockIdx.x * kRoutingRange);
  routing_place(p, num_global_experts, begin, min(p.num_pairs, begin + static_cast<int>(kRoutingRange)), base, wcnt);
}

}  // namespace fp4moe::kernels
