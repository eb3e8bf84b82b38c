// Warp-specialized grouped W4A16 GEMM for sm_90a: a producer warpgroup streams the stages, consumer warpgroups
// dequantize and run wgmma, mbarriers hand each stage over; same work items, layouts and epilogues as the multistage
// kernels (kernels/moe_gemm_multistage.cuh).
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/moe_gemm_epilogue.cuh"
#include "kernels/moe_gemm_layout.h"
#include "kernels/moe_gemm_mainloop.cuh"
#include "kernels/moe_gemm_params.cuh"
#include "kernels/moe_gemm_producer.cuh"
#include "kernels/ptx.cuh"

namespace fp4moe::kernels {

// The wgmma widths of the 32-, 64- and 128-token tiles' items of fewer rows: N = kWsShortItemStep, twice that, ...
// up to the tile (wgmma takes any multiple of 8 up to 256 with bf16 inputs; PTX ISA "wgmma.mma_async", the m64nNk16
// shapes). Each width is a whole K loop of its own, so f(integral_constant<N>) with N = moe_gemm_ws_item_tokens(rows,
// kMax), the smallest that holds `rows` (tests/unit/test_planner.cc checks that function's widths).
template <int kMax, int N = kWsShortItemStep, class F>
__device__ __forceinline__ void with_short_item_n(int rows, F&& f) {
  static_assert(kMax % kWsShortItemStep == 0, "the tile is a whole number of steps");
  if constexpr (N >= kMax) {
    f(std::integral_constant<int, kMax>{});
  } else {
    if (rows <= N) f(std::integral_constant<int, N>{});
    else with_short_item_n<kMax, N + kWsShortItemStep>(rows, f);
  }
}

// One block per SM (Cfg = MoeGemmWsConfig). Threads 0..127 (the producer warpgroup) issue every cp.async of a
// stage and signal its arrival on the stage's "full" mbarrier with cp.async.mbarrier.arrive.noinc, so no
// thread waits for its own copies. Consumer warp w (threads 128 + 32w ..) owns weight rows 16w..16w+15 of the
// tile, as in moe_gemm_body; it waits on "full", and releases the stage on its "empty" mbarrier once the
// wgmmas reading it have completed. That release is deferred to the next stage's first wgmma wait, so a
// stage's last wgmma group stays in flight while the next stage starts (moe_gemm_body drains every stage
// before its block-wide barrier instead).
template <class Cfg, MoeEpilogue kEpi>
__device__ __forceinline__ void moe_gemm_ws_body(const MoeGemmParams& p, const MoeGemmExtras& ex) {
  constexpr int kStages = Cfg::kStages, kGroups = Cfg::kBlockK / pack::kGroupK;
  constexpr MoeGemmSmemLayout L = Cfg::kSmem;
  extern __shared__ __align__(128) uint8_t smem[];  // (1024-byte aligned in practice: checked below)
  trap_unless_smem_holds<L.total, true>(smem);

  const uint32_t bar0 = ptx::smem_addr(smem + L.barrier_offset);
  // Item records (kernels/moe_gemm_layout.h, moe_gemm_ws_record_bytes): one per stage slot, written with an item's last
  // stage by the producer, read by the consumers' epilogue before they release that slot.
  constexpr int64_t kRecBytes = moe_gemm_ws_record_bytes(Cfg::kBlockM);
  constexpr ItemRecord kRecord = kEpi == MoeEpilogue::kSwiGLU ? ItemRecord::kHeader : ItemRecord::kRows;
  // Items that multiply their rows rounded up to kWsShortItemStep (moe_gemm_ws_short_items says which kernels and
  // why; the producer copies each item's rows with its first stage for that).
  constexpr bool kShortItems = moe_gemm_ws_short_items(Cfg::kBlockM, kEpi == MoeEpilogue::kFinalizeStoreBf16);
  auto record = [&](int slot) { return smem + L.epilogue_offset + slot * kRecBytes; };
  auto full = [&](int slot) { return bar0 + 8u * slot; };
  auto empty = [&](int slot) { return bar0 + 8u * (kStages + slot); };
  const int tid = threadIdx.x;
  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
      ptx::mbarrier_init(full(s), Cfg::kProducerThreads);  // one (asynchronous) arrival per producer thread
      ptx::mbarrier_init(empty(s), Cfg::kWarps);           // one arrival per consumer warp
    }
  }
  __syncthreads();  // the barriers are initialised before any thread waits on or arrives at them

  // Programmatic dependent launch, as in moe_gemm_body: gate_up waits for the routing tables before
  // anything; down's producer issues its first weight copies before it waits for gate_up's activations.
  if constexpr (kEpi == MoeEpilogue::kSwiGLU) {
    ptx::griddep_wait();
    ptx::griddep_launch_dependents();
  }
  const int n_tiles = p.n / Cfg::kBlockN, splits = p.k_splits, k_tiles = p.k / Cfg::kBlockK / splits;
  const int num_items = *p.num_chunks * n_tiles * splits;
  const int my_items = blockIdx.x < num_items ? (num_items - 1 - blockIdx.x) / gridDim.x + 1 : 0;
  const int total_steps = my_items * k_tiles;  // the producer's; the consumers walk the same items and steps
  const BlockRouting no_routing{};  // (the routing kernel's tables: no fused routing here)

  // The role, read from lane 0 with a shuffle so that ptxas knows it is warp-uniform: otherwise it treats the
  // consumer path as divergent and serializes its wgmmas (info C7518), as CUTLASS's kernels also avoid.
  const int warpgroup = __shfl_sync(0xFFFFFFFFu, tid / 128, 0);
  if (warpgroup == 0) {
    // ---- producer warpgroup ------------------------------------------------------------------------
    if constexpr (Cfg::kRegs.producer != 0) ptx::setmaxnreg<false, Cfg::kRegs.producer>();
    TileProducer<Cfg, Cfg::kProducerThreads, false, kRecord, kShortItems> prod(n_tiles, splits);
    auto produce = [&](int slot, bool weights, bool acts) {
      prod.produce(p, no_routing, smem + slot * L.stage_bytes, tid, k_tiles, weights, acts, record(slot));
    };
    // The slot's copies are issued: the full barrier counts this thread's arrival once they have landed.
    auto signal_full = [&](int slot) {
#if defined(FP4MOE_WS_PLAIN_ARRIVE)  // debug build for compute-sanitizer racecheck: wait, then a plain arrive
      ptx::cp_async_wait_all();
      ptx::mbarrier_arrive(full(slot));
#else
      ptx::cp_async_mbarrier_arrive_noinc(full(slot));
#endif
    };
    int st = 0;
    if constexpr (kEpi != MoeEpilogue::kSwiGLU) {
      const int first = total_steps < kStages ? total_steps : kStages;
      for (int s = 0; s < first; ++s) produce(s, true, false);
      ptx::griddep_wait();
      ptx::griddep_launch_dependents();
      prod.restart();
      for (; st < first; ++st) {
        produce(st, false, true);
        signal_full(st);
      }
    }
    // Step st goes to slot st % kStages as that slot's use st / kStages, both advanced step by step.
    int slot = st % kStages, use = st / kStages;
    for (; st < total_steps; ++st) {
      // Use u of a slot waits until the consumers released use u - 1 (the empty barrier's phase u - 1).
      if (use > 0) ptx::mbarrier_wait(empty(slot), (use - 1) & 1);
      produce(slot, true, true);
      signal_full(slot);
      if (++slot == kStages) slot = 0, ++use;
    }
    ptx::cp_async_wait_all();
    return;
  }

  // ---- consumer warpgroups --------------------------------------------------------------------------
  if constexpr (Cfg::kRegs.consumer != 0) ptx::setmaxnreg<true, Cfg::kRegs.consumer>();
  if constexpr (kEpi != MoeEpilogue::kSwiGLU) ptx::griddep_launch_dependents();
  const int ctid = tid - Cfg::kProducerThreads, warp = ctid >> 5, lane = ctid & 31;
  float acc[Cfg::kNTiles8][4];
#pragma unroll
  for (int j = 0; j < Cfg::kNTiles8; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
  float(&accw)[Cfg::kBlockM / 2] = *reinterpret_cast<float(*)[Cfg::kBlockM / 2]>(&acc[0][0]);

  int held = -1;  // slot whose last wgmma group may still be in flight (released after the next wait)
  auto release = [&](int slot) {
    __syncwarp();  // every lane's reads of the slot are done
    if (lane == 0) ptx::mbarrier_arrive(empty(slot));
  };
  // The next step's slot and the parity of its current use, advanced step by step (not st % kStages and
  // st / kStages, whose divisions cost the K loop a dozen integer instructions per step).
  int slot = 0;
  uint32_t parity = 0;
  LaneSlot<Cfg> cur(smem, warp, lane);  // this lane's view of slot `slot`
  for (ItemWalk w(blockIdx.x, gridDim.x, n_tiles, splits); w.item < num_items; w.next(gridDim.x)) {
    // The K loop keeps the accumulators in flight from one step to the next; the epilogue sits outside it,
    // after wait<0>. (With the epilogue inside the loop, behind a branch, ptxas drained every step: C7517.)
    // N: the wgmma's tokens for this item (a whole loop per N, so no wgmma sits behind a per-step branch).
    auto k_loop = [&](auto n_tokens) {
    constexpr int N = decltype(n_tokens)::value;
    for (int kt = 0; kt < k_tiles; ++kt) {
      ptx::mbarrier_wait(full(slot), parity);
      // The producer's cp.async wrote the stage through the generic proxy; this thread's wgmmas read it
      // through the async proxy: a proxy fence after the barrier's acquire orders the two (wgmma.cuh).
      wgmma::fence_proxy_async_shared();
      // Every K group's weights and scales are read from shared memory up front, so the later groups' loads
      // are not on the dequantizer's critical path.
      // (The 128-token tile loads each group's just before it: its consumers have no registers for both.)
      constexpr int kAhead = Cfg::kBlockM > 64 ? 1 : kGroups;
      uint4 wq[kGroups];
      uint2 sq[kGroups];
#pragma unroll
      for (int g = 0; g < kAhead; ++g) {
        wq[g] = cur.weights(g);
        sq[g] = cur.scales(g);
      }
#pragma unroll
      for (int g = 0; g < kGroups; ++g) {
        if (g >= kAhead) wq[g] = cur.weights(g), sq[g] = cur.scales(g);
        wgmma_group<Cfg, N>(wq[g], sq[g], cur.desc, g, accw, (kt == 0 && g == 0) ? 0 : 1, ex.dequant_mul);
        // Group g - 1 (or the previous stage's last group) has completed. With one K group per stage (the small-K
        // tiles) every stage dequantizes into the same A registers, which the group still in flight reads: PTX ISA
        // "wgmma.mma_async" makes writing them before a wait_group that covers it undefined (measured: wrong
        // sums). So those tiles wait for their group here; with two or more groups per stage, consecutive groups
        // use different registers and one stays in flight.
        if constexpr (kGroups == 1 || Cfg::kBlockM > 64) wgmma::wait<0>();
        else wgmma::wait<1>();
        if (g == 0 && held >= 0) release(held);
      }
      held = slot;
      cur.next();
      if (++slot == kStages) {
        slot = 0, parity ^= 1;
        cur.wrap();
      }
    }
    };
    if constexpr (kShortItems) {
      // Items that choose their width: an item of fewer rows (an expert's last, partial chunk, or its only one)
      // multiplies them rounded up to a multiple of kWsShortItemStep tokens, not the tile's (fewer MMAs; the
      // padding rows cost as much as real ones). Its rows come with its first stage; the shuffle tells ptxas the
      // choice is warp-uniform (a divergent-looking branch around wgmmas serializes them).
      ptx::mbarrier_wait(full(slot), parity);
      const int first_rows =
          __shfl_sync(0xFFFFFFFFu, *reinterpret_cast<const int32_t*>(record(slot) + MoeGemmWsRecord::kFirstRows), 0);
      with_short_item_n<Cfg::kBlockM>(first_rows, k_loop);
    } else {
      k_loop(std::integral_constant<int, Cfg::kBlockM>{});
    }
    wgmma::wait<0>();  // the item's accumulators are complete
#pragma unroll
    for (int i = 0; i < Cfg::kBlockM / 2; ++i) wgmma::fence_operand(accw[i]);
    // The item's record sits in the slot of its last stage (`held`), which is released once it is read.
    using R = MoeGemmWsRecord;
    const uint8_t* rec = record(held);
    const int row0 = *reinterpret_cast<const int32_t*>(rec + R::kRow0), rows = *reinterpret_cast<const int32_t*>(rec + R::kRows);
    EpilogueRows pre{*reinterpret_cast<const float*>(rec + R::kAlpha), {}, {}};
    if constexpr (kRecord == ItemRecord::kRows) {
#pragma unroll
      for (int h = 0; h < (Cfg::kBlockM + 31) / 32; ++h) {
        if (lane + 32 * h < rows) {
          pre.lane_weight[h] = *reinterpret_cast<const float*>(rec + R::kRowData + 4 * (lane + 32 * h));
          pre.lane_pair[h] = *reinterpret_cast<const int32_t*>(rec + R::kRowData + 4 * (Cfg::kBlockM + lane + 32 * h));
        }
      }
    }
    release(held);
    held = -1;
    store_item<Cfg, kEpi, false, true>(p, no_routing, acc, w.nt, w.q, -1, row0, rows, warp, lane, pre);
  }
}

// Compiled for sm_90a only (Cfg::kArch == 90); other targets get an empty kernel.
template <class Cfg, MoeEpilogue kEpi>
__global__ void __launch_bounds__(Cfg::kThreads, 1) moe_gemm_ws_kernel(const MoeGemmParams p, const MoeGemmExtras ex) {
#if defined(__CUDA_ARCH__)
  if constexpr (__CUDA_ARCH__ / 10 == Cfg::kArch) moe_gemm_ws_body<Cfg, kEpi>(p, ex);
#endif
}

}  // namespace fp4moe::kernels
