// Grouped W4A16 GEMM for MoE experts: NVFP4 weights (prepacked) x bf16 activations, fp32 accumulation,
// with the gate_up (SwiGLU) or down (router-weighted finalize) epilogue fused. Persistent blocks walk a
// device-built list of (expert chunk, N tile, K split) work items; a cp.async pipeline runs across item boundaries.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "fp4moe/moe_gemm_config.h"
#include "fp4moe/weight_pack.h"
#include "kernels/moe_routing_warp.cuh"
#include "kernels/nvfp4_dequant_mma.cuh"
#include "kernels/ptx.cuh"
#include "kernels/wgmma.cuh"

namespace fp4moe::kernels {

enum class MoeEpilogue {
  kSwiGLU,          // gate_up: out[row, j] = bf16(silu(alpha * gate_j) * alpha * up_j), permuted rows
  kFinalizeStore,   // down, deterministic: partial[row, h] = alpha * router_weight * acc (fp32), summed later in fixed order
  kFinalizeAtomic,  // down, fast: acc32[token, h] += alpha * router_weight * acc (fp32 atomics, order not fixed)
};

struct MoeGemmParams {
  const uint8_t* weights;      // prepacked [E, N/16, K/64, 512 B]
  const uint8_t* scales;       // prepacked [E, N/16, K/64, 64 B] UE5M3
  const float* alpha;          // [E] 2^9 / global_scale
  int32_t n, k;                // weight rows (2I for gate_up, H for down) and the reduction size
  const __nv_bfloat16* x;      // activations: hidden [T, K] (gate_up, gathered) or act [P, K] (down)
  const int32_t* perm_pair;    // [P]
  int32_t top_k;
  bool gather_tokens;          // gate_up: row r reads hidden[perm_pair[r] / top_k]; down: row r reads x[r]
  const int32_t* num_chunks;   // [1] from the routing kernel
  const int32_t* chunk_expert;
  const int32_t* chunk_start;
  const int32_t* chunk_rows;
  int32_t k_splits;            // K ranges per (chunk, N tile) item: 1, or (down at small T) 2/4/8 dividing K / kBlockK
  __nv_bfloat16* act_out;      // kSwiGLU: [P, N/2]
  float* partial_out;          // kFinalizeStore: [k_splits, P, N]; kFinalizeAtomic: [T, N]
  int64_t split_stride;        // kFinalizeStore: floats between the k_splits partial buffers (P * N)
  const float* topk_weights;   // [T * k] router weights (finalize epilogues)
};
// (The routing inputs of the kFusedRouting kernels are a second kernel parameter, not members of this struct:
// growing it, by one int, changed the code ptxas generates for every kernel, 2-3% slower on the H200.)

// One 64-wide K group of a stage on the wgmma path: four m64nNk16 steps, A = the four dequantized
// fragments, B = the group's swizzled activation slice (k16 step s starts 32 B into each 128-byte row,
// descriptors desc[s]). N is the tile's kBlockM for every item, however few tokens it holds: choosing N per
// item (8/16/32/64) put the wgmmas behind a branch, and ptxas then injected a warpgroup.arrive before each
// (warning C7519); on the H200 the fixed N was 5-9% faster at T = 512..4096 though it multiplies padding
// rows (the tensor cores are not what limits these kernels).
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
// caller knows when its slot counter wraps). Derived from the slot every step instead, ptxas re-derived the
// lane offsets, the shared window's base and the descriptor encoding each time (warp-specialized loop 189 ->
// 177 instructions per stage; H200, 2026-11-30f call 4: T=8 2.3%, T=512 3% faster).
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
template <class Cfg>
__device__ __forceinline__ void wgmma_group(const uint4 wq, const uint2 sq, uint64_t act_desc, int g,
                                            float (&accw)[Cfg::kBlockM / 2], int scale_first, const DequantMul& mul) {
  const uint32_t words[4] = {wq.x, wq.y, wq.z, wq.w};
  uint32_t a[4][4];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const uint32_t s_g = scale_pair2(sq.x, h, mul), s_g8 = scale_pair2(sq.y, h, mul);
    dequant_a_fragments(words[2 * h], words[2 * h + 1], s_g, s_g8, mul, a[2 * h], a[2 * h + 1]);
  }
  uint64_t desc[4];
#pragma unroll
  for (int s = 0; s < 4; ++s) desc[s] = wgmma::desc_advance(act_desc, g * Cfg::kSmem.act_slice_bytes + s * 32);
  wgmma::fence();
  wgmma_k64<Cfg::kBlockM>(accw, a, desc, scale_first);
  wgmma::commit();
}

// What store_item needs of an item besides its accumulators with kLaneRows (the warp-specialized kernels read
// it from the item record in shared memory): alpha of the item's expert, and the pair index and router weight
// of rows lane and lane + 32.
struct EpilogueRows {
  float alpha;
  int32_t lane_pair[2];
  float lane_weight[2];
};
// The epilogue of one work item (N tile nt, K range q of expert e's chunk: rows row0 .. row0 + rows - 1),
// straight from this warp's accumulators (mma.sync C fragments; on the wgmma path the same registers).
// kLaneRows (the warp-specialized kernels): alpha and the down epilogue's per-row data come in `pre`, lane l
// holding rows l and l + 32, handed out with shuffles, and no 8-token tile past the item's rows is visited.
// (With their 96 registers, per-thread loads of all 16 rows spilled, and loading them tile by tile cost two
// dependent global round trips per tile: ncu, long-scoreboard stalls led the down kernel's at T=4096.)
template <class Cfg, MoeEpilogue kEpi, bool kFusedRouting, bool kLaneRows = false>
__device__ __forceinline__ void store_item(const MoeGemmParams& p, const WarpRouting& wr, float (&acc)[Cfg::kNTiles8][4],
                                           int nt, int q, int e, int row0, int rows, int warp, int lane,
                                           const EpilogueRows& pre = EpilogueRows{}) {
  constexpr int kBN = Cfg::kBlockN;
  float* partial = p.partial_out;
  if constexpr (kEpi == MoeEpilogue::kFinalizeStore) partial += q * p.split_stride;
  static_assert(!(kLaneRows && kFusedRouting), "kLaneRows: the routing kernel's tables");
  static_assert(!kLaneRows || Cfg::kBlockM <= 64, "kLaneRows: two rows per lane");
  const float alpha = kLaneRows ? pre.alpha : p.alpha[e];
  const int g8 = lane >> 2, t4 = lane & 3;
#pragma unroll
  for (int j = 0; j < Cfg::kNTiles8; ++j) {
    if constexpr (kLaneRows)
      if (j * 8 >= rows) break;  // warp-uniform
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const int m = j * 8 + t4 * 2 + c;  // token row inside the chunk
      // down: looked up before the branch (warp-uniform shuffles); the pair only for the atomic epilogue
      [[maybe_unused]] int32_t fused_pair = 0;
      [[maybe_unused]] float fused_weight = 0.0f;
      if constexpr (kFusedRouting && kEpi != MoeEpilogue::kSwiGLU) fused_weight = wr.router_weight(row0 + min(m, rows - 1));
      if constexpr (kFusedRouting && kEpi == MoeEpilogue::kFinalizeAtomic) fused_pair = wr.pair(row0 + min(m, rows - 1));
      // kLaneRows: row m's data from lane m % 32 (every lane shuffles, before the branch; j * 8 < 32 decides
      // the half for the whole warp, as t4 * 2 + c < 8).
      [[maybe_unused]] int32_t row_pair = 0;
      [[maybe_unused]] float row_weight = 0.0f;
      if constexpr (kLaneRows && kEpi != MoeEpilogue::kSwiGLU) {
        row_weight = __shfl_sync(0xFFFFFFFFu, pre.lane_weight[j * 8 < 32 ? 0 : 1], m & 31);
        if constexpr (kEpi == MoeEpilogue::kFinalizeAtomic)
          row_pair = __shfl_sync(0xFFFFFFFFu, pre.lane_pair[j * 8 < 32 ? 0 : 1], m & 31);
      }
      if (m >= rows) continue;
      const int64_t prow = row0 + m;
      if constexpr (kEpi == MoeEpilogue::kSwiGLU) {
        // Rows g and g+8 of this warp's tile are gate and up of output column j_out.
        const float gate = alpha * acc[j][c], up = alpha * acc[j][2 + c];
        // silu(g) = g / (1 + e^-g). Where e^-g overflows (g < -88, or an fp32 accumulator that overflowed
        // to -inf) the limit is -0, not inf/inf = NaN; and a zero factor gives a (signed) zero even when
        // the other one overflowed, as the exact product would.
        const float ex = expf(-gate);
        const float silu = isinf(ex) ? copysignf(0.0f, gate) : gate / (1.0f + ex);
        const float act = (silu == 0.0f || up == 0.0f) ? copysignf(0.0f, silu) * copysignf(1.0f, up) : silu * up;
        const int64_t col = static_cast<int64_t>(nt) * (kBN / 2) + warp * 8 + g8;
        p.act_out[prow * (p.n / 2) + col] = __float2bfloat16_rn(act);
      } else {
        int32_t pair;
        float weight;
        if constexpr (kLaneRows) {
          pair = row_pair;  // (read by the atomic epilogue only)
          weight = row_weight;
        } else {
          pair = kFusedRouting ? fused_pair : p.perm_pair[prow];
          weight = kFusedRouting ? fused_weight : p.topk_weights[pair];
        }
        const float scale = alpha * weight;
        const int64_t h0 = static_cast<int64_t>(nt) * kBN + warp * 16 + g8;
        if constexpr (kEpi == MoeEpilogue::kFinalizeStore) {
          partial[prow * p.n + h0] = scale * acc[j][c];
          partial[prow * p.n + h0 + 8] = scale * acc[j][2 + c];
        } else {
          const int64_t tok = pair / p.top_k;
          atomicAdd(partial + tok * p.n + h0, scale * acc[j][c]);
          atomicAdd(partial + tok * p.n + h0 + 8, scale * acc[j][2 + c]);
        }
      }
    }
    if constexpr (!Cfg::kWgmma) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
  }
}

// The copies of one block's work items, stage by stage, issued by kPThreads threads (thread `tid`): the
// weights and block scales of kBlockN rows x kBlockK, and the activations of the item's token rows (gathered
// through perm_pair for gate_up; rows past the item's tokens zero-filled). Sources are set once per item (one
// chunk-table lookup, not one per stage) and advanced along K. Items run blockIdx.x, + gridDim.x, ...
// Item i = (tile i / splits, K range i % splits); tile t = (chunk t / n_tiles, N tile t % n_tiles).
// Thread assignment: a stage's weights of one 16-row tile are kGroups x 512 contiguous bytes in the prepacked
// layout and in shared memory alike, and kTPR threads copy each tile's run (chunk q + i * kTPR for thread q
// of the tile), so a thread's copies sit at compile-time offsets from one source and one destination: one
// address computation per stage instead of one per copy. Likewise its activation copies are whole rows
// apart (compile-time destination offsets), and rows past the item's tokens read a valid row with the
// copy's ignore-src predicate set, so no copy needs a per-stage select.
// kRecord (warp-specialized kernels): with the last stage of each item the producer also copies the item's
// record (row0, rows, alpha; with kRows each row's router weight and pair index: MoeGemmWsRecord) into `rec`,
// the record slot of that stage (MoeGemmSmemLayout::epilogue_offset); the stage's full barrier covers it.
enum class ItemRecord { kNone, kHeader, kRows };
template <class Cfg, int kPThreads, bool kFusedRouting, ItemRecord kRecord = ItemRecord::kNone>
struct TileProducer {
  static constexpr int kGroups = Cfg::kBlockK / pack::kGroupK;
  static constexpr int kRowTiles = Cfg::kBlockN / 16;                  // 16-row weight tiles per stage
  static constexpr int kTileChunks = kGroups * pack::kWeightGroupBytes / 16;  // 16-byte copies per tile per stage
  static constexpr int kTPR = kPThreads / kRowTiles;                   // copying threads per tile
  static constexpr int kSChunks = Cfg::kBlockN * Cfg::kBlockK / 16 / 16;  // scales
  static constexpr int kRowChunks = Cfg::kBlockK * 2 / 16;              // activations, per token row
  static constexpr int kXChunks = Cfg::kBlockM * kRowChunks;
  // Every divisibility and count this assignment relies on (tiles over threads, one scale copy per thread,
  // whole rows apart, one swizzle phase, at most 32 activation copies for x_zero's bits).
  static_assert(moe_gemm_copy_problem(Cfg::kBlockM, Cfg::kBlockN, Cfg::kBlockK, kPThreads, Cfg::kSmem.act_layout) == nullptr,
                "tile not served by the copy assignment (moe_gemm_copy_problem says why; the planner prints it)");
  static constexpr int kWPer = kTileChunks / kTPR;
  static constexpr int kXPer = (kXChunks + kPThreads - 1) / kPThreads;
  static constexpr int kXRowStep = kPThreads / kRowChunks;  // rows between a thread's activation copies

  int item, kt;  // the next copy's work item and K step inside it
  const uint8_t* w_src = nullptr;  // this thread's first weight chunk at the item's first K step
  const uint8_t* s_src = nullptr;
  const uint8_t* x_src[kXPer];     // this thread's activation chunks at the item's first K step (valid rows)
  uint32_t x_zero = 0;             // bit i: copy i's row is past the item's tokens (zero-filled, ignore-src)
  // kRecord: the item's chunk, expert and rows; kRows: thread tid < rows's pair (loaded at the item's start,
  // used at its last stage, so the load's latency is hidden)
  int rec_chunk = 0, rec_e = 0, rec_row0 = 0, rec_rows = 0;
  int32_t rec_pair = 0;
  static_assert(kRecord == ItemRecord::kNone || (!kFusedRouting && Cfg::kBlockM < kPThreads),
                "item records: the routing kernel's tables; one thread per row and one more for the header");

  __device__ __forceinline__ void begin_item(const MoeGemmParams& p, const WarpRouting& wr, int tid, int n_tiles,
                                             int splits, int k_tiles) {
    const int tile = item / splits, chunk = tile / n_tiles, nt = tile % n_tiles;
    const int64_t k0 = static_cast<int64_t>(item % splits) * k_tiles * Cfg::kBlockK;  // first K of the item's range
    int e, row0, rows;
    if constexpr (kFusedRouting) e = wr.expert(chunk), row0 = wr.start(chunk), rows = wr.rows(chunk);
    else e = p.chunk_expert[chunk], row0 = p.chunk_start[chunk], rows = p.chunk_rows[chunk];
    if constexpr (kRecord != ItemRecord::kNone) {
      rec_chunk = chunk, rec_e = e, rec_row0 = row0, rec_rows = rows;
      if constexpr (kRecord == ItemRecord::kRows)
        if (tid < rows) rec_pair = p.perm_pair[row0 + tid];
    }
    {
      const int r = tid / kTPR, q = tid % kTPR;
      w_src = p.weights + pack::weight_group_offset(e, nt * kRowTiles + r, k0 / pack::kGroupK, p.n, p.k) + q * 16;
    }
    if (tid < kSChunks) {
      const int r = tid / (kGroups * 4), off = tid % (kGroups * 4);
      s_src = p.scales + pack::scale_group_offset(e, nt * kRowTiles + r, k0 / pack::kGroupK, p.n, p.k) + off * 16;
    }
    x_zero = 0;
#pragma unroll
    for (int i = 0; i < kXPer; ++i) {
      const int m = tid / kRowChunks + i * kXRowStep, off = tid % kRowChunks;
      const int m_src = min(m, max(rows, 1) - 1);  // a row of the chunk (the routing makes none empty): a valid address
      [[maybe_unused]] int32_t fused_pair = 0;  // looked up before any branch (warp-uniform)
      if constexpr (kFusedRouting) fused_pair = wr.pair(row0 + m_src);
      const int64_t src_row =
          p.gather_tokens ? (kFusedRouting ? fused_pair : p.perm_pair[row0 + m_src]) / p.top_k : row0 + m_src;
      x_src[i] = reinterpret_cast<const uint8_t*>(p.x + src_row * p.k + k0) + off * 16;
      x_zero |= static_cast<uint32_t>(m >= rows) << i;
    }
  }
  // Issues the copies of the next step into the stage at `s_base` (the weights and scales, the activations,
  // or both), then advances along K (and to the next item).
  __device__ __forceinline__ void produce(const MoeGemmParams& p, const WarpRouting& wr, uint8_t* s_base, int tid,
                                          int n_tiles, int splits, int k_tiles, bool weights, bool acts,
                                          uint8_t* rec = nullptr) {
    constexpr MoeGemmSmemLayout L = Cfg::kSmem;
    if (kt == 0) begin_item(p, wr, tid, n_tiles, splits, k_tiles);
    const int64_t k = kt;
    if (weights) {
      const int r = tid / kTPR, q = tid % kTPR;
      uint8_t* dst = s_base + L.weight_offset + r * (kTileChunks * 16) + q * 16;
      const uint8_t* src = w_src + k * (kTileChunks * 16);
#pragma unroll
      for (int i = 0; i < kWPer; ++i) ptx::cp_async_16(dst + i * kTPR * 16, src + i * kTPR * 16);
      if (tid < kSChunks)
        ptx::cp_async_16(s_base + L.scale_offset + tid * 16, s_src + k * kGroups * pack::kScaleGroupBytes);
    }
    if (acts) {
      // Copy i: row m0 + i x kXRowStep, 16-byte chunk `off`. wgmma: the chunk goes to slice off/8, row m,
      // chunk (off%8) ^ (m%8) (the 128-byte swizzle, wgmma.cuh), and m%8 is the same for every copy;
      // mma.sync: padded rows. Either way copy i lands at a constant offset from copy 0.
      const int m0 = tid / kRowChunks, off = tid % kRowChunks;
      uint8_t* dst = s_base + L.act_offset +
                     (Cfg::kWgmma ? (off / 8) * L.act_slice_bytes + m0 * 128 + (((off & 7) ^ (m0 & 7)) * 16)
                                  : m0 * L.act_row_stride + off * 16);
      constexpr int64_t kDstStep = Cfg::kWgmma ? int64_t{kXRowStep} * 128 : int64_t{kXRowStep} * L.act_row_stride;
#pragma unroll
      for (int i = 0; i < kXPer; ++i) {
        if (kXChunks % kPThreads != 0 && m0 + i * kXRowStep >= Cfg::kBlockM) break;
        ptx::cp_async_16_zfill(dst + i * kDstStep, x_src[i] + k * (Cfg::kBlockK * 2), (x_zero & (1u << i)) != 0);
      }
      // The item record, with the item's last stage (its consumers read it after that stage's wait).
      if constexpr (kRecord != ItemRecord::kNone) {
        if (kt == k_tiles - 1) {
          using R = MoeGemmWsRecord;
          if (tid == kPThreads - 1) {
            ptx::cp_async_4(rec + R::kRow0, p.chunk_start + rec_chunk);
            ptx::cp_async_4(rec + R::kRows, p.chunk_rows + rec_chunk);
            ptx::cp_async_4(rec + R::kAlpha, p.alpha + rec_e);
          }
          if constexpr (kRecord == ItemRecord::kRows) {
            if (tid < rec_rows) {
              ptx::cp_async_4(rec + R::kRowData + 4 * tid, p.topk_weights + rec_pair);
              ptx::cp_async_4(rec + R::kRowData + 4 * (Cfg::kBlockM + tid), p.perm_pair + rec_row0 + tid);
            }
          }
        }
      }
    }
    if (++kt == k_tiles) {
      kt = 0;
      item += gridDim.x;
    }
  }
};

// kFusedRouting (at most kWarpRoutingMaxPairs pairs): the chunk table and the permutation come from
// warp_routing over `route` (registers, read with shuffles: every lookup is warp-uniform) instead of the
// routing kernel's tables in global memory; gate_up's block 0 also writes route's tables, for the finalize
// and MoeLayer::workspace_view.
template <class Cfg, MoeEpilogue kEpi, bool kFusedRouting>
__device__ __forceinline__ void moe_gemm_body(const MoeGemmParams& p, const RoutingParams& route) {
  constexpr int kBN = Cfg::kBlockN, kBK = Cfg::kBlockK, kStages = Cfg::kStages;
  constexpr int kGroups = kBK / pack::kGroupK;  // 64-wide K groups per stage
  constexpr MoeGemmSmemLayout L = Cfg::kSmem;
  // Steps the copies run ahead of the math. (Keeping a step's last wgmma group in flight into the next step
  // and refilling a slot one step later instead, at block_m 64, measured 1-2% slower on the H200.)
  constexpr int kAhead = kStages - 1;
  extern __shared__ __align__(128) uint8_t smem[];
  trap_unless_smem_holds<L.total, Cfg::kWgmma>(smem);

  // Programmatic dependent launch (host: cudaLaunchAttributeProgrammaticStreamSerialization). gate_up's
  // work list is the routing kernel's output, so it waits before reading anything. Its blocks then let the
  // down kernel launch: down's blocks take SMs as gate_up's blocks leave, and issue their first weight
  // copies before their own wait (below). That read of the routing tables by down is safe because down
  // cannot start before every gate_up block has passed this wait, i.e. after routing completed. (With
  // kFusedRouting the down kernel reads only the layer's inputs -- topk ids and weights -- before its wait;
  // gate_up is then the forward pass's first kernel, launched normally.)
  if constexpr (kEpi == MoeEpilogue::kSwiGLU) {
    ptx::griddep_wait();
    ptx::griddep_launch_dependents();
  }
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  WarpRouting wr;
  if constexpr (kFusedRouting) wr = warp_routing(route, kEpi == MoeEpilogue::kSwiGLU && blockIdx.x == 0);
  const int n_tiles = p.n / kBN, splits = p.k_splits, k_tiles = p.k / kBK / splits;  // k_tiles: per item
  const int num_items = (kFusedRouting ? wr.num_chunks : *p.num_chunks) * n_tiles * splits;
  const int my_items = blockIdx.x < num_items ? (num_items - 1 - blockIdx.x) / gridDim.x + 1 : 0;
  const int total_steps = my_items * k_tiles;

  // ---- producer: this thread's copy sources, set once per work item and advanced along K ----------
  TileProducer<Cfg, Cfg::kThreads, kFusedRouting> prod{static_cast<int>(blockIdx.x), 0};
  auto produce = [&](int slot, bool weights, bool acts) {
    prod.produce(p, wr, smem + slot * L.stage_bytes, tid, n_tiles, splits, k_tiles, weights, acts);
  };

  // Accumulators: mma.sync C fragments of the item's 8-token n-tiles; on the wgmma path the same registers
  // as one array d[4j + r] = acc[j][r] (wgmma.cuh). Zeroed here once, before any wgmma is in flight; the
  // wgmma path restarts them with scale-d = 0 instead.
  float acc[Cfg::kNTiles8][4];
#pragma unroll
  for (int j = 0; j < Cfg::kNTiles8; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
  float(&accw)[Cfg::kBlockM / 2] = *reinterpret_cast<float(*)[Cfg::kBlockM / 2]>(&acc[0][0]);

  if constexpr (kEpi == MoeEpilogue::kSwiGLU) {
#pragma unroll
    for (int s = 0; s < kAhead; ++s) {
      if (s < total_steps) produce(s, true, true);
      ptx::cp_async_commit();
    }
  } else {
    // down: the first stages' weights do not depend on gate_up, so their copies are in flight before the
    // wait for gate_up's activations (they join commit group 0, which step 0 waits for anyway).
#pragma unroll
    for (int s = 0; s < kAhead; ++s)
      if (s < total_steps) produce(s, true, false);
    ptx::griddep_wait();
    ptx::griddep_launch_dependents();
    prod.item = blockIdx.x;
    prod.kt = 0;
#pragma unroll
    for (int s = 0; s < kAhead; ++s) {
      if (s < total_steps) produce(s, false, true);
      ptx::cp_async_commit();
    }
  }

  // ---- consumer state: the item whose K steps the warps are multiplying ------------------------------
  int cons_item = blockIdx.x, cons_kt = 0, cons_e = 0, cons_row0 = 0, cons_rows = 0;
  int slot = 0;  // st % kStages, advanced step by step (no division in the K loop)
  LaneSlot<Cfg> cur(smem, warp, lane);  // this lane's view of slot `slot`
  for (int st = 0; st < total_steps; ++st) {
    if (cons_kt == 0) {
      const int chunk = cons_item / splits / n_tiles;
      if constexpr (kFusedRouting) {
        cons_e = wr.expert(chunk);
        cons_row0 = wr.start(chunk);
        cons_rows = wr.rows(chunk);
      } else {
        cons_e = p.chunk_expert[chunk];
        cons_row0 = p.chunk_start[chunk];
        cons_rows = p.chunk_rows[chunk];
      }
    }
    ptx::cp_async_wait<kAhead - 1>();
    if constexpr (Cfg::kWgmma) wgmma::fence_proxy_async_shared();  // this thread's copies -> the tensor cores' reads
    __syncthreads();  // step st has landed for every thread; slot (st - 1) % kStages is free again
    // Step st + kAhead refills slot (st + kStages - 1) % kStages, the one step st - 1 used.
    static_assert(kAhead == kStages - 1, "the refill slot below is the previous step's");
    if (st + kAhead < total_steps) produce(slot == 0 ? kStages - 1 : slot - 1, true, true);
    ptx::cp_async_commit();

    if (++slot == kStages) slot = 0;
    if constexpr (Cfg::kWgmma) {
      // Group g's four wgmmas run while group g+1 is dequantized; wait<1> then frees group g's A registers
      // (and, at the stage's end, wait<0> its slot).
#pragma unroll
      for (int g = 0; g < kGroups; ++g) {
        wgmma_group<Cfg>(cur.weights(g), cur.scales(g), cur.desc, g, accw, (cons_kt == 0 && g == 0) ? 0 : 1,
                         route.dequant_mul);
        wgmma::wait<1>();
      }
      // This step's wgmmas are done before the next step's barrier lets its slot be refilled, and before
      // the epilogue reads the accumulators.
      wgmma::wait<0>();
#pragma unroll
      for (int i = 0; i < Cfg::kBlockM / 2; ++i) wgmma::fence_operand(accw[i]);
    } else {
#pragma unroll
      for (int g = 0; g < kGroups; ++g) {
        const uint4 wq = cur.weights(g);
        const uint2 sq = cur.scales(g);
        const uint32_t words[4] = {wq.x, wq.y, wq.z, wq.w};
#pragma unroll
        for (int h = 0; h < 2; ++h) {  // two k16 steps per ldmatrix.x4
          uint32_t b[Cfg::kNTiles8][4];
#pragma unroll
          for (int j = 0; j < Cfg::kNTiles8; ++j) {
            if (j > 0 && j * 8 >= cons_rows) break;  // n-tiles past the item's tokens: no loads, no MMAs
            ptx::ldmatrix_x4(b[j], cur.x + j * 8 * L.act_row_stride + (g * pack::kGroupK + h * 32) * 2);
          }
          const uint32_t s_g = scale_pair2(sq.x, h, route.dequant_mul), s_g8 = scale_pair2(sq.y, h, route.dequant_mul);
          uint32_t a0[4], a1[4];
          dequant_a_fragments(words[2 * h], words[2 * h + 1], s_g, s_g8, route.dequant_mul, a0, a1);
#pragma unroll
          for (int j = 0; j < Cfg::kNTiles8; ++j) {
            if (j > 0 && j * 8 >= cons_rows) break;
            ptx::mma_bf16_16816(acc[j], a0, b[j][0], b[j][1]);
            ptx::mma_bf16_16816(acc[j], a1, b[j][2], b[j][3]);
          }
        }
      }
    }  // mma.sync path
    cur.next();
    if (slot == 0) cur.wrap();  // (advanced above) the next step reads slot 0 again

    if (++cons_kt == k_tiles) {  // last K step of this item: epilogue straight from registers
      store_item<Cfg, kEpi, kFusedRouting>(p, wr, acc, cons_item / splits % n_tiles, cons_item % splits, cons_e,
                                           cons_row0, cons_rows, warp, lane);
      cons_kt = 0;
      cons_item += gridDim.x;
    }
  }
  ptx::cp_async_wait<0>();
}

// The body is compiled only for the architecture the config was planned for (its shared-memory layout
// is static_asserted against that architecture's budget in Cfg); other targets get an empty kernel.
template <class Cfg, MoeEpilogue kEpi, bool kFusedRouting = false>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocksPerSm) moe_gemm_kernel(const MoeGemmParams p,
                                                                                       const RoutingParams route) {
#if defined(__CUDA_ARCH__)
  constexpr int kTarget = __CUDA_ARCH__ / 10 == 121 ? 120 : __CUDA_ARCH__ / 10;
  if constexpr (kTarget == Cfg::kArch) moe_gemm_body<Cfg, kEpi, kFusedRouting>(p, route);
#endif
}

}  // namespace fp4moe::kernels
