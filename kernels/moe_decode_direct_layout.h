// The direct decode path's sizes (kernels/moe_decode_direct.cuh): block shape, pair limit, shared memory.
// SPDX-License-Identifier: Apache-2.0
//
// One definition for the kernels (they carve their shared memory from it), the layer's launches and the plan
// (src/moe/run_plan.cc decides from it whether a call can take the path). Host and device code include it.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/moe_routing_layout.h"
#include "kernels/weight_pack.h"

namespace fp4moe {

// Warps per block of both kernels. gate_up: the warps of a block split the K of one 16-row weight tile; down: they
// share the pairs (and, with fewer chunks than warps, the K) of one 16-row tile of H.
inline constexpr int kDirectWarps = 8;
inline constexpr int kDirectThreads = kDirectWarps * 32;
// Blocks per SM the kernels are register-bounded for: gate_up and the down kernel that loads its weights into registers
// 3 (at most 85 registers), the down kernel that stages them 5 (at most 51), so that on the H200 every down block of a
// TP8 step (H / 16 = 384 on 132 SMs) can be resident beside two gate_up blocks and have its weights in flight while
// gate_up streams (DirectKernelRegs has the counts; direct_down_stages_weights does the arithmetic).
inline constexpr int kDirectMinBlocks = 3;
inline constexpr int kDirectDownMinBlocks = 5;
// Rows of a routing chunk: the token columns of one mma.m16n8k16.
inline constexpr int kDirectChunkRows = 8;
// The pieces of a gate_up warp's K range, each on its own mbarrier: the warp multiplies a piece while the later
// ones are still landing.
inline constexpr int kDirectGateUpPieces = 2;
// 64-wide K groups whose weights a down lane loads before it multiplies any of them (gate_up puts its whole K range
// in shared memory instead: DirectGateUpSmem).
inline constexpr int kDirectDownBatch = 4;
// The most shared memory a call may need of either kernel to take the path (below the 101,376 B of the sm_120
// parts less their 1 KB reservation).
inline constexpr int64_t kDirectMaxSmem = 96 * 1024;
// The most 64-wide K groups one down warp should stream for the path to pay off: a warp walks its chunks' groups
// in batches of kDirectDownBatch, each batch a round trip to memory, so the path wins where that is one or two
// batches (the TP8 shard at T <= 2, the EP8 shard at T <= 2, whose one or two chunks split K over the warps) and
// loses where it is more (TP8 at T=4: 4 chunks a warp; the unsharded layer: K = 2048, 32 groups a warp).
inline constexpr int kDirectMaxDownGroupsPerWarp = 8;
// Where a step has fewer chunks than down has warps, so that the warps split each chunk's K: an expert-parallel rank's
// step of 3 or 4 tokens (few local experts, each of the full I), up to four batches a warp. Each batch after the first
// is a round trip, but one that every warp of every block takes at once, against the tiled kernels' split-K fix-up,
// partial sums and finalize (Qwen3-235B-A22B's EP8 rank at T=3 on the H200: docs/perf/shards.md).
inline constexpr int kDirectMaxDownGroupsPerWarpSplit = 16;

// A down warp's K groups for `chunks` chunks of `groups` groups each (kernels/moe_decode_direct.cuh: the warps take
// the chunks in turn; with fewer chunks than warps, kDirectWarps / chunks warps split each chunk's K).
constexpr int64_t direct_down_groups_per_warp(int64_t chunks, int64_t groups) {
  if (chunks <= 0) return 0;
  if (chunks >= kDirectWarps) return (chunks + kDirectWarps - 1) / kDirectWarps * groups;
  const int64_t parts = kDirectWarps / chunks;
  return (groups + parts - 1) / parts;
}

// Whether gate_up's blocks take more than one chunk each (moe_direct_gate_up_kernel<true>): fewer block rows than the
// call's pairs, its most chunks. The plan counts that kernel's registers, the layer launches it.
constexpr bool direct_gate_up_loops(int64_t gate_up_chunk_blocks, int64_t pairs) { return gate_up_chunk_blocks < pairs; }

// gate_up: each warp's whole K range of the block's 16-row weight tile (its weights, then its block scales, in the
// prepacked order, so one bulk copy each), the call's T token rows over all of H (+16 bytes per row: a row stride
// of an odd number of 16-byte units keeps ldmatrix's eight row reads on distinct banks; staged by token, not by
// chunk row, so an id repeated within a token needs no second copy), the warps' fp32 sums for the block's
// fixed-order reduction (32 lanes x 4 accumulators each; apart from the weights, which a block's next chunk is
// already overwriting), and an mbarrier per piece of each warp's K range (kDirectGateUpPieces).
// (The pair limit is fp4moe::kMaxDirectDecodePairs, in fp4moe/moe.h; src/moe/layer.cu checks it against the warp
// routing's range.)
struct DirectGateUpSmem {
  int64_t warp_groups;  // the most 64-wide K groups one warp multiplies: ceil(H / 64 / kDirectWarps)
  int64_t w_warp_bytes, s_offset, s_warp_bytes, x_offset, row_stride, red_offset, bar_offset, total;
};
constexpr DirectGateUpSmem direct_gate_up_smem(int64_t num_tokens, int64_t hidden) {
  DirectGateUpSmem s{};
  s.warp_groups = (hidden / 64 + kDirectWarps - 1) / kDirectWarps;
  s.w_warp_bytes = s.warp_groups * pack::kWeightGroupBytes;
  s.s_offset = kDirectWarps * s.w_warp_bytes;
  s.s_warp_bytes = s.warp_groups * pack::kScaleGroupBytes;
  s.x_offset = s.s_offset + kDirectWarps * s.s_warp_bytes;
  s.row_stride = hidden * 2 + 16;
  s.red_offset = s.x_offset + num_tokens * s.row_stride;
  s.bar_offset = s.red_offset + int64_t{kDirectWarps} * 32 * 4 * 4;
  s.total = s.bar_offset + int64_t{kDirectWarps} * kDirectGateUpPieces * 8;
  return s;
}

// down: per warp `slots` slot regions (each kDirectDownBatch K groups of weights, then their block scales, the bulk
// copies' destination; with no slots, only the 512 bytes of the warp's sums, where a warp that splits K writes them once
// it has multiplied its weights), with `tables` the block's routing tables (block_routing: the ring kernel), the call's
// SwiGLU rows (`act_rows` of them, I bf16 each, odd 16-byte row stride as above: every pair's where act_rows < 0; a
// call with more rows than that reads them from L2 instead), each row's router-weighted terms of the block's 16 columns
// (fp32), the permuted row of each pair, and an mbarrier per slot (at least one a warp).
struct DirectDownSmem {
  int64_t w_warp_bytes, s_offset, s_warp_bytes, tables_offset, act_offset, row_stride, terms_offset, rows_offset,
      bar_offset, total;
};
constexpr DirectDownSmem direct_down_smem_slots(int64_t pairs, int64_t intermediate, int slots, bool tables,
                                                int64_t act_rows = -1) {
  DirectDownSmem s{};
  s.w_warp_bytes = slots > 0 ? int64_t{slots} * kDirectDownBatch * pack::kWeightGroupBytes : 32 * 4 * 4;
  s.s_offset = kDirectWarps * s.w_warp_bytes;
  s.s_warp_bytes = int64_t{slots} * kDirectDownBatch * pack::kScaleGroupBytes;
  s.tables_offset = s.s_offset + kDirectWarps * s.s_warp_bytes;
  s.act_offset = s.tables_offset + (tables ? int64_t{sizeof(kernels::BlockRoutingTables)} : 0);
  s.row_stride = intermediate * 2 + 16;
  s.terms_offset = s.act_offset + (act_rows < 0 ? pairs : act_rows) * s.row_stride;
  s.rows_offset = s.terms_offset + pairs * 16 * 4;
  s.bar_offset = s.rows_offset + (pairs * 4 + 15) / 16 * 16;
  s.total = s.bar_offset + int64_t{kDirectWarps} * std::max(slots, 1) * 8;
  return s;
}
// The direct down kernel's: one slot a warp where it stages its weights, none where they go to registers; room for
// `act_rows` SwiGLU rows (MoeDirectPlan::down_staged_rows; every pair's where negative).
constexpr DirectDownSmem direct_down_smem(int64_t pairs, int64_t intermediate, bool stage_weights, int64_t act_rows = -1) {
  return direct_down_smem_slots(pairs, intermediate, stage_weights ? 1 : 0, false, act_rows);
}
static_assert(kDirectDownBatch * pack::kWeightGroupBytes >= 32 * 4 * 4, "a down warp's weight slots hold its 32 lanes' four fp32 sums");

// The ring down kernel (moe_direct_down_ring_kernel: down with the finalize folded in, after the tiled gate_up):
// each warp streams its chunks' weights (a chunk's K is one batch of at most kDirectDownBatch groups: I <= 256)
// through kDirectDownRing slots, so the next chunks are in flight while one is multiplied (the direct down kernel's
// warps have one batch each). Three slots:
// 55,296 B for the 8 warps, which with 32 pairs' SwiGLU rows of I = 256 keeps three blocks on an H200 SM, so a TP8
// shard's 384 blocks (H = 6144) are resident at once. The plan takes it for at most kDirectDownRingMaxPairs pairs:
// above, the tiled down kernel's deeper per-block pipeline was faster than two slots a warp, the most that 64 pairs'
// rows leave room for (docs/perf/shards.md).
inline constexpr int kDirectDownRing = 3;
inline constexpr int kDirectDownRingMaxPairs = 32;

// The ring kernel's: kDirectDownRing slots a warp and the block's routing tables.
constexpr DirectDownSmem direct_down_ring_smem(int64_t pairs, int64_t intermediate) {
  return direct_down_smem_slots(pairs, intermediate, kDirectDownRing, true);
}

// Registers per thread of the direct kernels: the layer reads them from its kernels at init (cudaFuncGetAttributes);
// these defaults are the sm_90a build's (nvcc 13.0), for plans made without a GPU.
struct DirectKernelRegs {
  int gate_up = 53;       // moe_direct_gate_up_kernel<false>: one chunk per block
  int gate_up_loop = 72;  // <true>: blocks that take more chunks
  int down_staged = 48;   // moe_direct_down_kernel<true> (at 56 registers 3 of its blocks beside 2 gate_up blocks would
                          // not fit, and the H200 measured 17.0 against 16.6 us at TP8 T=1)
};

// Whether the down kernel stages its weights in shared memory by bulk copies rather than loading them into registers:
// where that makes every down block resident beside gate_up's blocks (one wave of them), so that all of down's weights
// are in flight while gate_up streams and no down block is left to start when gate_up ends (TP8 at T=1 on the H200: 2
// gate_up and 3 down blocks an SM). Where it is not, the staged slots only cost residency (EP8: I = 2048 makes the
// activation rows large) and the register loads are kept. Per SM: gate_up's blocks take their shared memory (with the
// runtime's reservation per block) and registers (a warp's allocation rounded up to 8 per thread), and the staged
// down blocks must fit in what is left of both.
constexpr bool direct_down_stages_weights(int64_t gate_up_blocks, int64_t down_blocks, int64_t gate_up_smem,
                                          int64_t down_smem_staged, int64_t sms, int64_t smem_per_sm,
                                          int64_t reserved_per_block, int64_t regs_per_sm, int gate_up_regs,
                                          int down_regs) {
  if (sms <= 0) return false;
  const int64_t gu = (gate_up_blocks + sms - 1) / sms;
  auto block_regs = [](int regs) { return int64_t{kDirectThreads} * ((regs + 7) / 8 * 8); };
  const int64_t smem_left = smem_per_sm - gu * (gate_up_smem + reserved_per_block);
  const int64_t regs_left = regs_per_sm - gu * block_regs(gate_up_regs);
  if (gu > kDirectMinBlocks || smem_left <= 0 || regs_left <= 0) return false;  // (gate_up alone takes more than a wave)
  int64_t dn = smem_left / (down_smem_staged + reserved_per_block);
  if (dn > regs_left / block_regs(down_regs)) dn = regs_left / block_regs(down_regs);
  if (dn > kDirectDownMinBlocks) dn = kDirectDownMinBlocks;
  return dn * sms >= down_blocks;
}

}  // namespace fp4moe
