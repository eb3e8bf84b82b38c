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
// Blocks per SM both kernels are register-bounded for (at most 85 registers; 80 and 72 on sm_90a): on the H200 two
// gate_up blocks and one down block fit an SM together (registers and 228 KB of shared memory), so some of down's
// blocks start, and load their first weights, while gate_up streams. (On the 100 KB sm_120 parts shared memory
// allows one gate_up block of 54 KB beside one down block.)
inline constexpr int kDirectMinBlocks = 3;
// Rows of a routing chunk: the token columns of one mma.m16n8k16.
inline constexpr int kDirectChunkRows = 8;
// 64-wide K groups whose weights a lane loads before it multiplies any of them (gate_up, down). gate_up stages
// the activations of one batch per warp, so its shared memory does not grow with H.
inline constexpr int kDirectGateUpBatch = 6;
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

// Token rows a gate_up warp stages: a chunk's rows, at most kDirectChunkRows (more than T where an id repeats
// within a token, so counted from the pairs).
constexpr int64_t direct_staged_rows(int64_t pairs) { return pairs < kDirectChunkRows ? pairs : kDirectChunkRows; }

// gate_up: per warp, staged rows x one batch of K (+16 bytes per row: a row stride of an odd number of 16-byte
// units keeps ldmatrix's eight row reads on distinct banks), then the warps' fp32 sums for the block's fixed-order
// reduction (32 lanes x 4 accumulators each).
// (The pair limit is fp4moe::kMaxDirectDecodePairs, in fp4moe/moe.h; src/moe/layer.cu checks it against the warp
// routing's range.)
struct DirectGateUpSmem {
  int64_t row_stride, warp_bytes, red_offset, total;
};
constexpr DirectGateUpSmem direct_gate_up_smem(int64_t pairs) {
  DirectGateUpSmem s{};
  s.row_stride = int64_t{kDirectGateUpBatch} * 64 * 2 + 16;
  s.warp_bytes = direct_staged_rows(pairs) * s.row_stride;
  s.red_offset = kDirectWarps * s.warp_bytes;
  s.total = s.red_offset + int64_t{kDirectWarps} * 32 * 4 * 4;
  return s;
}

// down: the call's SwiGLU rows (pairs x I bf16, odd 16-byte row stride as above), each row's router-weighted terms
// of the block's 16 columns (fp32), the permuted row of each pair, and the warps' sums where they split K.
struct DirectDownSmem {
  int64_t row_stride, act_offset, terms_offset, rows_offset, red_offset, total;
};
constexpr DirectDownSmem direct_down_smem(int64_t pairs, int64_t intermediate) {
  DirectDownSmem s{};
  s.row_stride = intermediate * 2 + 16;
  s.act_offset = 0;
  s.terms_offset = pairs * s.row_stride;
  s.rows_offset = s.terms_offset + pairs * 16 * 4;
  s.red_offset = s.rows_offset + (pairs * 4 + 15) / 16 * 16;
  s.total = s.red_offset + int64_t{kDirectWarps} * 32 * 4 * 4;
  return s;
}

}  // namespace fp4moe
