// The catalogue of shipped grouped-GEMM configs: which tiles fp4moe compiles, for which archs, in which family.
// SPDX-License-Identifier: Apache-2.0
//
// The one list: src/moe/kernel_registry.cu instantiates the kernels from it, the planner marks these configs
// "shipped", the tuner draws its candidates and the CLI its choices from it. Host and device code include it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "fp4moe/arch.h"
#include "fp4moe/kernel_types.h"
#include "kernels/moe_gemm_layout.h"

namespace fp4moe::catalogue {

struct ShippedTile {
  KernelFamily family;
  int block_m, block_n, block_k;
  int target_blocks;   // multistage: blocks per SM planned on the 228 KB parts (the 100 KB parts run one); ws: 1
  // A decode tile also built as gate_up kernels that split K (MoeForwardArgs::gate_up_k_splits).
  bool split_k;
  // A small-K tile: a GEMM takes it only where no other tile of its family and block_m divides its K (a tensor-
  // parallel shard's down GEMM: K = I / tp, a multiple of 64 but not of 128 or 256).
  bool small_k = false;
  int skip_arch = 0;  // an arch this tile is not built or planned for (0: none; warp-specialized tiles: sm_90 only)
  // sm_90: also built as the cluster decode kernel (kernels/moe_cluster_decode_sm90.cuh: gate_up and down of a TP
  // shard's decode step in one launch, one cluster of blocks per expert chunk). The 8-token tile's two configs: the
  // plan takes the first whose clusters are all resident at once, a later one only where the tiled plan would leave
  // gate_up's K whole (cluster_decode_plan, src/moe/run_plan.h).
  bool cluster_decode = false;
  // sm_90: also built as gate_up's tail kernel (kernels/moe_gemm_multistage.cuh, kTail): the last, partial round of
  // a decode step's gate_up tiles in K pieces, after the whole tiles' kernel (MoeRunPlan::gate_up_tail_pieces).
  bool gate_up_tail = false;
  // A decode tile: also built as the kernels that route at most kMaxFusedRoutingPairs (64) pairs themselves -- the
  // multistage tiles whose layout has the routing tables (moe_gemm_routes_pairs; at most 16 tokens, whose activation
  // rows are padded on every arch).
  constexpr bool fused_routing() const {
    return family == KernelFamily::kMultistage && moe_gemm_routes_pairs(block_m, MoeActLayout::kPaddedRows);
  }
};

// In this order on every arch (a tile that becomes a copy of the one before it on an arch is not built there:
// the 8-token tile's 3-block config is the 2-block one on the 100 KB parts).
inline constexpr ShippedTile kTiles[] = {
    {KernelFamily::kMultistage, 8, 128, 256, 2, true, false, 0, true, true},
    // (the 3-block config routes pairs for the down GEMM of 33-64 pairs; gate_up there takes the 2-block one)
    {KernelFamily::kMultistage, 8, 128, 256, 3, false, false, 0, true, true},
    {KernelFamily::kMultistage, 16, 128, 256, 2, true},
    {KernelFamily::kMultistage, 32, 128, 256, 2, false},
    {KernelFamily::kMultistage, 64, 128, 128, 2, false},
    {KernelFamily::kWarpSpecialized, 16, 256, 128, 1, false},
    {KernelFamily::kWarpSpecialized, 32, 256, 128, 1, false},
    {KernelFamily::kWarpSpecialized, 64, 256, 128, 1, false},
    // The prefill tile: each weight converted once per 128 tokens (the consumers get the producer's registers).
    {KernelFamily::kWarpSpecialized, 128, 256, 128, 1, false},
    // Small-K tiles (K = 64 per stage). On sm_90 the 32- and 64-token ones are warp-specialized: a multistage
    // wgmma tile of 128 rows x 64 K would put the activations off a 1024-byte swizzle atom (static_assert).
    {KernelFamily::kMultistage, 8, 128, 64, 2, true, true},
    {KernelFamily::kMultistage, 16, 128, 64, 2, true, true},
    {KernelFamily::kMultistage, 32, 128, 64, 2, false, true, 90},
    {KernelFamily::kMultistage, 64, 128, 64, 2, false, true, 90},
    {KernelFamily::kWarpSpecialized, 32, 256, 64, 1, false, true},
    {KernelFamily::kWarpSpecialized, 64, 256, 64, 1, false, true},
};
inline constexpr size_t kNumTiles = sizeof(kTiles) / sizeof(kTiles[0]);

// Whether tile t is built as gate_up's tail kernel for the kernel family `family` (catalogue gate_up_tail; sm_90 only:
// it was measured there).
constexpr bool builds_gate_up_tail(const ShippedTile& t, int family) { return t.gate_up_tail && family == 90; }

// Only the tiles whose kernels route pairs split gate_up's K (their split-K kernels come in both routings).
constexpr bool split_k_tiles_route_pairs() {
  for (const ShippedTile& t : kTiles)
    if (t.split_k && !t.fused_routing()) return false;
  return true;
}
static_assert(split_k_tiles_route_pairs(), "split_k: a tile whose kernels route pairs");

// The kernel families (fp4moe/arch.h, kernel_arch_family) the kernels are compiled for: sm_90 (H100, H200) and
// sm_120 (RTX 5090, RTX PRO 6000; sm_121 runs the same configs). Other archs are planned, not built.
inline constexpr int kKernelArchs[] = {90, 120};

constexpr bool kernels_planned_for(int cc) {
  for (int a : kKernelArchs)
    if (a == kernel_arch_family(cc)) return true;
  return false;
}

// Whether tile i is a copy of the tile before it on `cc` (same family and tile, same effective blocks per SM).
constexpr bool duplicate_on(size_t i, int cc) {
  if (i == 0) return false;
  const ShippedTile& a = kTiles[i];
  const ShippedTile& b = kTiles[i - 1];
  return a.family == b.family && a.block_m == b.block_m && a.block_n == b.block_n && a.block_k == b.block_k &&
         moe_gemm_blocks_per_sm(a.target_blocks, cc) == moe_gemm_blocks_per_sm(b.target_blocks, cc);
}

// Whether tile i has a config on `cc`: warp-specialized tiles need sm_90a's wgmma; copies are dropped.
constexpr bool tile_on(size_t i, int cc) {
  return !duplicate_on(i, cc) && (kTiles[i].family != KernelFamily::kWarpSpecialized || cc == 90) &&
         kTiles[i].skip_arch != cc;
}

// The config tile i gets on `cc`: stage count, blocks per SM and threads, from the layout functions.
struct ShippedConfig {
  ShippedTile tile;
  int cc, stages, blocks_per_sm, threads;
  int64_t smem_bytes;
};
constexpr ShippedConfig config_on(size_t i, int cc) {
  const ShippedTile t = kTiles[i];
  ShippedConfig c{t, cc, 0, 1, 0, 0};
  if (t.family == KernelFamily::kWarpSpecialized) {
    c.stages = moe_gemm_ws_planned_stages(t.block_m, t.block_n, t.block_k, cc);
    c.threads = kWsProducerThreads + t.block_n / 16 * 32;
    c.smem_bytes = moe_gemm_ws_smem_layout(t.block_m, t.block_n, t.block_k, c.stages).total;
  } else {
    c.stages = moe_gemm_planned_stages(t.block_m, t.block_n, t.block_k, cc, t.target_blocks);
    c.blocks_per_sm = moe_gemm_blocks_per_sm(t.target_blocks, cc);
    c.threads = t.block_n / 16 * 32;
    c.smem_bytes =
        moe_gemm_smem_layout(t.block_m, t.block_n, t.block_k, c.stages, moe_gemm_act_layout(cc, t.block_m)).total;
  }
  return c;
}

}  // namespace fp4moe::catalogue
