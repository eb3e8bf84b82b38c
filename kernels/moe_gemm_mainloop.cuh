// The consumer side of a grouped-GEMM K step: a lane's view of a pipeline slot, the wgmma group, the smem guard.
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>

#include "kernels/moe_gemm_layout.h"
#include "kernels/nvfp4_dequant_mma.cuh"
#include "kernels/ptx.cuh"
#include "kernels/weight_pack.h"
#include "kernels/wgmma.cuh"

namespace fp4moe::kernels {

// One 64-wide K group of a stage on the wgmma path: four m64nNk16 steps, A = the four dequantized
// fragments, B = the group's swizzled activation slice (k16 step s starts 32 B into each 128-byte row,
// descriptors desc[s]). In the multistage tiles N is the tile's kBlockM for every item, however few tokens it
// holds: choosing N per item (8/16/32/64) put the wgmmas behind a branch, and ptxas then injected a
// warpgroup.arrive before each (warning C7519), which cost more than the padding rows a fixed N multiplies
// (docs/perf/history.md has the measurement). The warp-specialized 32-, 64- and 128-token tiles choose N per item
// with a whole K loop per N (kernels/moe_gemm_warpspecialized_sm90.cuh), so no wgmma sits behind a branch.
template <int N>
__device__ __forceinline__ void wgmma_k64(float (&d)[N / 2], const uint32_t (&a)[4][4], const uint64_t (&desc)[4], int scale_first) {
#pragma unroll
  for (int s = 0; s < 4; ++s) wgmma::WgmmaRs<N>::mma(d, a[s], desc[s], s == 0 ? scale_first : 1);
}

// Defensive: a launch with less dynamic shared memory than the planner's layout (kTotal bytes) would corrupt
// memory. %dynamic_smem_size is the launch's dynamic shared memory (PTX ISA "Special Registers:
// %dynamic_smem_size", https://docs.nvidia.com/cuda/parallel-thread-execution/#special-registers-dynamic-smem-size).
// kSwizzleAtoms: wgmma reads the activations through 1024-byte swizzle atoms, which must sit on 1024-byte addresses.
template <int64_t kTotal, bool kSwizzleAtoms>
__device__ __forceinline__ void trap_unless_smem_holds(const uint8_t* smem) {
  uint32_t dyn_smem;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn_smem));
  if (dyn_smem < static_cast<uint32_t>(kTotal)) __trap();
  if (kSwizzleAtoms && ptx::smem_addr(smem) % 1024 != 0) __trap();
}

// A consumer lane's view of the pipeline slot its warp is multiplying: the lane's weights and scales (its warp's
// 16 weight rows), its ldmatrix activation row (token lane % 8, k offset 8 * (lane / 8); the mma.sync path) and
// the slot's wgmma activation descriptor, moved to the next slot by next() and back to slot 0 by wrap() (the
// caller knows when its slot counter wraps). Derived from the slot every step instead, ptxas re-derives the
// lane offsets, the shared window's base and the descriptor encoding each time (12 more instructions per stage
// in the warp-specialized loop).
template <class Cfg>
struct LaneSlot {
  static constexpr MoeGemmSmemLayout L = Cfg::kSmem;
  static constexpr int kGroups = Cfg::kBlockK / pack::kGroupK;
  static constexpr int64_t kRing = int64_t{Cfg::kStages} * L.stage_bytes;
  const uint8_t* w;
  const uint8_t* s;
  const uint8_t* x;  // (the mma.sync path only)
  uint64_t desc = 0;  // (the wgmma path only)

  __device__ __forceinline__ LaneSlot(const uint8_t* smem, int warp, int lane)
      : w(smem + L.weight_offset + warp * kGroups * pack::kWeightGroupBytes + lane * 16),
        s(smem + L.scale_offset + warp * kGroups * pack::kScaleGroupBytes + (lane >> 2) * 8),
        x(smem + L.act_offset + (lane & 7) * L.act_row_stride + (lane >> 3) * 16) {
    if constexpr (Cfg::kWgmma) desc = wgmma::desc_k_major_sw128(ptx::smem_addr(smem + L.act_offset));
  }
  // This lane's 16 weight bytes (4 packed words) and 8 scale bytes of K group g of the slot.
  __device__ __forceinline__ uint4 weights(int g) const {
    return *reinterpret_cast<const uint4*>(w + g * pack::kWeightGroupBytes);
  }
  __device__ __forceinline__ uint2 scales(int g) const {
    return *reinterpret_cast<const uint2*>(s + g * pack::kScaleGroupBytes);
  }
  __device__ __forceinline__ void next() {
    w += L.stage_bytes;
    s += L.stage_bytes;
    x += L.stage_bytes;
    if constexpr (Cfg::kWgmma) desc = wgmma::desc_advance(desc, L.stage_bytes);
  }
  __device__ __forceinline__ void wrap() {
    w -= kRing;
    s -= kRing;
    x -= kRing;
    if constexpr (Cfg::kWgmma) desc -= kRing >> 4;
  }
};

// Dequantizes K group g (64 wide) of this warp's 16 weight rows (wq, sq: this lane's 16 weight bytes and 8 scale
// bytes of the group, read from the stage: LaneSlot) into the wgmma A fragments and issues the group's four wgmmas on the activations of descriptor act_desc (one commit
// group). The caller waits for it (wgmma::wait) before it reuses the A registers' next group.
// Warpgroup wg = warps 4wg..4wg+3 = weight rows 64wg..64wg+63: warp w's dequantized fragments are the wgmma A
// fragment of rows 16w..16w+15 unchanged. scale_first = 0 starts the accumulators afresh (an item's first k16 step).
// N: the wgmma's token count, Cfg::kBlockM or (a warp-specialized tile's short items: a multiple of 16) less; the
// first N / 2 accumulators are then the item's (the D fragment of n-tile j is registers 4j..4j+3 at every N).
template <class Cfg, int N = Cfg::kBlockM>
__device__ __forceinline__ void wgmma_group(const uint4 wq, const uint2 sq, uint64_t act_desc, int g,
                                            float (&accw)[Cfg::kBlockM / 2], int scale_first, const DequantMul& mul) {
  static_assert(N <= Cfg::kBlockM && N % 8 == 0, "N: at most the tile's tokens");
  const uint32_t words[4] = {wq.x, wq.y, wq.z, wq.w};
  // The 128-token tile (104 registers per consumer thread, 64 of them accumulators) converts and multiplies half a
  // group at a time: two k16 steps' fragments (8 registers), waited for before the next half reuses them (with the
  // whole group's 16 in flight ptxas spills: the cubin check forbids it). The others convert the whole group, then
  // issue its four wgmmas as one commit group.
  constexpr bool kHalves = Cfg::kBlockM > 64;
  uint32_t a[4][4];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int f = kHalves ? 0 : 2 * h;  // this half's first fragment
    const uint32_t s_g = scale_pair2(sq.x, h, mul), s_g8 = scale_pair2(sq.y, h, mul);
    dequant_a_fragments(words[2 * h], words[2 * h + 1], s_g, s_g8, mul, a[f], a[f + 1]);
    if constexpr (kHalves) {
      wgmma::fence();
#pragma unroll
      for (int s = 0; s < 2; ++s)
        wgmma::WgmmaRs<N>::mma(*reinterpret_cast<float(*)[N / 2]>(&accw[0]), a[s],
                               wgmma::desc_advance(act_desc, g * Cfg::kSmem.act_slice_bytes + (2 * h + s) * 32),
                               h == 0 && s == 0 ? scale_first : 1);
      wgmma::commit();
      if (h == 0) wgmma::wait<0>();
    }
  }
  if constexpr (!kHalves) {
    uint64_t desc[4];
#pragma unroll
    for (int s = 0; s < 4; ++s) desc[s] = wgmma::desc_advance(act_desc, g * Cfg::kSmem.act_slice_bytes + s * 32);
    wgmma::fence();
    wgmma_k64<N>(*reinterpret_cast<float(*)[N / 2]>(&accw[0]), a, desc, scale_first);
    wgmma::commit();
  }
}

}  // namespace fp4moe::kernels
