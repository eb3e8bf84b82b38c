// The one constexpr shared-memory layout of fp4moe's grouped-GEMM kernels and their compile-time configs.
// SPDX-License-Identifier: Apache-2.0
//
// The kernels carve their buffers from these functions and static_assert that they fit the target arch (from
// fp4moe/arch.h); the planner prints the same numbers. Host and device code include this file.
#pragma once

#include <cstdint>

#include "fp4moe/arch.h"
#include "fp4moe/kernel_types.h"
#include "kernels/moe_routing_layout.h"

namespace fp4moe {

// Hopper (sm_90) multiplies with wgmma from 32 tokens per item; every other tile and arch with mma.sync. With
// 8 or 16 tokens, wgmma's fences and waits per 64-wide K group cost more than they save (docs/perf/moe-decode.md).
constexpr MoeActLayout moe_gemm_act_layout(int cc, int block_m) {
  return cc == 90 && block_m >= 32 ? MoeActLayout::kSwizzled128 : MoeActLayout::kPaddedRows;
}

// The decode tiles (multistage, at most 16 tokens, padded activation rows): their kernels also route up to
// kernels::kBlockRoutingMaxPairs pairs themselves, into tables after the stages (kernels/moe_routing_warp.cuh).
constexpr bool moe_gemm_routes_pairs(int block_m, MoeActLayout act) {
  return act == MoeActLayout::kPaddedRows && block_m <= 16;
}

// What follows the stages (the mbarriers, the epilogue's item records, the routing tables), the total and their
// offsets.
constexpr MoeGemmSmemLayout with_tail(MoeGemmSmemLayout l, int64_t barriers, int64_t epilogue) {
  l.barriers = barriers;
  l.epilogue = epilogue;
  l.total = l.pipeline + l.epilogue + l.barriers + l.routing;
  l.barrier_offset = l.pipeline;
  l.epilogue_offset = l.pipeline + l.barriers;
  l.routing_offset = l.epilogue_offset + l.epilogue;
  return l;
}

constexpr MoeGemmSmemLayout moe_gemm_smem_layout(int block_m, int block_n, int block_k, int stages,
                                                 MoeActLayout act = MoeActLayout::kPaddedRows) {
  MoeGemmSmemLayout l{};
  l.weight_tile = int64_t{block_n} * block_k / 2;
  l.scale_tile = int64_t{block_n} * block_k / 16;
  l.act_layout = act;
  l.act_tile = int64_t{block_m} * block_k * 2;
  if (act == MoeActLayout::kPaddedRows) {
    l.act_row_stride = int64_t{block_k} * 2 + 16;
    l.act_padding = int64_t{block_m} * 16;
  } else {
    l.act_row_stride = 128;
    l.act_slice_bytes = int64_t{block_m} * 128;
  }
  l.stage_bytes = l.weight_tile + l.scale_tile + l.act_tile + l.act_padding;
  l.stages = stages;
  l.pipeline = l.stage_bytes * stages;
  l.weight_offset = 0;
  l.scale_offset = l.weight_tile;
  l.act_offset = l.weight_tile + l.scale_tile;
  l.routing = moe_gemm_routes_pairs(block_m, act) ? int64_t{sizeof(kernels::BlockRoutingTables)} : 0;
  return with_tail(l, 0, 0);  // cp.async groups need no barriers; the epilogues store from registers
}

// Why the kernels' copy assignment (kernels/moe_gemm_producer.cuh, TileProducer) cannot serve a tile copied by
// `threads` threads into the `act` activation layout, or nullptr when it can. A thread copies one 16-row weight
// tile's contiguous run and activation rows a fixed stride apart, so every copy of a stage sits at a
// compile-time offset. The kernels static_assert it; the planner reports it for custom tiles.
constexpr const char* moe_gemm_copy_problem(int block_m, int block_n, int block_k, int threads, MoeActLayout act) {
  const int row_tiles = block_n / 16, row_chunks = block_k * 2 / 16;  // 16-byte chunks per token row
  if (threads % row_tiles != 0 || (block_k / 64 * 32) % (threads / row_tiles) != 0)
    return "the 16-row weight tiles do not split evenly over the copying threads";
  if (block_n * block_k / 256 > threads) return "more than one block-scale copy per thread";
  if (threads % row_chunks != 0)
    return "a thread's activation copies are not whole rows apart (copying threads not a multiple of tile K / 8)";
  if (act == MoeActLayout::kSwizzled128 && (threads / row_chunks) % 8 != 0)
    return "a thread's activation rows differ in swizzle phase (copying threads / (tile K / 8) not a multiple of 8)";
  if ((block_m * row_chunks + threads - 1) / threads > 32) return "more than 32 activation copies per thread";
  return nullptr;
}

// Largest stage count whose layout fits `budget` bytes (0 when not even one stage fits).
constexpr int moe_gemm_max_stages(int block_m, int block_n, int block_k, int64_t budget,
                                  MoeActLayout act = MoeActLayout::kPaddedRows) {
  const MoeGemmSmemLayout one = moe_gemm_smem_layout(block_m, block_n, block_k, 1, act);
  const int64_t per = one.stage_bytes, fixed = one.total - one.stage_bytes;  // (the routing tables)
  return per > 0 && budget > fixed ? static_cast<int>((budget - fixed) / per) : 0;
}

// Blocks per SM a multistage config is planned for: its target (2 or 3) on the 228 KB parts -- so one block's
// copy latency hides behind another's math -- and 1 on the 100 KB parts. The stage count follows: as many as fit
// the SM's shared memory split that many ways. __launch_bounds__ caps registers to match. A few experts want a
// deep pipeline per block and many want warps, so the 8-token tile ships at both 2 and 3 blocks and the layer
// picks by the pair count (docs/perf/moe-decode.md has the measurements).
constexpr int moe_gemm_blocks_per_sm(int target_blocks, int cc) {
  return arch_info(cc).smem_per_sm < 200 * 1024 ? 1 : target_blocks;
}
// Shared memory a config may use per block: its share of the SM less the runtime's reservation, never more than
// the opt-in maximum per block.
constexpr int64_t moe_gemm_stage_budget(int target_blocks, int cc) {
  const ArchInfo a = arch_info(cc);
  const int64_t share = a.smem_per_sm / moe_gemm_blocks_per_sm(target_blocks, cc) - a.reserved_smem_per_block;
  return share < a.smem_per_block ? share : a.smem_per_block;
}
inline constexpr int kMaxStages = 6;  // deeper than this adds no bandwidth (Little's law: >= 32 KB in flight per SM)

// Stage count a (block_m, block_n, block_k) multistage config gets on `cc` at `target_blocks` per SM: as many as
// fit the budget, at most kMaxStages.
constexpr int moe_gemm_planned_stages(int block_m, int block_n, int block_k, int cc, int target_blocks = 2) {
  const int s = moe_gemm_max_stages(block_m, block_n, block_k, moe_gemm_stage_budget(target_blocks, cc),
                                    moe_gemm_act_layout(cc, block_m));
  return s < kMaxStages ? s : kMaxStages;
}

// Template parameters of the multistage grouped-GEMM kernels (W4A16: NVFP4 weights, bf16 activations, fp32
// accumulation). Swap-AB: the weights are the MMA's A (16 rows of N per warp tile), the few tokens its n = 8 side.
template <int kBlockM_, int kBlockN_, int kBlockK_, int kStages_, int kArch_, int kTargetBlocks_ = 2>
struct MoeGemmConfig {
  static constexpr int kBlockM = kBlockM_;  // tokens per work item (multiple of 8: the MMA's n)
  static constexpr int kBlockN = kBlockN_;  // weight rows per work item (16 per warp)
  static constexpr int kBlockK = kBlockK_;  // K per pipeline stage (multiple of 64: one 16-byte load = 4 MMA k-steps)
  static constexpr int kStages = kStages_;  // cp.async pipeline depth
  static constexpr int kArch = kArch_;      // compute capability the config is built for (90, 120, ...)
  static constexpr int kWarps = kBlockN / 16;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kNTiles8 = kBlockM / 8;  // MMA n-tiles per warp
  // Blocks per SM the stage budget was planned for (kTargetBlocks_ on the 228 KB parts, 1 on the 100 KB ones):
  // caps registers via __launch_bounds__.
  static constexpr int kMinBlocksPerSm = moe_gemm_blocks_per_sm(kTargetBlocks_, kArch);
  // wgmma (sm_90): one warpgroup = 4 warps = 64 weight rows per m64nNk16; N = kBlockM for every work item
  // (kernels/moe_gemm_mainloop.cuh, wgmma_k64).
  static constexpr bool kWgmma = moe_gemm_act_layout(kArch, kBlockM) == MoeActLayout::kSwizzled128;
  static constexpr MoeGemmSmemLayout kSmem =
      moe_gemm_smem_layout(kBlockM, kBlockN, kBlockK, kStages, moe_gemm_act_layout(kArch, kBlockM));
  static constexpr int64_t kSmemBytes = kSmem.total;
  static constexpr ArchInfo kArchInfo = arch_info(kArch);
  // A decode tile: its kernels may route the pairs themselves (kSmem.routing bytes of tables).
  static constexpr bool kRoutesPairs = kSmem.routing > 0;

  static_assert(kBlockM % 8 == 0 && kBlockM >= 8 && kBlockM <= 128, "kBlockM: multiple of 8 in [8, 128]");
  static_assert(kSmem.routing_offset % 16 == 0, "the routing tables: 16-byte aligned");
  static_assert(kBlockN % 16 == 0 && kBlockN >= 16 && kBlockN <= 256, "kBlockN: multiple of 16 in [16, 256]");
  static_assert(kBlockK % 64 == 0 && kBlockK >= 64, "kBlockK: multiple of 64");
  static_assert(kStages >= 2, "kStages: at least 2 for the copy to overlap the math");
  static_assert(kTargetBlocks_ == 2 || kTargetBlocks_ == 3, "kTargetBlocks_: 2 or 3 blocks per SM");
  static_assert(kArchInfo.smem_per_block > 0, "kArch: unknown architecture");
  static_assert((kSmemBytes + kArchInfo.reserved_smem_per_block) * kMinBlocksPerSm <= kArchInfo.smem_per_sm,
                "the planned blocks per SM must fit the SM's shared memory");
  static_assert(kSmemBytes <= kArchInfo.smem_per_block, "config does not fit the architecture's shared memory");
  static_assert(!kWgmma || (kBlockN % 64 == 0 && kBlockM <= 64),
                "wgmma: whole warpgroups of 64 weight rows; at most 64 tokens (accumulator registers)");
  static_assert(!kWgmma || (kSmem.act_offset % 1024 == 0 && kSmem.stage_bytes % 1024 == 0),
                "wgmma: every stage's activation slices must start on a 1024-byte swizzle atom");
};

// ---- Warp-specialized sm_90 tiles (kernels/moe_gemm_warpspecialized_sm90.cuh) ---------------------------------
// One block per SM: a producer warpgroup issues every copy of a stage, kBlockN / 64 consumer warpgroups
// dequantize and run wgmma; a "full" and an "empty" mbarrier per stage hand the stages over, so no block-wide
// barrier stops the math and a stage's last wgmmas stay in flight while the next stage starts
// (docs/design/warp-specialized-sm90.md).
inline constexpr int kWsProducerThreads = 128;
inline constexpr int kWsMaxStages = 8;
// An item record: what a warp-specialized consumer's epilogue needs of its work item (first row, rows, alpha,
// and per row the router weight and pair index), copied by the producer with the item's last stage, so the
// epilogue reads shared memory instead of three dependent global loads (chunk table -> perm_pair ->
// topk_weights). 16 B + 8 B per token row; the producer writes and the consumers read it at these offsets.
struct MoeGemmWsRecord {
  static constexpr int kRow0 = 0, kRows = 4, kAlpha = 8;  // int32, int32, float
  // int32: the rows of the item whose FIRST stage is in this slot (the kernels of moe_gemm_ws_short_items: the
  // consumers pick the wgmma's N from it before the item's K loop; the fields above belong to the item whose last
  // stage it is)
  static constexpr int kFirstRows = 12;
  static constexpr int kRowData = 16;  // float router weight of row m at kRowData + 4 m, int32 pair index at
                                       // kRowData + 4 (block_m + m)
};
// The warp-specialized kernels whose items multiply their rows rounded up to a multiple of this many tokens (one wgmma
// width and K loop per multiple; kernels/moe_gemm_warpspecialized_sm90.cuh, whose producer copies each item's rows
// with its first stage for that choice): every tile of more than 16 tokens, but the 32-token tile's bf16-partial down
// kernel (an opt-in finalize mode), which keeps whole-tile items: with a K loop per width its consumers spill two
// registers (an 8-byte stack frame, whatever the load order or the epilogue's address form;
// tests/gpu/test_planner_gpu.cu rejects any). The planner's 128-token chunk costs (src/moe/run_plan.h) count the
// same widths.
inline constexpr int kWsShortItemStep = 16;
constexpr bool moe_gemm_ws_short_items(int block_m, bool bf16_partials) {
  return block_m > kWsShortItemStep && !(block_m == 32 && bf16_partials);
}
constexpr int moe_gemm_ws_item_tokens(int rows, int block_m) {
  const int n = (rows + kWsShortItemStep - 1) / kWsShortItemStep * kWsShortItemStep;
  return n < block_m ? n : block_m;
}
constexpr int64_t moe_gemm_ws_record_bytes(int block_m) { return MoeGemmWsRecord::kRowData + int64_t{8} * block_m; }
constexpr MoeGemmSmemLayout moe_gemm_ws_smem_layout(int block_m, int block_n, int block_k, int stages) {
  // A full and an empty mbarrier (8 B each) per stage, then one item record per stage.
  return with_tail(moe_gemm_smem_layout(block_m, block_n, block_k, stages, MoeActLayout::kSwizzled128),
                   int64_t{2} * stages * 8, stages * moe_gemm_ws_record_bytes(block_m));
}
// Largest stage count of a warp-specialized tile within `budget` bytes (each stage also brings its mbarriers
// and its item record, so one stage's whole layout is the unit); 0 when not even one fits.
constexpr int moe_gemm_ws_max_stages(int block_m, int block_n, int block_k, int64_t budget) {
  const int64_t per = moe_gemm_ws_smem_layout(block_m, block_n, block_k, 1).total;
  return per > 0 ? static_cast<int>(budget / per) : 0;
}
// Stages of a warp-specialized tile: as many as fit one block per SM, at most kWsMaxStages.
constexpr int moe_gemm_ws_planned_stages(int block_m, int block_n, int block_k, int cc) {
  const int s = moe_gemm_ws_max_stages(block_m, block_n, block_k, moe_gemm_stage_budget(1, cc));
  return s < kWsMaxStages ? s : kWsMaxStages;
}
// Registers per thread of the producer and the consumer warpgroups after setmaxnreg (0: no reallocation; the
// launch's count, 96 at 640 threads, for both). A 128-token item's accumulators are 64 per consumer thread, which
// with the dequantized fragments do not fit 96: the producer gives its registers to the consumers. setmaxnreg.inc
// draws only on what the block's own warps released (PTX ISA "setmaxnreg": a pool per CTA; it blocks until the
// pool holds enough), so the consumers' gain must not exceed the producer's loss: 128 x (96 - 64) = 512 x (104 - 96).
// (112 would need a producer of 32 registers; with 64 it blocked forever on the H200.)
struct WsRegisters {
  int producer, consumer;
};
constexpr WsRegisters moe_gemm_ws_registers(int block_m) { return block_m > 64 ? WsRegisters{64, 104} : WsRegisters{0, 0}; }

template <int kBlockM_, int kBlockN_, int kBlockK_, int kStages_, int kArch_ = 90>
struct MoeGemmWsConfig {
  static constexpr int kBlockM = kBlockM_;  // tokens per work item = the wgmma's largest N (16, 32, 64 or 128)
  static constexpr int kBlockN = kBlockN_;  // weight rows per work item: 64 per consumer warpgroup
  static constexpr int kBlockK = kBlockK_;  // K per pipeline stage (multiple of 64)
  static constexpr int kStages = kStages_;  // stages in flight (mbarrier pipeline depth)
  static constexpr int kArch = kArch_;      // 90: wgmma is sm_90a only
  static constexpr int kWarps = kBlockN / 16;                 // consumer warps (16 weight rows each)
  static constexpr int kConsumerThreads = kWarps * 32;
  static constexpr int kProducerThreads = kWsProducerThreads;  // one warpgroup
  static constexpr int kThreads = kProducerThreads + kConsumerThreads;
  static constexpr int kMinBlocksPerSm = 1;
  static constexpr int kNTiles8 = kBlockM / 8;
  static constexpr bool kWgmma = true;
  static constexpr WsRegisters kRegs = moe_gemm_ws_registers(kBlockM);
  static constexpr MoeGemmSmemLayout kSmem = moe_gemm_ws_smem_layout(kBlockM, kBlockN, kBlockK, kStages);
  static constexpr int64_t kSmemBytes = kSmem.total;
  static constexpr ArchInfo kArchInfo = arch_info(kArch);

  static_assert(kArch == 90, "warp-specialized tiles use wgmma: sm_90a only");
  static_assert(kBlockM == 8 || kBlockM == 16 || kBlockM == 32 || kBlockM == 64 || kBlockM == 128,
                "kBlockM: a wgmma N that kernels/wgmma.cuh instantiates");
  // Registers per thread at launch: one block per SM, the 65,536 split over its threads in warp units of 256.
  static constexpr int kLaunchRegs = 65536 / kThreads / 8 * 8;
  static_assert(kRegs.producer == 0 ||
                    (kProducerThreads * (kLaunchRegs - kRegs.producer) >= kConsumerThreads * (kRegs.consumer - kLaunchRegs) &&
                     kRegs.producer <= kLaunchRegs && kRegs.consumer >= kLaunchRegs && kRegs.producer % 8 == 0 &&
                     kRegs.consumer % 8 == 0 && kRegs.producer >= 24 && kRegs.consumer <= 256),
                "setmaxnreg: the consumers may take only what the producer released (multiples of 8 in [24, 256])");
  static_assert(kBlockN % 64 == 0 && kBlockN >= 64 && kBlockN <= 256, "kBlockN: 1 to 4 consumer warpgroups");
  static_assert(kBlockK % 64 == 0 && kBlockK >= 64, "kBlockK: multiple of 64");
  static_assert(kStages >= 2, "kStages: at least 2 for the copy to overlap the math");
  static_assert(kSmemBytes + kArchInfo.reserved_smem_per_block <= kArchInfo.smem_per_sm &&
                    kSmemBytes <= kArchInfo.smem_per_block,
                "config does not fit the architecture's shared memory");
  static_assert(kSmem.act_offset % 1024 == 0 && kSmem.stage_bytes % 1024 == 0,
                "wgmma: every stage's activation slices must start on a 1024-byte swizzle atom");
  static_assert(kSmem.barrier_offset % 8 == 0, "mbarriers are 8-byte aligned");
  static_assert(kSmem.epilogue_offset % 16 == 0 && moe_gemm_ws_record_bytes(kBlockM) % 16 == 0,
                "item records: 16-byte aligned");
};

}  // namespace fp4moe
