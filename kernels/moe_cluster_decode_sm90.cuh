// A tensor-parallel shard's decode step as one kernel of thread-block clusters: gate_up and down of each expert chunk.
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

// A cluster has two blocks per N tile of gate_up (2 x 2I / kBlockN: 8 on a TP8 shard of a model with I = 2048), one per
// half of its K = H, and cluster c takes chunk c of the routing (every block routes the call's at most
// kBlockRoutingMaxPairs pairs into its own shared memory, as the fused-routing GEMM kernels do); the host launches a
// cluster per pair, as many as the call can have chunks, all resident at once, and the clusters past the call's
// chunks exit at once. Block (r, q) multiplies gate_up's N tile r over K half q; the q = 1 block stores its raw sums in L2, a cluster barrier
// hands them to the q = 0 block, which adds them after its own and stores the tile's SwiGLU columns; after a second
// cluster barrier, which makes every block's SwiGLU stores visible to all, each block multiplies its 1 / csize of down's
// N tiles for the chunk's rows, K = I in one stage each, and stores their router-weighted fp32 partials for the finalize
// kernel. So down's weights stream on the same SMs right after gate_up's, with no grid-wide wait and no second launch
// ramp between the two GEMMs. One cp.async ring runs across both GEMMs: the first down stages' weights
// are copied while gate_up's last stages are multiplied, their activations once the barrier has passed. Two blocks per
// N tile because a block streams only about 15-20 GB/s (its warps' dequantization latency), so the decode steps that
// fit a cluster per chunk need twice the blocks of gate_up's N tiles to keep the SMs busy (with one, docs/perf/history.md,
// steps of 4-8 tokens were slower than the tiled kernels). Every sum is the one the tiled kernels of the same tile make
// with gate_up's K in two splits (same K order, the split fix-up's order, the same epilogues), so the SwiGLU rows, the
// partials and the output are bit for bit theirs.
template <class Cfg>
__device__ __forceinline__ void moe_cluster_decode_body(const MoeGemmParams& gu, const MoeGemmParams& dn,
                                                        const MoeGemmExtras& ex) {
  static_assert(!Cfg::kWgmma && Cfg::kRoutesPairs, "a decode tile: mma.sync, the routing tables in its layout");
  constexpr int kBK = Cfg::kBlockK, kStages = Cfg::kStages, kAhead = kStages - 1;
  constexpr int kGroups = kBK / pack::kGroupK;
  constexpr MoeGemmSmemLayout L = Cfg::kSmem;
  extern __shared__ __align__(128) uint8_t smem[];
  trap_unless_smem_holds<L.total, false>(smem);
  // The forward pass's first kernel: it reads the router's ids and overwrites the workspace only after the stream's
  // previous kernel has completed; the finalize may launch (it waits for this grid before reading a partial).
  ptx::griddep_wait();
  ptx::griddep_launch_dependents();
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const BlockRouting wr = block_routing(ex.routing, ex.num_global_experts, blockIdx.x == 0,
                                        reinterpret_cast<BlockRoutingTables*>(smem + L.routing_offset));
  const int rank = static_cast<int>(ptx::cluster_ctarank()), csize = static_cast<int>(ptx::cluster_nctarank());
  const int chunk = static_cast<int>(ptx::clusterid_x());  // this cluster's chunk
  const int gu_tiles = gu.n / Cfg::kBlockN;
  const int r = rank % gu_tiles, q = rank / gu_tiles;  // gate_up N tile and K half
  // The host plans these shapes only (cluster_decode_plan): two blocks per gate_up N tile, down's K one stage, its N
  // tiles split evenly over the cluster, each K half of gate_up at least the copies' lead.
  if (csize != 2 * gu_tiles || dn.k != kBK || dn.n % (csize * Cfg::kBlockN) != 0 || gu.k % (2 * kBK) != 0 ||
      gu.k / kBK / 2 < kAhead)
    __trap();
  const int gu_steps = gu.k / kBK / 2;               // gate_up: one item of gu_steps stages (a K half) per chunk
  const int dn_items = dn.n / Cfg::kBlockN / csize;  // down: this block's N tiles, one stage each
  const int total_steps = gu_steps + dn_items;
  // The whole cluster leaves together (the same routing in every block), before any cluster barrier.
  if (chunk >= wr.num_chunks) return;

  // ---- producer: the next copy's step; down's activations wait for the cluster's SwiGLU rows ------------------
  TileProducer<Cfg, Cfg::kThreads, true> pg(1, 1), pd(1, 1);
  int p_step = 0;
  bool rows_stored = false;  // the cluster has stored the chunk's SwiGLU rows (the second barrier has passed)
  int pending = 0;           // down stages copied before that without their activations (at most kAhead)
  auto produce = [&](int slot) {
    uint8_t* base = smem + slot * L.stage_bytes;
    if (p_step < gu_steps) {
      if (p_step == 0) pg.walk.chunk = chunk, pg.walk.nt = r, pg.walk.q = q;
      pg.produce(gu, wr, base, tid, gu_steps, true, true);
    } else {
      pd.walk.chunk = chunk, pd.walk.nt = rank * dn_items + (p_step - gu_steps), pd.walk.q = 0;
      pd.produce(dn, wr, base, tid, 1, true, rows_stored);
      if (!rows_stored) ++pending;
    }
    ++p_step;
  };

  float acc[Cfg::kNTiles8][4];
  auto clear = [&] {
#pragma unroll
    for (int j = 0; j < Cfg::kNTiles8; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
  };
  clear();
#pragma unroll
  for (int s = 0; s < kAhead; ++s) {
    if (s < total_steps) produce(s);  // (gate_up steps: gu_steps >= kAhead)
    ptx::cp_async_commit();
  }

  const int cons_e = wr.expert(chunk), cons_row0 = wr.start(chunk), cons_rows = wr.rows(chunk);
  int slot = 0;
  LaneSlot<Cfg> cur(smem, warp, lane);
  for (int st = 0; st < total_steps; ++st) {
    ptx::cp_async_wait<kAhead - 1>();
    __syncthreads();  // step st has landed for every thread; the slot step st - 1 used is free again
    if (st + kAhead < total_steps) produce(slot == 0 ? kStages - 1 : slot - 1);
    ptx::cp_async_commit();
    if (++slot == kStages) slot = 0;

#pragma unroll
    for (int g = 0; g < kGroups; ++g) {  // the multistage kernels' mma.sync step (kernels/moe_gemm_multistage.cuh)
      const uint4 wq = cur.weights(g);
      const uint2 sq = cur.scales(g);
      const uint32_t words[4] = {wq.x, wq.y, wq.z, wq.w};
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        uint32_t b[Cfg::kNTiles8][4];
#pragma unroll
        for (int j = 0; j < Cfg::kNTiles8; ++j) {
          if (j > 0 && j * 8 >= cons_rows) break;
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
    cur.next();
    if (slot == 0) cur.wrap();

    if (st == gu_steps - 1) {
      // The K halves' sums, in K order (gate_up_split_fixup's: K range 0, then + K range 1): the q = 1 block's through
      // L2 (the split buffer of K range 1, as the split-K gate_up kernels store it), read after the barrier.
      const int g8 = lane >> 2, t4 = lane & 3;
      float* const half1 = gu.partial_out + gu.split_stride + static_cast<int64_t>(r) * Cfg::kBlockN + warp * 16 + g8;
      // f(gate, up, the pair's two sums in K half 1's buffer) for each of this lane's accumulator pairs of the chunk
      auto each_pair = [&](auto&& f) {
#pragma unroll
        for (int j = 0; j < Cfg::kNTiles8; ++j)
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            const int m = j * 8 + t4 * 2 + c;
            if (m < cons_rows) f(acc[j][c], acc[j][2 + c], half1 + static_cast<int64_t>(cons_row0 + m) * gu.n);
          }
      };
      if (q == 1) each_pair([](float gate, float up, float* d) { __stcg(d, gate), __stcg(d + 8, up); });
      ptx::cluster_sync_release_acquire();  // K half 1's sums, stored by the q = 1 blocks
      if (q == 0) {
        each_pair([](float& gate, float& up, const float* s) { gate = gate + __ldcg(s), up = up + __ldcg(s + 8); });
        store_item<Cfg, MoeEpilogue::kSwiGLU, true>(gu, wr, acc, r, 0, cons_e, cons_row0, cons_rows, warp, lane);
      }
      clear();
      ptx::cluster_sync_release_acquire();  // the chunk's SwiGLU rows, all of I, stored by the cluster
      rows_stored = true;
      // The activations of the down stages already copied (steps st + 1 ...), into their slots; all landed before
      // the next step's barrier.
      for (int j = 0; j < pending; ++j) {
        pd.walk.chunk = chunk, pd.walk.nt = rank * dn_items + j, pd.walk.q = 0;
        pd.produce(dn, wr, smem + ((st + 1 + j) % kStages) * L.stage_bytes, tid, 1, false, true);
      }
      pending = 0;
      ptx::cp_async_commit();
      ptx::cp_async_wait<0>();
    } else if (st >= gu_steps) {
      store_item<Cfg, MoeEpilogue::kFinalizeStore, true>(dn, wr, acc, rank * dn_items + (st - gu_steps), 0, cons_e,
                                                         cons_row0, cons_rows, warp, lane);
      clear();
    }
  }
  ptx::cp_async_wait<0>();
}

// Compiled for sm_90 only (clusters and the 228 KB layout of the config); other targets get an empty kernel.
template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocksPerSm)
    moe_cluster_decode_kernel(const MoeGemmParams gu, const MoeGemmParams dn, const MoeGemmExtras ex) {
#if defined(__CUDA_ARCH__)
  if constexpr (Cfg::kArch == 90 && __CUDA_ARCH__ / 10 == 90) moe_cluster_decode_body<Cfg>(gu, dn, ex);
#endif
}

}  // namespace fp4moe::kernels
