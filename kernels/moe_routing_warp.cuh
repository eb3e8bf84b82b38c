// Routing tables of the MoE layer: their parameters, and the routing of a few pairs inside the kernels that run
// when the routing kernel (moe_routing.cuh) is not launched: in registers by every warp (the direct decode kernels)
// or by one warp into shared memory (the GEMM kernels).
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>

#include "kernels/moe_routing_layout.h"
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

// Pair i's local expert (local_expert), its router weight loaded into *w first (load_pair): what every routing path
// reads of a pair.
__device__ __forceinline__ int32_t pair_local_expert(const RoutingParams& p, int32_t num_global_experts, int64_t i,
                                                     float* w, uint32_t* err) {
  const int32_t id = load_pair(p, i, w);
  return local_expert(p, num_global_experts, id, *w, err);
}

// Routing of at most 32 pairs (T * k <= 32: the decode steps of a few tokens) by one warp, in registers, for
// the direct decode kernels to run without the routing kernel before them (one launch and its drain fewer). Every warp
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

// What warp_routing reads of pair `lane`: its local expert (INT32_MAX for a skipped pair or none: they sort last),
// router weight and error bits. Apart from the routing itself so that a kernel can act on one pair's expert (a
// shuffle of `key`) before the routing's shuffles run.
struct WarpPairs {
  int32_t key = INT32_MAX;
  float weight = 0.0f;
  uint32_t err = 0;
};
__device__ __forceinline__ WarpPairs warp_routing_load(const RoutingParams& p, int32_t num_global_experts) {
  WarpPairs in;
  const int lane = threadIdx.x & 31;
  if (lane < p.num_pairs) {
    const int32_t e = pair_local_expert(p, num_global_experts, lane, &in.weight, &in.err);
    if (e >= 0) in.key = e;
  }
  return in;
}

// Called by whole warps, on warp_routing_load's pairs. With `write_tables` (one block of the gate_up grid) the warp
// also writes the routing kernel's global outputs, for the finalize and testing::workspace_view: warp 0 the
// permutation, chunk table and error flags, every warp its share of expert_offsets.
__device__ __forceinline__ WarpRouting warp_routing(const RoutingParams& p, const WarpPairs& in, bool write_tables) {
  const int lane = threadIdx.x & 31;
  const int E = p.num_experts;
  const int32_t key = in.key;
  const uint32_t err = in.err;
  const float lane_weight = in.weight;  // pair `lane`'s router weight
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
__device__ __forceinline__ WarpRouting warp_routing(const RoutingParams& p, int32_t num_global_experts, bool write_tables) {
  return warp_routing(p, warp_routing_load(p, num_global_experts), write_tables);
}

// Routing of at most kBlockRoutingMaxPairs pairs (T * k <= 64) for the GEMM kernels of the decode tiles, so that
// they run without the routing kernel before them: warp 0 of the block computes the tables into shared memory
// (BlockRoutingTables, at MoeGemmSmemLayout::routing_offset) while the other warps wait at the block barrier, and
// every thread then reads any row or chunk there. The tables equal moe_routing_kernel's: rows sorted by (expert,
// pair index), chunks of at most block_m rows per expert in ascending expert order.
struct BlockRouting {
  const BlockRoutingTables* t = nullptr;
  int32_t num_chunks = 0;

  __device__ __forceinline__ int32_t pair(int row) const { return t->perm[row]; }
  __device__ __forceinline__ float router_weight(int row) const { return t->weight[row]; }
  __device__ __forceinline__ int32_t expert(int c) const { return t->chunk_expert[c]; }
  __device__ __forceinline__ int32_t start(int c) const { return t->chunk_start[c]; }
  __device__ __forceinline__ int32_t rows(int c) const { return t->chunk_rows[c]; }
};

// Sorts the warp's 32 x kH values ascending, value i = lane + 32 h in v[h]: a bitonic network (compare-exchange of
// i and i ^ j, in the direction of bit k of i), across lanes by shuffles and inside a lane for j = 32. `kH` 1 or 2.
template <int kH>
__device__ __forceinline__ void warp_bitonic_sort(uint32_t (&v)[kH]) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int k = 2; k <= 32 * kH; k <<= 1) {
#pragma unroll
    for (int j = k >> 1; j > 0; j >>= 1) {
      if (j == 32) {  // (kH = 2, k = 64: the two halves, ascending)
        const uint32_t lo = min(v[0], v[kH - 1]), hi = max(v[0], v[kH - 1]);
        v[0] = lo;
        v[kH - 1] = hi;
        continue;
      }
#pragma unroll
      for (int h = 0; h < kH; ++h) {
        const int i = lane + 32 * h;
        const uint32_t other = __shfl_xor_sync(0xFFFFFFFFu, v[h], j);
        const bool keep_min = ((i & k) == 0) == ((i & j) == 0);  // ascending run and lower index, or neither
        v[h] = keep_min ? min(v[h], other) : max(v[h], other);
      }
    }
  }
}

// Warp 0's part of block_routing for kH x 32 pairs.
template <int kH>
__device__ __forceinline__ void block_routing_warp(const RoutingParams& p, int32_t num_global_experts, bool write_tables,
                                                   BlockRoutingTables* t) {
  const int lane = threadIdx.x & 31;
  // Sort keys: local expert << 6 | pair index (E <= 1024, pairs < 64: below 2^16); a skipped pair (another rank's
  // expert, bad input) kSkipped << 6 | index, after every row; no pair (past num_pairs) all ones, last.
  constexpr uint32_t kSkipped = 1024, kNone = 0xFFFFFFFFu;
  static_assert(kBlockRoutingMaxPairs <= 64, "6 bits of pair index in the sort key");
  uint32_t v[kH];
  float wt[kH];  // router weight of pair lane + 32 h
  uint32_t err = 0;
#pragma unroll
  for (int h = 0; h < kH; ++h) {
    const int i = lane + 32 * h;
    v[h] = kNone;
    wt[h] = 0.0f;
    if (i < p.num_pairs) {
      const int32_t e = pair_local_expert(p, num_global_experts, i, &wt[h], &err);
      v[h] = (e >= 0 ? static_cast<uint32_t>(e) : kSkipped) << 6 | static_cast<uint32_t>(i);
    }
  }
  warp_bitonic_sort<kH>(v);
  // Row r = lane + 32 h holds v[h]: its expert, pair, whether it is a row (a pair on this layer's experts).
  int32_t key[kH], pair[kH];
  bool valid[kH];
  float row_w[kH];  // the row's router weight
#pragma unroll
  for (int h = 0; h < kH; ++h) {
    key[h] = static_cast<int32_t>(v[h] >> 6);
    pair[h] = static_cast<int32_t>(v[h] & 63u);
    valid[h] = v[h] >> 6 < kSkipped;
    // pair's weight: lane pair % 32 holds it, in register pair / 32 (every lane shuffles each register)
    float w = __shfl_sync(0xFFFFFFFFu, wt[0], pair[h] & 31);
    if constexpr (kH == 2) {
      const float w1 = __shfl_sync(0xFFFFFFFFu, wt[1], pair[h] & 31);
      if (pair[h] >= 32) w = w1;
    }
    row_w[h] = w;
  }
  // Rows that start an expert (its key differs from the row before), then each row's rank in its expert, then the
  // chunk starts (rank a multiple of block_m): 64-bit masks over the rows, bit r for row r.
  uint64_t expert_starts = 0;
  const int32_t last_of_first = __shfl_sync(0xFFFFFFFFu, key[0], 31);  // row 31, before row 32
#pragma unroll
  for (int h = 0; h < kH; ++h) {
    int32_t prev = __shfl_up_sync(0xFFFFFFFFu, key[h], 1);
    if (lane == 0) prev = h == 0 ? -1 : last_of_first;
    expert_starts |= static_cast<uint64_t>(__ballot_sync(0xFFFFFFFFu, valid[h] && key[h] != prev)) << (32 * h);
  }
  uint64_t chunk_starts = 0;
#pragma unroll
  for (int h = 0; h < kH; ++h) {
    const int r = lane + 32 * h;
    const uint64_t upto = (2ull << r) - 1;  // rows 0..r (r = 63: all; unsigned arithmetic wraps)
    const int rank = r - (63 - __clzll(static_cast<long long>(expert_starts & upto)));
    chunk_starts |= static_cast<uint64_t>(__ballot_sync(0xFFFFFFFFu, valid[h] && rank % p.block_m == 0)) << (32 * h);
  }
  int num_valid = 0;
#pragma unroll
  for (int h = 0; h < kH; ++h) num_valid += __popc(__ballot_sync(0xFFFFFFFFu, valid[h]));
  const int num_chunks = __popcll(static_cast<long long>(chunk_starts));
#pragma unroll
  for (int h = 0; h < kH; ++h) {
    const int r = lane + 32 * h;
    if (valid[h]) {
      t->perm[r] = pair[h];
      t->weight[r] = row_w[h];
      t->row_expert[r] = key[h];
      if (write_tables) p.perm_pair[r] = pair[h];
    }
    if (write_tables && v[h] != kNone) p.inv_perm[pair[h]] = valid[h] ? r : -1;
    if ((chunk_starts >> r) & 1u) {  // chunk c starts here: c = the chunk starts below r; it ends at the next one
      const int c = __popcll(static_cast<long long>(chunk_starts & ((1ull << r) - 1)));
      const uint64_t above = chunk_starts & ~((2ull << r) - 1);
      const int next = above != 0 ? __ffsll(static_cast<long long>(above)) - 1 : num_valid;
      t->chunk_expert[c] = key[h];
      t->chunk_start[c] = r;
      t->chunk_rows[c] = next - r;
      if (write_tables) {
        p.chunk_expert[c] = key[h];
        p.chunk_start[c] = r;
        p.chunk_rows[c] = next - r;
      }
    }
  }
  if (lane == 0) {
    t->num_chunks = num_chunks;
    t->num_valid = num_valid;
  }
  if (write_tables) {
    const uint32_t all_err = __reduce_or_sync(0xFFFFFFFFu, err);
    if (lane == 0) {
      *p.num_chunks = num_chunks;
      *p.error_flags = all_err;  // the only writer in a run that routes this way
    }
  }
}

// Called by every thread of the block (it has a __syncthreads). With `write_tables` (one block of the gate_up grid)
// the block also writes the routing kernel's global outputs, for the finalize and testing::workspace_view. Warp 0
// sorts (expert, pair) keys with a bitonic network (15 shuffle steps for 32 pairs, 20 of two for 64) and finds the
// experts' and chunks' first rows with ballots; no step scans the pairs one by one.
__device__ __forceinline__ BlockRouting block_routing(const RoutingParams& p, int32_t num_global_experts,
                                                      bool write_tables, BlockRoutingTables* t) {
  if (threadIdx.x < 32) {  // (warp-uniform: the pair count)
    if (p.num_pairs <= 32) block_routing_warp<1>(p, num_global_experts, write_tables, t);
    else block_routing_warp<2>(p, num_global_experts, write_tables, t);
  }
  __syncthreads();
  const BlockRouting r{t, t->num_chunks};
  if (write_tables) {
    // expert_offsets[e]: the rows of experts below e, a binary search of the rows' experts (sorted).
    const int num_valid = t->num_valid;
    for (int e = threadIdx.x; e <= p.num_experts; e += blockDim.x) {
      int lo = 0, hi = num_valid;
      while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if (t->row_expert[mid] < e) lo = mid + 1;
        else hi = mid;
      }
      p.expert_offsets[e] = lo;
    }
  }
  return r;
}

}  // namespace fp4moe::kernels
