// The producer side of the grouped GEMMs: which thread copies which weights, scales and activation rows per stage.
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>

#include "kernels/moe_gemm_layout.h"
#include "kernels/moe_gemm_params.cuh"
#include "kernels/moe_routing_warp.cuh"
#include "kernels/ptx.cuh"
#include "kernels/weight_pack.h"

namespace fp4moe::kernels {

// The copies of one block's work items, stage by stage, issued by kPThreads threads (thread `tid`): the
// weights and block scales of kBlockN rows x kBlockK, and the activations of the item's token rows (gathered
// through perm_pair for gate_up; rows past the item's tokens zero-filled). Sources are set once per item (one
// chunk-table lookup, not one per stage) and advanced along K. Items run blockIdx.x, + gridDim.x, ...
// Item i = (tile i / splits, K range i % splits); tile t = (chunk t / n_tiles, N tile t % n_tiles): `walk`
// (kernels/moe_gemm_items.h) holds the next copy's item in those terms; a gate_up tail kernel's blocks start past the
// whole tiles (kernels/moe_gemm_multistage.cuh, kTail).
// Thread assignment: a stage's weights of one 16-row tile are kGroups x 512 contiguous bytes in the prepacked
// layout and in shared memory alike, and kTPR threads copy each tile's run (chunk q + i * kTPR for thread q
// of the tile), so a thread's copies sit at compile-time offsets from one source and one destination: one
// address computation per stage instead of one per copy. Likewise its activation copies are whole rows
// apart (compile-time destination offsets), and rows past the item's tokens read a valid row with the
// copy's ignore-src predicate set, so no copy needs a per-stage select.
// kRecord (warp-specialized kernels): with the last stage of each item the producer also copies the item's
// record (row0, rows, alpha; with kRows each row's router weight and pair index: MoeGemmWsRecord) into `rec`,
// the record slot of that stage (MoeGemmSmemLayout::epilogue_offset); the stage's full barrier covers it.
// kFirstRows (with a record): the item's rows also with its first stage, for consumers that choose the wgmma's N.
enum class ItemRecord { kNone, kHeader, kRows };
template <class Cfg, int kPThreads, bool kFusedRouting, ItemRecord kRecord = ItemRecord::kNone, bool kFirstRows = false>
struct TileProducer {
  static constexpr int kGroups = Cfg::kBlockK / pack::kGroupK;
  static constexpr int kRowTiles = Cfg::kBlockN / 16;                  // 16-row weight tiles per stage
  static constexpr int kTileChunks = kGroups * pack::kWeightGroupBytes / 16;  // 16-byte copies per tile per stage
  static constexpr int kTPR = kPThreads / kRowTiles;                   // copying threads per tile
  static constexpr int kSChunks = Cfg::kBlockN * Cfg::kBlockK / 16 / 16;  // scales
  static constexpr int kRowChunks = Cfg::kBlockK * 2 / 16;              // activations, per token row
  static constexpr int kXChunks = Cfg::kBlockM * kRowChunks;
  // Every divisibility and count this assignment relies on (tiles over threads, one scale copy per thread,
  // whole rows apart, one swizzle phase, at most 32 activation copies for x_zero's bits).
  static_assert(moe_gemm_copy_problem(Cfg::kBlockM, Cfg::kBlockN, Cfg::kBlockK, kPThreads, Cfg::kSmem.act_layout) == nullptr,
                "tile not served by the copy assignment (moe_gemm_copy_problem says why; the planner prints it)");
  static constexpr int kWPer = kTileChunks / kTPR;
  static constexpr int kXPer = (kXChunks + kPThreads - 1) / kPThreads;
  static constexpr int kXRowStep = kPThreads / kRowChunks;  // rows between a thread's activation copies

  ItemWalk walk;  // the next copy's work item (first, + gridDim.x, ...)
  int kt = 0;     // and K step inside it
  int first;      // the block's first item: blockIdx.x, or past the whole tiles for a gate_up tail kernel (kTail)
  __device__ __forceinline__ TileProducer(int n_tiles, int splits, int first_item = blockIdx.x)
      : walk(first_item, gridDim.x, n_tiles, splits), first(first_item) {}
  // Back to the block's first item (the down kernels copy the first stages' weights, then their activations).
  __device__ __forceinline__ void restart() {
    walk = ItemWalk(first, gridDim.x, walk.n_tiles, walk.splits);
    kt = 0;
  }
  const uint8_t* w_src = nullptr;  // this thread's first weight chunk at the item's first K step
  const uint8_t* s_src = nullptr;
  const uint8_t* x_src[kXPer];     // this thread's activation chunks at the item's first K step (valid rows)
  uint32_t x_zero = 0;             // bit i: copy i's row is past the item's tokens (zero-filled, ignore-src)
  // kRecord: the item's chunk, expert and rows; kRows: thread tid < rows's pair (loaded at the item's start,
  // used at its last stage, so the load's latency is hidden)
  int rec_chunk = 0, rec_e = 0, rec_row0 = 0, rec_rows = 0;
  int32_t rec_pair = 0;
  static_assert(!kFirstRows || kRecord != ItemRecord::kNone, "kFirstRows: the rows go into the item record");
  static_assert(kRecord == ItemRecord::kNone || (!kFusedRouting && Cfg::kBlockM <= kPThreads),
                "item records: the routing kernel's tables; one thread per row (the last one also copies the header)");

  __device__ __forceinline__ void begin_item(const MoeGemmParams& p, const BlockRouting& wr, int tid, int k_tiles) {
    const int chunk = walk.chunk, nt = walk.nt;
    const int64_t k0 = static_cast<int64_t>(walk.q) * k_tiles * Cfg::kBlockK;  // first K of the item's range
    int e, row0, rows;
    if constexpr (kFusedRouting) e = wr.expert(chunk), row0 = wr.start(chunk), rows = wr.rows(chunk);
    else e = p.chunk_expert[chunk], row0 = p.chunk_start[chunk], rows = p.chunk_rows[chunk];
    if constexpr (kRecord != ItemRecord::kNone) {
      rec_chunk = chunk, rec_e = e, rec_row0 = row0, rec_rows = rows;
      if constexpr (kRecord == ItemRecord::kRows)
        if (tid < rows) rec_pair = p.perm_pair[row0 + tid];
    }
    {
      const int r = tid / kTPR, q = tid % kTPR;
      w_src = p.weights + pack::weight_group_offset(e, nt * kRowTiles + r, k0 / pack::kGroupK, p.n, p.k) + q * 16;
    }
    if (tid < kSChunks) {
      const int r = tid / (kGroups * 4), off = tid % (kGroups * 4);
      s_src = p.scales + pack::scale_group_offset(e, nt * kRowTiles + r, k0 / pack::kGroupK, p.n, p.k) + off * 16;
    }
    x_zero = 0;
#pragma unroll
    for (int i = 0; i < kXPer; ++i) {
      const int m = tid / kRowChunks + i * kXRowStep, off = tid % kRowChunks;
      const int m_src = min(m, max(rows, 1) - 1);  // a row of the chunk (the routing makes none empty): a valid address
      [[maybe_unused]] int32_t fused_pair = 0;  // (the block's routing tables: a valid row of the chunk)
      if constexpr (kFusedRouting) fused_pair = wr.pair(row0 + m_src);
      const int64_t src_row =
          p.gather_tokens ? (kFusedRouting ? fused_pair : p.perm_pair[row0 + m_src]) / p.top_k : row0 + m_src;
      x_src[i] = reinterpret_cast<const uint8_t*>(p.x + src_row * p.k + k0) + off * 16;
      x_zero |= static_cast<uint32_t>(m >= rows) << i;
    }
  }
  // Issues the copies of the next step into the stage at `s_base` (the weights and scales, the activations,
  // or both), then advances along K (and to the next item).
  __device__ __forceinline__ void produce(const MoeGemmParams& p, const BlockRouting& wr, uint8_t* s_base, int tid,
                                          int k_tiles, bool weights, bool acts,
                                          uint8_t* rec = nullptr) {
    constexpr MoeGemmSmemLayout L = Cfg::kSmem;
    if (kt == 0) begin_item(p, wr, tid, k_tiles);
    const int64_t k = kt;
    if (weights) {
      const int r = tid / kTPR, q = tid % kTPR;
      uint8_t* dst = s_base + L.weight_offset + r * (kTileChunks * 16) + q * 16;
      const uint8_t* src = w_src + k * (kTileChunks * 16);
#pragma unroll
      for (int i = 0; i < kWPer; ++i) ptx::cp_async_16(dst + i * kTPR * 16, src + i * kTPR * 16);
      if (tid < kSChunks)
        ptx::cp_async_16(s_base + L.scale_offset + tid * 16, s_src + k * kGroups * pack::kScaleGroupBytes);
    }
    if (acts) {
      // Copy i: row m0 + i x kXRowStep, 16-byte chunk `off`. wgmma: the chunk goes to slice off/8, row m,
      // chunk (off%8) ^ (m%8) (the 128-byte swizzle, wgmma.cuh), and m%8 is the same for every copy;
      // mma.sync: padded rows. Either way copy i lands at a constant offset from copy 0.
      const int m0 = tid / kRowChunks, off = tid % kRowChunks;
      uint8_t* dst = s_base + L.act_offset +
                     (Cfg::kWgmma ? (off / 8) * L.act_slice_bytes + m0 * 128 + (((off & 7) ^ (m0 & 7)) * 16)
                                  : m0 * L.act_row_stride + off * 16);
      constexpr int64_t kDstStep = Cfg::kWgmma ? int64_t{kXRowStep} * 128 : int64_t{kXRowStep} * L.act_row_stride;
#pragma unroll
      for (int i = 0; i < kXPer; ++i) {
        if (kXChunks % kPThreads != 0 && m0 + i * kXRowStep >= Cfg::kBlockM) break;
        ptx::cp_async_16_zfill(dst + i * kDstStep, x_src[i] + k * (Cfg::kBlockK * 2), (x_zero & (1u << i)) != 0);
      }
      // Items that choose their width: the item's rows, with its first stage (the consumers pick the N).
      if constexpr (kFirstRows)
        if (kt == 0 && tid == kPThreads - 1) ptx::cp_async_4(rec + MoeGemmWsRecord::kFirstRows, p.chunk_rows + rec_chunk);
      // The item record, with the item's last stage (its consumers read it after that stage's wait).
      if constexpr (kRecord != ItemRecord::kNone) {
        if (kt == k_tiles - 1) {
          using R = MoeGemmWsRecord;
          if (tid == kPThreads - 1) {
            ptx::cp_async_4(rec + R::kRow0, p.chunk_start + rec_chunk);
            ptx::cp_async_4(rec + R::kRows, p.chunk_rows + rec_chunk);
            ptx::cp_async_4(rec + R::kAlpha, p.alpha + rec_e);
          }
          if constexpr (kRecord == ItemRecord::kRows) {
            if (tid < rec_rows) {
              ptx::cp_async_4(rec + R::kRowData + 4 * tid, p.topk_weights + rec_pair);
              ptx::cp_async_4(rec + R::kRowData + 4 * (Cfg::kBlockM + tid), p.perm_pair + rec_row0 + tid);
            }
          }
        }
      }
    }
    if (++kt == k_tiles) {
      kt = 0;
      walk.next(gridDim.x);
    }
  }
};

}  // namespace fp4moe::kernels
