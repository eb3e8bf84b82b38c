// The grouped-GEMM epilogues: SwiGLU into the activations, or the router-weighted finalize store / atomics.
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/moe_gemm_params.cuh"
#include "kernels/moe_routing_warp.cuh"
#include "kernels/ptx.cuh"

namespace fp4moe::kernels {

// silu(gate) * up. silu(g) = g / (1 + e^-g); where e^-g overflows (g < -88, or an fp32 accumulator that
// overflowed to -inf) the limit is -0, not inf/inf = NaN; and a zero factor gives a (signed) zero even when the
// other one overflowed, as the exact product would.
__device__ __forceinline__ float swiglu(float gate, float up) {
  const float ex = expf(-gate);
  const float silu = isinf(ex) ? copysignf(0.0f, gate) : gate / (1.0f + ex);
  return (silu == 0.0f || up == 0.0f) ? copysignf(0.0f, silu) * copysignf(1.0f, up) : silu * up;
}

// What store_item needs of an item besides its accumulators with kLaneRows (the warp-specialized kernels read
// it from the item record in shared memory): alpha of the item's expert, and the pair index and router weight
// of rows lane, lane + 32, lane + 64 and lane + 96 (as many as the tile has; the others stay unused and cost
// no registers).
inline constexpr int kMaxLaneRows = 4;
struct EpilogueRows {
  float alpha;
  int32_t lane_pair[kMaxLaneRows];
  float lane_weight[kMaxLaneRows];
};
// kFinalizeStoreBf16, one 8-token n-tile j of this warp's accumulators (c = acc[j]: rows g8 and g8 + 8 of the
// warp's 16, tokens 2 t4 and 2 t4 + 1): each value times its row's alpha * router weight, rounded once to bf16, and
// stored as bf16 pairs of adjacent columns. Lanes g8 and g8 ^ 1 (lane ^ 4) hold adjacent columns of the same two
// tokens, so one shuffle each way gives the even lane both columns of its first token and the odd lane both of
// its second: two 4-byte stores per lane instead of four 2-byte ones (those, with the same count of store
// instructions as the fp32 epilogue for half the bytes, made the down GEMM slower: docs/perf/history.md).
// Every lane runs the shuffles; rows past the item's tokens store nothing.
template <class Cfg, bool kFusedRouting, bool kLaneRows>
__device__ __forceinline__ void store_bf16_pairs(const MoeGemmParams& p, const BlockRouting& wr, const float (&c)[4],
                                                 float* partial, int64_t split_base, int j, int row0, int rows,
                                                 float alpha, int warp, int lane, int nt, const EpilogueRows& pre) {
  const int g8 = lane >> 2, t4 = lane & 3;
  const int m0 = j * 8 + t4 * 2;  // tokens m0 and m0 + 1 of the chunk
  float w[2];
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    const int m = m0 + k;
    if constexpr (kFusedRouting) {
      w[k] = wr.router_weight(row0 + min(m, rows - 1));
    } else if constexpr (kLaneRows) {
      w[k] = __shfl_sync(0xFFFFFFFFu, pre.lane_weight[j * 8 / 32], m & 31);
    } else {
      w[k] = m < rows ? p.topk_weights[p.perm_pair[row0 + m]] : 0.0f;
    }
  }
  const float a0 = alpha * w[0] * c[0], a1 = alpha * w[1] * c[1];  // column h0, tokens m0 and m0 + 1
  const float b0 = alpha * w[0] * c[2], b1 = alpha * w[1] * c[3];  // column h0 + 8
  const bool even = (g8 & 1) == 0;
  const float ra = __shfl_xor_sync(0xFFFFFFFFu, even ? a1 : a0, 4);
  const float rb = __shfl_xor_sync(0xFFFFFFFFu, even ? b1 : b0, 4);
  const int m = even ? m0 : m0 + 1;
  if (m >= rows) return;
  const int64_t h0 = static_cast<int64_t>(nt) * Cfg::kBlockN + warp * 16 + g8;
  const int64_t col = even ? h0 : h0 - 1;  // the pair's first column (even)
  __nv_bfloat16* d = reinterpret_cast<__nv_bfloat16*>(partial) + split_base + static_cast<int64_t>(row0 + m) * p.n + col;
  const __nv_bfloat162 lo = even ? __floats2bfloat162_rn(a0, ra) : __floats2bfloat162_rn(ra, a1);
  const __nv_bfloat162 hi = even ? __floats2bfloat162_rn(b0, rb) : __floats2bfloat162_rn(rb, b1);
  *reinterpret_cast<__nv_bfloat162*>(d) = lo;
  *reinterpret_cast<__nv_bfloat162*>(d + 8) = hi;
}

// kFinalizeStore: every row of the item times alpha * its router weight, as fp32 partial rows. The addresses are two
// row pointers (token rows 2 t4 and 2 t4 + 1 of the warp's first n-tile) advanced by 8 rows per n-tile, and the row
// check guards only the two stores (predicated, no branch), so each token costs a weight, two multiplies and two
// stores. That matters where items are short: in the 128-token tile's down at K = 256 the epilogue is as long as the
// K loop (docs/perf/prefill.md has the counts). kLaneRows: alpha * weight is formed once per lane row and shuffled
// out (the same product, so the same bits).
template <class Cfg, bool kFusedRouting, bool kLaneRows>
__device__ __forceinline__ void store_partials_fp32(const MoeGemmParams& p, const BlockRouting& wr,
                                                    const float (&acc)[Cfg::kNTiles8][4], float* partial, int nt,
                                                    int e, int row0, int rows, int warp, int lane,
                                                    const EpilogueRows& pre) {
  const int g8 = lane >> 2, t4 = lane & 3;
  const int64_t n = p.n;
  const float alpha = kLaneRows ? pre.alpha : p.alpha[e];
  float* d0 = partial + static_cast<int64_t>(row0 + t4 * 2) * n + static_cast<int64_t>(nt) * Cfg::kBlockN + warp * 16 + g8;
  float* d1 = d0 + n;
  const int64_t step = 8 * n;
  [[maybe_unused]] float lane_scale[kMaxLaneRows];
  if constexpr (kLaneRows) {
#pragma unroll
    for (int h = 0; h < kMaxLaneRows; ++h) lane_scale[h] = alpha * pre.lane_weight[h];
  }
#pragma unroll
  for (int j = 0; j < Cfg::kNTiles8; ++j, d0 += step, d1 += step) {
    if constexpr (kLaneRows)
      if (j * 8 >= rows) break;  // warp-uniform
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const int m = j * 8 + t4 * 2 + c;  // token row inside the chunk
      float scale;
      if constexpr (kLaneRows) {
        scale = __shfl_sync(0xFFFFFFFFu, lane_scale[j * 8 / 32], m & 31);  // (every lane, before the check)
      } else if constexpr (kFusedRouting) {
        scale = alpha * wr.router_weight(row0 + min(m, rows - 1));
      } else {
        scale = m < rows ? alpha * p.topk_weights[p.perm_pair[row0 + m]] : 0.0f;
      }
      float* d = c == 0 ? d0 : d1;
      if (m < rows) {
        d[0] = scale * acc[j][c];
        d[8] = scale * acc[j][2 + c];
      }
    }
  }
}

// The epilogue of one work item (N tile nt, K range q of expert e's chunk: rows row0 .. row0 + rows - 1),
// straight from this warp's accumulators (mma.sync C fragments; on the wgmma path the same registers).
// kLaneRows (the warp-specialized kernels): alpha and the down epilogue's per-row data come in `pre`, lane l
// holding rows l and l + 32, handed out with shuffles, and no 8-token tile past the item's rows is visited.
// (With their 96 registers, per-thread loads of all 16 rows spill, and loading them tile by tile costs two
// dependent global round trips per tile.)
template <class Cfg, MoeEpilogue kEpi, bool kFusedRouting, bool kLaneRows = false>
__device__ __forceinline__ void store_item(const MoeGemmParams& p, const BlockRouting& wr,
                                           const float (&acc)[Cfg::kNTiles8][4],
                                           int nt, int q, int e, int row0, int rows, int warp, int lane,
                                           const EpilogueRows& pre = EpilogueRows{}) {
  constexpr int kBN = Cfg::kBlockN;
  constexpr bool kStore = kEpi == MoeEpilogue::kFinalizeStore || kEpi == MoeEpilogue::kFinalizeStoreBf16;
  float* partial = p.partial_out;
  // The deterministic epilogues' buffer of this K range (elements of the partial type).
  [[maybe_unused]] const int64_t split_base = kStore ? q * p.split_stride : 0;
  static_assert(!(kLaneRows && kFusedRouting), "kLaneRows: the routing kernel's tables");
  static_assert(!kLaneRows || Cfg::kBlockM <= 32 * kMaxLaneRows, "kLaneRows: at most kMaxLaneRows rows per lane");
  if constexpr (kEpi == MoeEpilogue::kFinalizeStore) {
    store_partials_fp32<Cfg, kFusedRouting, kLaneRows>(p, wr, acc, partial + split_base, nt, e, row0, rows, warp, lane,
                                                       pre);
    return;
  }
  const float alpha = kLaneRows ? pre.alpha : p.alpha[e];
  const int g8 = lane >> 2, t4 = lane & 3;
  // kSwiGLU: the output of token row 2 t4 of the warp's first n-tile; each n-tile is 8 rows on, each row p.n / 2
  // elements (one pointer advanced by n-tile, as in store_partials_fp32).
  [[maybe_unused]] const int64_t act_row = p.n / 2;
  [[maybe_unused]] __nv_bfloat16* act = nullptr;
  if constexpr (kEpi == MoeEpilogue::kSwiGLU)
    act = p.act_out + static_cast<int64_t>(row0 + t4 * 2) * act_row + static_cast<int64_t>(nt) * (kBN / 2) + warp * 8 + g8;
#pragma unroll
  for (int j = 0; j < Cfg::kNTiles8; ++j) {
    if constexpr (kLaneRows)
      if (j * 8 >= rows) break;  // warp-uniform
    if constexpr (kEpi == MoeEpilogue::kFinalizeStoreBf16)
      store_bf16_pairs<Cfg, kFusedRouting, kLaneRows>(p, wr, acc[j], partial, split_base, j, row0, rows, alpha, warp,
                                                      lane, nt, pre);
    // (kFinalizeStoreBf16 stores both tokens of the n-tile above: no per-token pass)
    constexpr int kTokensPerPass = kEpi == MoeEpilogue::kFinalizeStoreBf16 ? 0 : 2;
#pragma unroll
    for (int c = 0; c < kTokensPerPass; ++c) {
      const int m = j * 8 + t4 * 2 + c;  // token row inside the chunk
      // down: from the block's routing tables (a valid row of the chunk); the pair only for the atomic epilogue
      [[maybe_unused]] int32_t fused_pair = 0;
      [[maybe_unused]] float fused_weight = 0.0f;
      if constexpr (kFusedRouting && kEpi != MoeEpilogue::kSwiGLU) fused_weight = wr.router_weight(row0 + min(m, rows - 1));
      if constexpr (kFusedRouting && kEpi == MoeEpilogue::kFinalizeAtomic) fused_pair = wr.pair(row0 + min(m, rows - 1));
      // kLaneRows: row m's data from lane m % 32 (every lane shuffles, before the branch; j * 8 / 32 picks
      // the register for the whole warp, as t4 * 2 + c < 8).
      [[maybe_unused]] int32_t row_pair = 0;
      [[maybe_unused]] float row_weight = 0.0f;
      if constexpr (kLaneRows && kEpi != MoeEpilogue::kSwiGLU) {
        row_weight = __shfl_sync(0xFFFFFFFFu, pre.lane_weight[j * 8 / 32], m & 31);
        if constexpr (kEpi == MoeEpilogue::kFinalizeAtomic)
          row_pair = __shfl_sync(0xFFFFFFFFu, pre.lane_pair[j * 8 / 32], m & 31);
      }
      if (m >= rows) continue;
      const int64_t prow = row0 + m;
      if constexpr (kEpi == MoeEpilogue::kSwiGLU) {
        // Rows g and g+8 of this warp's tile are gate and up of output column j_out.
        const float gate = alpha * acc[j][c], up = alpha * acc[j][2 + c];
        act[c * act_row] = __float2bfloat16_rn(swiglu(gate, up));
      } else {
        int32_t pair;
        float weight;
        if constexpr (kLaneRows) {
          pair = row_pair;  // (read by the atomic epilogue only)
          weight = row_weight;
        } else {
          pair = kFusedRouting ? fused_pair : p.perm_pair[prow];
          weight = kFusedRouting ? fused_weight : p.topk_weights[pair];
        }
        const float scale = alpha * weight;
        const int64_t h0 = static_cast<int64_t>(nt) * kBN + warp * 16 + g8;
        const int64_t tok = pair / p.top_k;  // kFinalizeAtomic (kFinalizeStore: store_partials_fp32)
        atomicAdd(partial + tok * p.n + h0, scale * acc[j][c]);
        atomicAdd(partial + tok * p.n + h0 + 8, scale * acc[j][2 + c]);
      }
    }
    if constexpr (kEpi == MoeEpilogue::kSwiGLU) act += 8 * act_row;  // the next n-tile's rows
  }
}

// gate_up with its K in k_splits ranges (decode steps whose few work items would leave most SMs idle): the
// item (tile, K range q) stores its raw partial sums, and the block that completes a tile's last range sums all
// of them in the fixed order q = 0, 1, ... into `acc` and returns true (its caller then runs the SwiGLU epilogue);
// the others return false. The order does not depend on which block arrives last, so reruns are bit-identical.
// Every thread of the block calls it (block barriers). Publication: each thread's stores, a block barrier, then one
// acquire-release atomic per block by thread 0 (ptx::atom_add_acq_rel_gpu says why that orders the whole block's
// stores); the last block's threads read the others' sums from L2 (ld.global.cg: L1 is not coherent across SMs) after
// the barrier that follows thread 0's acquire: one fence in one thread, where __threadfence would put a sequentially
// consistent fence (MEMBAR.SC.GPU) in every thread, before the atomic and again after it.
template <class Cfg>
__device__ __forceinline__ bool gate_up_split_fixup(const MoeGemmParams& p, float (&acc)[Cfg::kNTiles8][4], int tile,
                                                    int nt, int q, int row0, int rows, int warp, int lane) {
  const int g8 = lane >> 2, t4 = lane & 3;
  const int64_t col = static_cast<int64_t>(nt) * Cfg::kBlockN + warp * 16 + g8;  // gate row; up is col + 8
  float* const mine = p.partial_out + q * p.split_stride;
#pragma unroll
  for (int j = 0; j < Cfg::kNTiles8; ++j) {
    if (j * 8 >= rows) break;  // block-uniform
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const int m = j * 8 + t4 * 2 + c;
      if (m >= rows) continue;
      float* d = mine + static_cast<int64_t>(row0 + m) * p.n + col;
      __stcg(d, acc[j][c]);
      __stcg(d + 8, acc[j][2 + c]);
    }
  }
  __syncthreads();
  int* const counters = reinterpret_cast<int*>(p.partial_out + p.k_splits * p.split_stride);
  int last = 0;
  if (threadIdx.x == 0) last = ptx::atom_add_acq_rel_gpu(counters + tile, 1) == p.k_splits - 1;
  if (!__syncthreads_or(last)) return false;
#pragma unroll
  for (int j = 0; j < Cfg::kNTiles8; ++j) {
    if (j * 8 >= rows) break;
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const int m = j * 8 + t4 * 2 + c;
      if (m >= rows) continue;
      const float* s = p.partial_out + static_cast<int64_t>(row0 + m) * p.n + col;
      float gate = 0.0f, up = 0.0f;
      for (int r = 0; r < p.k_splits; ++r, s += p.split_stride) {
        const float g = r == q ? acc[j][c] : __ldcg(s), u = r == q ? acc[j][2 + c] : __ldcg(s + 8);
        gate = r == 0 ? g : gate + g;
        up = r == 0 ? u : up + u;
      }
      acc[j][c] = gate;
      acc[j][2 + c] = up;
    }
  }
  return true;
}

}  // namespace fp4moe::kernels
