// Unit test of the grouped GEMMs' work-item walk (kernels/moe_gemm_items.h) against the divisions it replaces, and of
// the tiles gate_up's whole-tile kernel leaves to its tail kernel.
// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include "kernels/moe_gemm_items.h"

namespace fp4moe::kernels {
namespace {

// Every block of grids of 1..300 blocks (the H200's 132 and 396, the RTX PRO 6000's 188 among them) walks its items
// for N-tile counts 1..48 and the K splits the kernels take, and each item's chunk, N tile and K range are the
// divisions' (item = (chunk * n_tiles + nt) * splits + q).
TEST(ItemWalk, EqualsTheDivisionsForEveryBlockOfEveryGrid) {
  int64_t checked = 0;
  for (int splits : {1, 2, 4, 8})
    for (int n_tiles : {1, 2, 3, 4, 7, 16, 24, 48})
      for (int grid : {1, 2, 3, 5, 64, 131, 132, 188, 264, 300, 396}) {
        const int num_items = 40 * grid + 17;  // many rounds (every wrap of q and nt) and a partial last one
        for (int b = 0; b < grid; b += (grid > 40 ? 7 : 1)) {
          ItemWalk w(b, grid, n_tiles, splits);
          for (int expect = b; expect < num_items; expect += grid, w.next(grid)) {
            ASSERT_EQ(w.item, expect);
            ASSERT_EQ(w.q, expect % splits) << "splits " << splits << " n_tiles " << n_tiles << " grid " << grid;
            ASSERT_EQ(w.nt, expect / splits % n_tiles) << "splits " << splits << " n_tiles " << n_tiles << " grid " << grid;
            ASSERT_EQ(w.chunk, expect / splits / n_tiles) << "splits " << splits << " n_tiles " << n_tiles << " grid " << grid;
            ++checked;
          }
        }
      }
  EXPECT_GT(checked, 250000);
}

// gate_up's whole-tile kernel takes its grid's whole rounds of tiles (the tail kernel the rest), or every tile when
// there are fewer than its blocks: GLM-5's TP8 step of 64 tokens (888 tiles on 396 blocks) leaves 96 to the tail.
TEST(ItemWalk, WholeGateUpTilesAreTheGridsWholeRounds) {
  static_assert(whole_gate_up_tiles(888, 396) == 792);
  EXPECT_EQ(whole_gate_up_tiles(228, 264), 228) << "fewer tiles than blocks: all of them, no tail";
  EXPECT_EQ(whole_gate_up_tiles(792, 396), 792) << "whole rounds only: no tail";
  EXPECT_EQ(whole_gate_up_tiles(0, 396), 0);
  for (int grid : {1, 132, 264, 396})
    for (int tiles = 0; tiles < 5 * grid; tiles += 7) {
      const int whole = whole_gate_up_tiles(tiles, grid);
      ASSERT_LE(whole, tiles);
      ASSERT_LT(tiles - whole, grid) << "the tail is less than a round";
      ASSERT_TRUE(tiles < grid ? whole == tiles : whole % grid == 0) << tiles << " tiles, grid " << grid;
    }
}

}  // namespace
}  // namespace fp4moe::kernels
