// The data types that describe a grouped-GEMM kernel config: its family and its shared-memory layout, byte by byte.
// SPDX-License-Identifier: Apache-2.0
//
// The functions that fill them (the one constexpr layout the kernels carve their buffers from) live with the
// kernels in kernels/moe_gemm_layout.h; the planner (fp4moe/planner.h) returns them.
#pragma once

#include <cstdint>

namespace fp4moe {

// The two kernel families fp4moe ships.
enum class KernelFamily {
  // Every thread copies and computes: a cp.async multistage pipeline, 2 or 3 blocks per SM on the 228 KB
  // parts (one on the 100 KB parts); mma.sync (sm_80..sm_120), wgmma on sm_90 for 32+ tokens per item.
  kMultistage,
  // sm_90a only: a producer warpgroup issues every copy, block_n / 64 consumer warpgroups dequantize and run
  // wgmma, mbarriers hand the stages over; one block per SM.
  kWarpSpecialized,
};
inline const char* kernel_family_name(KernelFamily f) {
  return f == KernelFamily::kWarpSpecialized ? "warp-specialized" : "multistage";
}

// How a stage's bf16 activation tile sits in shared memory; the MMA instruction decides.
enum class MoeActLayout {
  kPaddedRows,   // mma.sync + ldmatrix: token rows of block_k bf16, each padded by 16 B so the 8 rows one
                 // ldmatrix reads fall in different banks
  kSwizzled128,  // wgmma (sm_90a): K-major slices of 64 bf16 (128 B) per token, 8-row atoms of 1024 B with the
                 // 128-byte swizzle the tensor cores read through a matrix descriptor; no padding
};

// One kernel config's shared memory, every byte accounted for.
struct MoeGemmSmemLayout {
  int64_t weight_tile = 0;     // 4-bit weights of one stage: block_n x block_k / 2
  int64_t scale_tile = 0;      // UE5M3 block scales of one stage: block_n x block_k / 16
  int64_t act_tile = 0;        // bf16 activations of one stage: block_m rows x block_k (unpadded)
  int64_t act_padding = 0;     // kPaddedRows: 16 B per activation row; else 0
  int64_t stage_bytes = 0;     // sum of the four above
  int stages = 0;
  int64_t pipeline = 0;        // stages x stage_bytes
  int64_t epilogue = 0;        // warp-specialized: one item record per stage, after the mbarriers; else 0
  int64_t barriers = 0;        // mbarriers (cp.async groups need none: 0)
  int64_t routing = 0;         // the decode tiles: the pairs' routing tables, computed in the block; else 0
  int64_t total = 0;           // dynamic shared memory the kernel requests
  // offsets of stage s's buffers: base(s) = s * stage_bytes
  int64_t weight_offset = 0, scale_offset = 0, act_offset = 0;
  // after the stages: the mbarriers, then the item records, then the routing tables
  int64_t barrier_offset = 0, epilogue_offset = 0, routing_offset = 0;
  MoeActLayout act_layout = MoeActLayout::kPaddedRows;
  int64_t act_row_stride = 0;  // bytes between activation rows (kSwizzled128: inside one 64-wide K slice)
  int64_t act_slice_bytes = 0; // kSwizzled128: bytes of one 64-wide K slice of all block_m rows (0 otherwise)
};

}  // namespace fp4moe
