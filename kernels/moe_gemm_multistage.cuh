// Multistage grouped W4A16 GEMM for MoE experts: NVFP4 weights (prepacked) x bf16 activations, fp32 accumulation,
// with the gate_up (SwiGLU) or down (router-weighted finalize) epilogue fused. Persistent blocks walk a
// device-built list of (expert chunk, N tile, K split) work items; a cp.async pipeline runs across item boundaries.
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/moe_gemm_epilogue.cuh"
#include "kernels/moe_gemm_layout.h"
#include "kernels/moe_gemm_mainloop.cuh"
#include "kernels/moe_gemm_params.cuh"
#include "kernels/moe_gemm_producer.cuh"
#include "kernels/moe_routing_warp.cuh"
#include "kernels/ptx.cuh"

namespace fp4moe::kernels {

// kFusedRouting (at most kBlockRoutingMaxPairs pairs; the decode tiles, whose layout has the tables): the chunk
// table and the permutation come from block_routing over `ex.routing` (warp 0 computes them into this block's
// shared memory) instead of the routing kernel's tables in global memory; gate_up's block 0 also writes its
// tables, for the finalize and testing::workspace_view.
// kSplitK (gate_up of the decode tiles): p.k_splits K ranges per tile, summed by gate_up_split_fixup before the
// SwiGLU. A kernel of its own, so that the kernels without it keep their code (a runtime branch cost the 8-token
// gate_up 3% at T=8: docs/perf/history.md).
// kTail (with kSplitK; MoeRunPlan::gate_up_tail_pieces): gate_up's last, partial round of tiles, launched right after
// the kernel of the whole tiles (ex.tail_grid) as its programmatic dependent. Block b takes K piece b of those tiles
// (at most one), so the pieces go to the SMs as the whole-tile kernel's blocks leave them, instead of the round's few
// tiles streaming whole on one block each (docs/perf/shards.md, "gate_up's last round as K pieces").
template <class Cfg, MoeEpilogue kEpi, bool kFusedRouting, bool kSplitK = false, bool kTail = false>
__device__ __forceinline__ void moe_gemm_body(const MoeGemmParams& p, const MoeGemmExtras& ex) {
  static_assert(!kSplitK || kEpi == MoeEpilogue::kSwiGLU, "kSplitK: gate_up (the down GEMM's splits are summed by the finalize)");
  static_assert(!kTail || (kSplitK && !kFusedRouting), "kTail: a split-K gate_up after the routing kernel");
  constexpr int kBN = Cfg::kBlockN, kBK = Cfg::kBlockK, kStages = Cfg::kStages;
  constexpr int kGroups = kBK / pack::kGroupK;  // 64-wide K groups per stage
  constexpr MoeGemmSmemLayout L = Cfg::kSmem;
  // Steps the copies run ahead of the math: every slot but the one being multiplied. (Keeping a step's last wgmma
  // group in flight into the next step and refilling a slot one step later instead was slower: history.md.)
  constexpr int kAhead = kStages - 1;
  extern __shared__ __align__(128) uint8_t smem[];
  trap_unless_smem_holds<L.total, Cfg::kWgmma>(smem);

  // Programmatic dependent launch (host: cudaLaunchAttributeProgrammaticStreamSerialization). gate_up's
  // work list is the routing kernel's output, so it waits before reading anything. Its blocks then let the
  // down kernel launch: down's blocks take SMs as gate_up's blocks leave, and issue their first weight
  // copies before their own wait (below). That read of the routing tables by down is safe because down
  // cannot start before every gate_up block has passed this wait, i.e. after routing completed. (With
  // kFusedRouting the down kernel reads only the layer's inputs -- topk ids and weights -- before its wait;
  // gate_up is then the forward pass's first kernel, a programmatic dependent of whatever kernel the stream ran
  // before, which this wait also covers.)
  // kTail reads only the routing's tables (complete: the whole-tile kernel waited for them before it let this grid
  // launch, as for down's reads below) and the layer's inputs, so it does not wait for the whole-tile kernel here:
  // it waits at its end, so that the down kernel's wait for this grid covers both gate_up kernels.
  if constexpr (kEpi == MoeEpilogue::kSwiGLU) {
    if constexpr (!kTail) ptx::griddep_wait();
    ptx::griddep_launch_dependents();
  }
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  static_assert(!kFusedRouting || Cfg::kRoutesPairs, "kFusedRouting: a decode tile (its layout has the routing tables)");
  BlockRouting wr;
  if constexpr (kFusedRouting)
    wr = block_routing(ex.routing, ex.num_global_experts, kEpi == MoeEpilogue::kSwiGLU && blockIdx.x == 0,
                       reinterpret_cast<BlockRoutingTables*>(smem + L.routing_offset));
  const int n_tiles = p.n / kBN, splits = p.k_splits, k_tiles = p.k / kBK / splits;  // k_tiles: per item
  const int tiles = (kFusedRouting ? wr.num_chunks : *p.num_chunks) * n_tiles;
  int num_items = tiles * splits, first_item = blockIdx.x;
  if constexpr (kEpi == MoeEpilogue::kSwiGLU && !kSplitK) {
    if (ex.tail_grid > 0) num_items = whole_gate_up_tiles(tiles, ex.tail_grid);
  }
  if constexpr (kTail) first_item += whole_gate_up_tiles(tiles, ex.tail_grid) * splits;
  const int my_items = first_item < num_items ? (num_items - 1 - first_item) / static_cast<int>(gridDim.x) + 1 : 0;
  const int total_steps = my_items * k_tiles;

  // ---- producer: this thread's copy sources, set once per work item and advanced along K ----------
  TileProducer<Cfg, Cfg::kThreads, kFusedRouting> prod(n_tiles, splits, first_item);
  auto produce = [&](int slot, bool weights, bool acts) {
    prod.produce(p, wr, smem + slot * L.stage_bytes, tid, k_tiles, weights, acts);
  };

  // Accumulators: mma.sync C fragments of the item's 8-token n-tiles; on the wgmma path the same registers
  // as one array d[4j + r] = acc[j][r] (wgmma.cuh). Zeroed here once, before any wgmma is in flight; the
  // wgmma path restarts them with scale-d = 0 instead.
  float acc[Cfg::kNTiles8][4];
#pragma unroll
  for (int j = 0; j < Cfg::kNTiles8; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
  float(&accw)[Cfg::kBlockM / 2] = *reinterpret_cast<float(*)[Cfg::kBlockM / 2]>(&acc[0][0]);

  if constexpr (kEpi == MoeEpilogue::kSwiGLU) {
#pragma unroll
    for (int s = 0; s < kAhead; ++s) {
      if (s < total_steps) produce(s, true, true);
      ptx::cp_async_commit();
    }
  } else {
    // down: the first stages' weights do not depend on gate_up, so their copies are in flight before the
    // wait for gate_up's activations (they join commit group 0, which step 0 waits for anyway).
#pragma unroll
    for (int s = 0; s < kAhead; ++s)
      if (s < total_steps) produce(s, true, false);
    ptx::griddep_wait();
    ptx::griddep_launch_dependents();
    prod.restart();
#pragma unroll
    for (int s = 0; s < kAhead; ++s) {
      if (s < total_steps) produce(s, false, true);
      ptx::cp_async_commit();
    }
  }

  // ---- consumer state: the item whose K steps the warps are multiplying ------------------------------
  ItemWalk cw(first_item, gridDim.x, n_tiles, splits);
  int cons_kt = 0, cons_e = 0, cons_row0 = 0, cons_rows = 0;
  int slot = 0;  // st % kStages, advanced step by step (no division in the K loop)
  LaneSlot<Cfg> cur(smem, warp, lane);  // this lane's view of slot `slot`
  for (int st = 0; st < total_steps; ++st) {
    if (cons_kt == 0) {
      const int chunk = cw.chunk;
      if constexpr (kFusedRouting) {
        cons_e = wr.expert(chunk);
        cons_row0 = wr.start(chunk);
        cons_rows = wr.rows(chunk);
      } else {
        cons_e = p.chunk_expert[chunk];
        cons_row0 = p.chunk_start[chunk];
        cons_rows = p.chunk_rows[chunk];
      }
    }
    ptx::cp_async_wait<kAhead - 1>();
    if constexpr (Cfg::kWgmma) wgmma::fence_proxy_async_shared();  // this thread's copies -> the tensor cores' reads
    __syncthreads();  // step st has landed for every thread; slot (st - 1) % kStages is free again
    // Step st + kAhead refills slot (st + kStages - 1) % kStages, the one step st - 1 used.
    static_assert(kAhead == kStages - 1, "the refill slot below is the previous step's");
    if (st + kAhead < total_steps) produce(slot == 0 ? kStages - 1 : slot - 1, true, true);
    ptx::cp_async_commit();

    if (++slot == kStages) slot = 0;
    if constexpr (Cfg::kWgmma) {
      // Group g's four wgmmas run while group g+1 is dequantized; wait<1> then frees group g's A registers
      // (and, at the stage's end, wait<0> its slot).
#pragma unroll
      for (int g = 0; g < kGroups; ++g) {
        wgmma_group<Cfg>(cur.weights(g), cur.scales(g), cur.desc, g, accw, (cons_kt == 0 && g == 0) ? 0 : 1,
                         ex.dequant_mul);
        wgmma::wait<1>();
      }
      // This step's wgmmas are done before the next step's barrier lets its slot be refilled, and before
      // the epilogue reads the accumulators.
      wgmma::wait<0>();
#pragma unroll
      for (int i = 0; i < Cfg::kBlockM / 2; ++i) wgmma::fence_operand(accw[i]);
    } else {
#pragma unroll
      for (int g = 0; g < kGroups; ++g) {
        const uint4 wq = cur.weights(g);
        const uint2 sq = cur.scales(g);
        const uint32_t words[4] = {wq.x, wq.y, wq.z, wq.w};
#pragma unroll
        for (int h = 0; h < 2; ++h) {  // two k16 steps per ldmatrix.x4
          uint32_t b[Cfg::kNTiles8][4];
#pragma unroll
          for (int j = 0; j < Cfg::kNTiles8; ++j) {
            if (j > 0 && j * 8 >= cons_rows) break;  // n-tiles past the item's tokens: no loads, no MMAs
            ptx::ldmatrix_x4(b[j], cur.x + j * 8 * L.act_row_stride + (g * pack::kGroupK + h * 32) * 2);
          }
          const uint32_t s_g = scale_pair2(sq.x, h, ex.dequant_mul), s_g8 = scale_pair2(sq.y, h, ex.dequant_mul);
          uint32_t a0[4], a1[4];
          dequant_a_fragments(words[2 * h], words[2 * h + 1], s_g, s_g8, ex.dequant_mul, a0, a1);
#pragma unroll
          for (int j = 0; j < Cfg::kNTiles8; ++j) {
            if (j > 0 && j * 8 >= cons_rows) break;
            ptx::mma_bf16_16816(acc[j], a0, b[j][0], b[j][1]);
            ptx::mma_bf16_16816(acc[j], a1, b[j][2], b[j][3]);
          }
        }
      }
    }  // mma.sync path
    cur.next();
    if (slot == 0) cur.wrap();  // (advanced above) the next step reads slot 0 again

    if (++cons_kt == k_tiles) {  // last K step of this item: epilogue straight from registers
      // gate_up with split K: only the block that completes the tile's last K range stores (the sum of all).
      bool store = true;
      if constexpr (kSplitK)
        store = gate_up_split_fixup<Cfg>(p, acc, cw.chunk * n_tiles + cw.nt, cw.nt, cw.q, cons_row0, cons_rows, warp, lane);
      if (store) store_item<Cfg, kEpi, kFusedRouting>(p, wr, acc, cw.nt, cw.q, cons_e, cons_row0, cons_rows, warp, lane);
      if constexpr (!Cfg::kWgmma) {  // the next item accumulates from zero (the wgmma tiles start with scale-d 0)
#pragma unroll
        for (int j = 0; j < Cfg::kNTiles8; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
      }
      cons_kt = 0;
      cw.next(gridDim.x);
    }
  }
  ptx::cp_async_wait<0>();
  // kTail: block 0 alone waits for the whole-tile kernel (the griddep_wait at the top is skipped for kTail). This grid
  // then completes only after that kernel has, and its writes are visible, so down's wait for this grid covers both;
  // the other blocks leave their SMs to down's blocks as soon as their piece is stored (measured faster than every
  // block with a piece waiting: docs/perf/shards.md, "gate_up's last round as K pieces").
  if constexpr (kTail)
    if (blockIdx.x == 0) ptx::griddep_wait();
}

// The body is compiled only for the architecture the config was planned for (its shared-memory layout
// is static_asserted against that architecture's budget in Cfg); other targets get an empty kernel.
template <class Cfg, MoeEpilogue kEpi, bool kFusedRouting = false, bool kSplitK = false, bool kTail = false>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocksPerSm) moe_gemm_kernel(const MoeGemmParams p,
                                                                                       const MoeGemmExtras ex) {
#if defined(__CUDA_ARCH__)
  constexpr int kTarget = __CUDA_ARCH__ / 10 == 121 ? 120 : __CUDA_ARCH__ / 10;
  // FP4MOE_SM120_ON_SM90 (the GPU test build): the sm_120 configs' bodies also in the sm_90 cubin, so that the
  // sm_120 path (its tiles, shared-memory layout and mma.sync code) runs on an H200 (MoeLayerOptions::kernel_arch).
#if defined(FP4MOE_SM120_ON_SM90)
  constexpr bool kAlsoHere = Cfg::kArch == 120 && kTarget == 90;
#else
  constexpr bool kAlsoHere = false;
#endif
  if constexpr (kTarget == Cfg::kArch || kAlsoHere) moe_gemm_body<Cfg, kEpi, kFusedRouting, kSplitK, kTail>(p, ex);
#endif
}

}  // namespace fp4moe::kernels
