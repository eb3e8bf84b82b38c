// Routing tables of the MoE layer: their parameters, and the in-register routing of a few pairs by one warp
// that the GEMM kernels run when the routing kernel (moe_routing.cuh) is not launched.
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>

#include "kernels/ptx.cuh"

namespace fp4moe::kernels {

inline constexpr uint32_t kErrBadExpertId = 1u;    // a topk id outside [0, E_global): that pair is skipped
inline constexpr uint32_t kErrBadRouterWeight = 2u;  // a non-finite router weight of a local pair: that pair is skipped

struct RoutingParams {
  const int32_t* topk_ids;      // [T, k], global expert ids
  const float* topk_weights;    // [T, k]
  int32_t num_pairs;            // T * k
  int32_t num_experts;          // E <= 1024: the layer's (local) experts
  int32_t block_m;              // rows per work chunk of the GEMMs
  int32_t first_expert;         // global id of local expert 0 (expert parallelism; else 0)
  int32_t* expert_offsets;      // [E + 1] exclusive prefix sum of per-expert counts
  int32_t* perm_pair;           // [P] pair index (t * k + s) at each permuted row
  int32_t* inv_perm;            // [P] permuted row of each pair, -1 for skipped pairs
  int32_t* num_chunks;          // [1]
  int32_t* chunk_expert;        // [max_chunks]
  int32_t* chunk_start;         // [max_chunks] first permuted row
  int32_t* chunk_rows;          // [max_chunks] rows in the chunk (1..block_m)
  uint32_t* error_flags;        // [1], OR-ed
};

// Pair i's global id and (in *w) router weight, both loads in flight at once (ptx::ld_global_u32 says why: local_expert
// reads the weight only for a local id, and its load would otherwise wait for the id's).
__device__ __forceinline__ int32_t load_pair(const RoutingParams& p, int64_t i, float* w) {
  const uint32_t id = ptx::ld_global_u32(p.topk_ids + i);
  *w = __uint_as_float(ptx::ld_global_u32(p.topk_weights + i));
  return static_cast<int32_t>(id);
}

// The local expert of a pair with global id `id` and router weight `w`: id - first_expert where that is one of the
// layer's experts and w is finite; -1 for a pair of another rank's expert (skipped silently) and for bad input,
// which also sets its bit in *err (an id outside [0, num_global_experts), a non-finite weight of a local pair).
__device__ __forceinline__ int32_t local_expert(const RoutingParams& p, int32_t num_global_experts, int32_t id, float w,
                                                uint32_t* err) {
  if (id < 0 || id >= num_global_experts) {
    *err |= kErrBadExpertId;
    return -1;
  }
  const int32_t e = id - p.first_expert;  // (no overflow: both in [0, 2^31))
  if (e < 0 || e >= p.num_experts) return -1;
  if (!isfinite(w)) {
    *err |= kErrBadRouterWeight;
    return -1;
  }
  return e;
}

// Routing of at most 32 pairs (T * k <= 32: the decode steps of a few tokens) by one warp, in registers, for
// the GEMM kernels to run without the routing kernel before them (one launch and its drain fewer). Every warp
// of every block computes the same tables from the ids: lane r holds the pair at permuted row r and lane c
// chunk c, read back with shuffles (warp-uniform calls only). The tables equal moe_routing_kernel's: rows
// sorted by (expert, pair index), chunks of at most block_m rows per expert in ascending expert order.
inline constexpr int kWarpRoutingMaxPairs = 32;

struct WarpRouting {
  int32_t perm = 0;                              // lane r < valid: pair index at permuted row r
  float weight = 0.0f;                           // lane r < valid: that pair's router weight (the down epilogue's)
  int32_t c_expert = 0, c_start = 0, c_rows = 0;  // lane c < num_chunks: chunk c
  int32_t num_chunks = 0;

  __device__ __forceinline__ int32_t pair(int row) const { return __shfl_sync(0xFFFFFFFFu, perm, row); }
  __device__ __forceinline__ float router_weight(int row) const { return __shfl_sync(0xFFFFFFFFu, weight, row); }
  __device__ __forceinline__ int32_t expert(int c) const { return __shfl_sync(0xFFFFFFFFu, c_expert, c); }
  __device__ __forceinline__ int32_t start(int c) const { return __shfl_sync(0xFFFFFFFFu, c_start, c); }
  __device__ __forceinline__ int32_t rows(int c) const { return __shfl_sync(0xFFFFFFFFu, c_rows, c); }
};

// Called by whole warps. With `write_tables` (one block of the gate_up grid) the warp also writes the
// routing kernel's global outputs, for the finalize and testing::workspace_view: warp 0 the permutation,
// chunk table and error flags, every warp its share of expert_offsets.
__device__ __forceinline__ WarpRouting warp_routing(const RoutingParams& p, int32_t num_global_experts, bool write_tables) {
  const int lane = threadIdx.x & 31;
  const int E = p.num_experts;
  int32_t key = INT32_MAX;  // local expert id of a valid pair; pairs past num_pairs and skipped pairs sort last
  uint32_t err = 0;
  float lane_weight = 0.0f;  // pair `lane`'s router weight
  if (lane < p.num_pairs) {
    const int32_t id = load_pair(p, lane, &lane_weight);
    const int32_t e = local_expert(p, num_global_experts, id, lane_weight, &err);
    if (e >= 0) key = e;
  }
  const bool valid = key != INT32_MAX;
  const int32_t num_valid = __popc(__ballot_sync(0xFFFFFFFFu, valid));
  // The lanes past num_pairs hold no pair (key INT32_MAX), so the scans below stop there: a decode step of one
  // token scans 8 lanes, not 32, before its gate_up blocks can issue their first weight copies. (n is the same
  // for the whole warp, so the shuffles stay converged.)
  const int n = p.num_pairs < 32 ? p.num_pairs : 32;
  // Permuted row of this pair: valid pairs before it in (expert, index) order; and its rank in its expert.
  int32_t pos = 0, rank_in_expert = 0;
#pragma unroll 8
  for (int j = 0; j < n; ++j) {
    const int32_t kj = __shfl_sync(0xFFFFFFFFu, key, j);
    pos += (kj < key) || (kj == key && j < lane);
    rank_in_expert += (kj == key && j < lane);
  }
  // Inverse: lane r finds the pair whose row is r.
  WarpRouting w;
  int32_t my_key = INT32_MAX, my_rank = 0;
#pragma unroll 8
  for (int j = 0; j < n; ++j) {
    const int32_t pj = __shfl_sync(0xFFFFFFFFu, pos, j);
    const int32_t kj = __shfl_sync(0xFFFFFFFFu, key, j);
    const int32_t rj = __shfl_sync(0xFFFFFFFFu, rank_in_expert, j);
    if (kj != INT32_MAX && pj == lane) {
      w.perm = j;
      my_key = kj;
      my_rank = rj;
    }
  }
  // Kept in permuted order, so the down epilogue reads its rows' weights with a shuffle, not from memory at
  // the end of each work item, where the down kernel otherwise waits on that load.
  w.weight = __shfl_sync(0xFFFFFFFFu, lane_weight, w.perm);
  // A chunk starts at row r where its pair's rank in the expert is a multiple of block_m; __fns (the n-th
  // set bit) finds chunk c's first row.
  const uint32_t starts = __ballot_sync(0xFFFFFFFFu, lane < num_valid && my_rank % p.block_m == 0);
  w.num_chunks = __popc(starts);
  if (lane < w.num_chunks) {
    w.c_start = static_cast<int32_t>(__fns(starts, 0, lane + 1));
    const int32_t next = lane + 1 < w.num_chunks ? static_cast<int32_t>(__fns(starts, 0, lane + 2)) : num_valid;
    w.c_rows = next - w.c_start;
  }
  w.c_expert = __shfl_sync(0xFFFFFFFFu, my_key, w.c_start);
  if (write_tables) {
    const int warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    for (int e0 = warp * 32; e0 <= E; e0 += nwarps * 32) {  // warp-uniform bounds: the shuffles stay converged
      const int e = e0 + lane;
      int32_t below = 0;
#pragma unroll 8
      for (int j = 0; j < n; ++j) below += __shfl_sync(0xFFFFFFFFu, key, j) < e;
      if (e <= E) p.expert_offsets[e] = below;
    }
    if (warp == 0) {
      if (lane < p.num_pairs) p.inv_perm[lane] = valid ? pos : -1;
      if (lane < num_valid) p.perm_pair[lane] = w.perm;
      if (lane < w.num_chunks) {
        p.chunk_expert[lane] = w.c_expert;
        p.chunk_start[lane] = w.c_start;
        p.chunk_rows[lane] = w.c_rows;
      }
      const uint32_t all_err = __reduce_or_sync(0xFFFFFFFFu, err);
      if (lane == 0) {
        *p.num_chunks = w.num_chunks;
        *p.error_flags = all_err;  // the only writer in a run that routes this way
      }
    }
  }
  return w;
}

}  // namespace fp4moe::kernels
