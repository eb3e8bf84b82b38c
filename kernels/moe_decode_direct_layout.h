// The direct decode path's sizes (kernels/moe_decode_direct.cuh): block shape, weight rings, shared memory.
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
// Blocks per SM both kernels are register-bounded for (at most 48 registers a thread; the weights wait in shared
// memory, not in registers): at T=1 on the TP8 shard (256 gate_up and 384 down blocks on 132 SMs) two gate_up and
// three down blocks fit an SM together, so every down block is resident, its first weights on their way, while
// gate_up streams.
inline constexpr int kDirectMinBlocks = 5;
// Rows of a routing chunk: the token columns of one mma.m16n8k16.
inline constexpr int kDirectChunkRows = 8;
// Each warp streams its 64-wide K groups through a ring of this many slots (gate_up, down): a lane copies its own
// 16 weight bytes and 8 scale bytes of a group with cp.async and reads back only those, so no warp barrier sits
// between a copy and its use. Down issues its first slots before it waits for gate_up.
inline constexpr int kDirectGateUpSlots = 6;
inline constexpr int kDirectDownSlots = 4;
inline constexpr int64_t kDirectSlotBytes = 32 * (16 + 8);  // per warp: 512 weight bytes, 32 lanes x 8 scale bytes
// The most shared memory a call may need of either kernel to take the path (below the 101,376 B of the sm_120
// parts less their 1 KB reservation).
inline constexpr int64_t kDirectMaxSmem = 96 * 1024;

// (The pair limit is fp4moe::kMaxDirectDecodePairs, in fp4moe/moe.h; src/moe/layer.cu checks it against the warp
// routing's range.)

// Token rows a gate_up warp stages at once: the call's tokens, at most a chunk's rows (a chunk with more rows, where a
// token names one expert twice, runs in several passes).
constexpr int64_t direct_staged_rows(int64_t tokens) { return tokens < kDirectChunkRows ? tokens : kDirectChunkRows; }
// K groups of the warp with the most of them (gate_up: H / 64 over the warps).
constexpr int64_t direct_groups_per_warp(int64_t hidden) { return (hidden / 64 + kDirectWarps - 1) / kDirectWarps; }

// gate_up, per warp: its weight ring, then its staged token rows of its whole K range (+16 bytes per row: a row
// stride of an odd number of 16-byte units keeps ldmatrix's eight row reads on distinct banks); after the warps,
// their fp32 sums for the block's fixed-order reduction (32 lanes x 4 accumulators each).
struct DirectGateUpSmem {
  int64_t row_stride, x_offset, warp_bytes, red_offset, total;
};
constexpr DirectGateUpSmem direct_gate_up_smem(int64_t tokens, int64_t hidden) {
  DirectGateUpSmem s{};
  s.row_stride = direct_groups_per_warp(hidden) * 64 * 2 + 16;
  s.x_offset = kDirectGateUpSlots * kDirectSlotBytes;
  s.warp_bytes = s.x_offset + direct_staged_rows(tokens) * s.row_stride;
  s.red_offset = kDirectWarps * s.warp_bytes;
  s.total = s.red_offset + int64_t{kDirectWarps} * 32 * 4 * 4;
  return s;
}

// down: the warps' weight rings, the call's SwiGLU rows (pairs x I bf16, odd 16-byte row stride as above), each
// row's router-weighted terms of the block's 16 columns (fp32), the permuted row of each pair, and the warps' sums
// where they split K.
struct DirectDownSmem {
  int64_t row_stride, act_offset, terms_offset, rows_offset, red_offset, total;
};
constexpr DirectDownSmem direct_down_smem(int64_t pairs, int64_t intermediate) {
  DirectDownSmem s{};
  s.row_stride = intermediate * 2 + 16;
  s.act_offset = int64_t{kDirectWarps} * kDirectDownSlots * kDirectSlotBytes;
  s.terms_offset = s.act_offset + pairs * s.row_stride;
  s.rows_offset = s.terms_offset + pairs * 16 * 4;
  s.red_offset = s.rows_offset + (pairs * 4 + 15) / 16 * 16;
  s.total = s.red_offset + int64_t{kDirectWarps} * 32 * 4 * 4;
  return s;
}

}  // namespace fp4moe
