// The grouped GEMMs' work-item walk: a block's items as (chunk, N tile, K range) advanced without divisions; and
// which tiles gate_up's whole-tile kernel leaves to its tail kernel.
// SPDX-License-Identifier: Apache-2.0
//
// Host and device code include it (tests/unit/test_item_walk.cc checks it against the divisions it replaces).
#pragma once

#include "fp4moe/detail/hd.h"

namespace fp4moe::kernels {

// A block's work items first, first + stride, ... (item = (chunk * n_tiles + N tile) * splits + K range) walked
// without a division per item: two integer divisions by run-time values are about 60 instructions per warp, a third
// of the epilogue of a short-K down item (ncu, docs/perf/shards.md). The three divisions of the stride are made once.
struct ItemWalk {
  int item, chunk, nt, q;  // the current item, its chunk, N tile and K range
  int n_tiles, splits, d_chunk, d_nt, d_q;
  FP4MOE_HD ItemWalk(int first, int stride, int n_tiles_, int splits_)
      : n_tiles(n_tiles_), splits(splits_) {
    const int tile = first / splits, d_tile = stride / splits;
    item = first, q = first % splits, nt = tile % n_tiles, chunk = tile / n_tiles;
    d_q = stride % splits, d_nt = d_tile % n_tiles, d_chunk = d_tile / n_tiles;
  }
  // tile + d_tile + carry: nt + d_nt + carry <= 2 n_tiles - 1, so one wrap at most.
  FP4MOE_HD void next(int stride) {
    item += stride;
    q += d_q;
    const int carry = q >= splits;
    q -= carry * splits;
    nt += d_nt + carry;
    chunk += d_chunk;
    if (nt >= n_tiles) nt -= n_tiles, ++chunk;
  }
};

// The tiles a whole-tile gate_up kernel of `grid` blocks takes when gate_up's tail kernel follows it
// (kernels/moe_gemm_multistage.cuh, kTail): its whole rounds, or every tile where there are fewer than `grid` (the tail
// kernel then has no piece). The tail kernel takes the tiles past them.
FP4MOE_HD constexpr int whole_gate_up_tiles(int tiles, int grid) { return tiles < grid ? tiles : tiles / grid * grid; }

}  // namespace fp4moe::kernels
