// The direct decode path's sizes (kernels/moe_decode_direct.cuh): block shape, pair limit, shared memory.
// SPDX-License-Identifier: Apache-2.0
//
// One definition for the kernels (they carve their shared memory from it), the layer's launches and the plan
// (src/moe/run_plan.cc decides from it whether a call can take the path). Host and device code include it.
#pragma once

#include <cstdint>

namespace fp4moe {

// Warps per block of both kernels. gate_up: the warps of a block split the K of one 16-row weight tile; down: they
// share the pairs (and, with fewer chunks than warps, the K) of one 16-row tile of H.
inline constexpr int kDirectWarps = 8;
inline constexpr int kDirectThreads = kDirectWarps * 32;
// Blocks per SM the kernels are register-bounded for: gate_up 3 (at most 85 registers; 56 and 68 on sm_90a), down 5
// (at most 51; 48), so that on the H200 every down block of a TP8 step (H / 16 = 384 on 132 SMs) is resident beside
// two gate_up blocks (registers: 2 x 8 warps x 56 x 32 + 3 x 8 x 48 x 32 = 65,536; shared memory: 2 x 68 KB + 3 x
// 23 KB) and has its first weights in flight while gate_up streams, leaving nothing to start when gate_up ends.
// (On the 100 KB sm_120 parts shared memory allows one gate_up block beside one or two down blocks.)
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

// A down warp's K groups for `chunks` chunks of `groups` groups each (kernels/moe_decode_direct.cuh: the warps take
// the chunks in turn; with fewer chunks than warps, kDirectWarps / chunks warps split each chunk's K).
constexpr int64_t direct_down_groups_per_warp(int64_t chunks, int64_t groups) {
  if (chunks <= 0) return 0;
  if (chunks >= kDirectWarps) return (chunks + kDirectWarps - 1) / kDirectWarps * groups;
  const int64_t parts = kDirectWarps / chunks;
  return (groups + parts - 1) / parts;
}

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
  s.w_warp_bytes = s.warp_groups * 512;  // pack::kWeightGroupBytes (kernels/weight_pack.h)
  s.s_offset = kDirectWarps * s.w_warp_bytes;
  s.s_warp_bytes = s.warp_groups * 64;  // pack::kScaleGroupBytes
  s.x_offset = s.s_offset + kDirectWarps * s.s_warp_bytes;
  s.row_stride = hidden * 2 + 16;
  s.red_offset = s.x_offset + num_tokens * s.row_stride;
  s.bar_offset = s.red_offset + int64_t{kDirectWarps} * 32 * 4 * 4;
  s.total = s.bar_offset + int64_t{kDirectWarps} * kDirectGateUpPieces * 8;
  return s;
}

// down: per warp a slot region (with `stage_weights`, kDirectDownBatch K groups of weights and then of block scales,
// the bulk copies' destination; else only the 512 bytes of its sums), where a warp that splits K writes its fp32
// sums once it has multiplied its weights; the call's SwiGLU rows (pairs x I bf16, odd 16-byte row stride as above),
// each row's router-weighted terms of the block's 16 columns (fp32), the permuted row of each pair, and one mbarrier
// per warp.
struct DirectDownSmem {
  int64_t w_warp_bytes, s_offset, s_warp_bytes, act_offset, row_stride, terms_offset, rows_offset, bar_offset, total;
};
constexpr DirectDownSmem direct_down_smem(int64_t pairs, int64_t intermediate, bool stage_weights) {
  DirectDownSmem s{};
  s.w_warp_bytes = stage_weights ? int64_t{kDirectDownBatch} * 512 : 32 * 4 * 4;  // pack::kWeightGroupBytes
  s.s_offset = kDirectWarps * s.w_warp_bytes;
  s.s_warp_bytes = stage_weights ? int64_t{kDirectDownBatch} * 64 : 0;  // pack::kScaleGroupBytes
  s.act_offset = s.s_offset + kDirectWarps * s.s_warp_bytes;
  s.row_stride = intermediate * 2 + 16;
  s.terms_offset = s.act_offset + pairs * s.row_stride;
  s.rows_offset = s.terms_offset + pairs * 16 * 4;
  s.bar_offset = s.rows_offset + (pairs * 4 + 15) / 16 * 16;
  s.total = s.bar_offset + int64_t{kDirectWarps} * 8;
  return s;
}
static_assert(kDirectDownBatch * 512 >= 32 * 4 * 4, "a down warp's weight slots hold its 32 lanes' four fp32 sums");

// Whether the down kernel stages its weights in shared memory by bulk copies (48 registers: kDirectDownMinBlocks)
// rather than loading them into registers (56): where that makes every down block resident beside gate_up's first
// round, so that all of down's weights are in flight while gate_up streams and no down block is left to start when
// gate_up ends (TP8 at T=1 on the H200: 2 gate_up and 3 down blocks an SM). Where it is not, the staged slots only
// cost residency (EP8: I = 2048 makes the activation rows large) and the register loads are kept. Shared memory per SM
// decides, with the runtime's reservation per block; registers allow kDirectDownMinBlocks - (gate_up blocks) down
// blocks beside gate_up's (56 registers against 48; exact at 2 + 3).
constexpr bool direct_down_stages_weights(int64_t gate_up_blocks, int64_t down_blocks, int64_t gate_up_smem,
                                          int64_t down_smem_staged, int64_t sms, int64_t smem_per_sm,
                                          int64_t reserved_per_block) {
  if (sms <= 0) return false;
  int64_t gu = (gate_up_blocks + sms - 1) / sms;
  if (gu > kDirectMinBlocks) gu = kDirectMinBlocks;
  const int64_t left = smem_per_sm - gu * (gate_up_smem + reserved_per_block);
  if (left <= 0) return false;
  int64_t dn = left / (down_smem_staged + reserved_per_block);
  if (dn > kDirectDownMinBlocks - gu) dn = kDirectDownMinBlocks - gu;
  return dn * sms >= down_blocks;
}

}  // namespace fp4moe
