// The direct decode path: a step of at most 32 pairs in two kernels, gate_up with its K split over one block's
// warps and down with the finalize folded in; no work list, no split fix-up, no partial sums in global memory. And
// down with the finalize folded in after the tiled gate_up (moe_direct_down_ring_kernel).
// SPDX-License-Identifier: Apache-2.0
//
// Why: at T=1 on the TP8 shard the tiled path is three dependent kernels plus a memset for 21 MB of weights
// (docs/perf/shards.md, "T=1 is fixed cost"). Here every block knows its work from blockIdx and the routing it
// computes itself (warp_routing): gate_up block (chunk c, 16-row tile r) has its 8 warps each multiply 1/8 of K
// and adds their sums in warp order in shared memory (the order gate_up_split_fixup uses for 8 K splits: the same
// bits where H / 64 falls into the same 8 ranges as the tiled kernels' K tiles, as for GLM-5); down block r computes 16 columns of H for every pair and then sums each token's
// slots in slot order (the deterministic finalize's order) and stores the output row. Both use mma.sync on the
// prepacked fragments (kernels/weight_pack.h) with the multistage kernels' dequantizer, on every arch.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/moe_decode_direct_layout.h"
#include "kernels/moe_gemm_epilogue.cuh"
#include "kernels/moe_gemm_params.cuh"
#include "kernels/moe_routing_warp.cuh"
#include "kernels/nvfp4_dequant_mma.cuh"
#include "kernels/ptx.cuh"
#include "kernels/weight_pack.h"

namespace fp4moe::kernels {

struct DirectDecodeParams {
  MoeGemmExtras ex;             // the routing (block_m = kDirectChunkRows; gate_up's block 0 writes the tables),
                                // the dequantizer's multipliers and the global expert count, as the GEMMs take them
  const uint8_t* w13;           // prepacked [E, 2I/16, H/64, 512 B]
  const uint8_t* s13;
  const float* alpha13;         // [E]
  const uint8_t* w2;            // prepacked [E, H/16, I/64, 512 B]
  const uint8_t* s2;
  const float* alpha2;
  const __nv_bfloat16* hidden;  // [T, H]
  __nv_bfloat16* act;           // [P, I] the SwiGLU rows, in permuted order
  __nv_bfloat16* out;           // [T, H]
  int32_t num_tokens, hidden_dim, intermediate, top_k;
  int32_t gate_up_chunk_blocks;  // gate_up block rows (blocks per 16-row tile): row y takes the chunk pair y leads and
                                 // every gate_up_chunk_blocks-th of the chunks led by later pairs
  bool bf16_terms;              // FinalizeMode::kDeterministicBf16: each term rounded to bf16, as its partials are
  int32_t down_staged_rows;      // the direct down kernel's room for SwiGLU rows in shared memory (MoeDirectPlan): a
                                 // call with more rows reads them from L2
};

// One 64-wide K group: this warp's 16 weight rows (lane's 16 weight bytes wq and 8 scale bytes sq) times 8 token
// columns from shared memory; x_row is the lane's ldmatrix row address at the group's first K (token lane % 8,
// byte offset 16 * (lane / 8)). The multistage kernels' mma.sync step, in the same order.
// kGlobalRows: the token columns come from the SwiGLU rows in global memory (L2) instead, x_row then being the lane's
// own B-fragment address (token lane / 4, byte offset 4 * (lane % 4)): each of ldmatrix.x4's four 8x8 matrices j gives
// lane l the two bf16 of row l / 4 at columns 2 (l % 4) and up, which is the 4 bytes at 16 j + 4 (l % 4) of that row
// (PTX ISA, "Warp-level matrix load instruction: ldmatrix", the fragment layout of each matrix), so the same
// registers and the same MMAs, in the same order.
template <bool kGlobalRows = false>
__device__ __forceinline__ void direct_group(float (&acc)[4], const uint4 wq, const uint2 sq, const uint8_t* x_row,
                                             const DequantMul& mul) {
  const uint32_t words[4] = {wq.x, wq.y, wq.z, wq.w};
#pragma unroll
  for (int h = 0; h < 2; ++h) {  // two k16 steps per ldmatrix.x4
    uint32_t b[4];
    if constexpr (kGlobalRows) {
#pragma unroll
      for (int j = 0; j < 4; ++j) b[j] = __ldcg(reinterpret_cast<const unsigned int*>(x_row + h * 64 + j * 16));
    } else {
      ptx::ldmatrix_x4(b, x_row + h * 64);
    }
    const uint32_t s_g = scale_pair2(sq.x, h, mul), s_g8 = scale_pair2(sq.y, h, mul);
    uint32_t a0[4], a1[4];
    dequant_a_fragments(words[2 * h], words[2 * h + 1], s_g, s_g8, mul, a0, a1);
    ptx::mma_bf16_16816(acc, a0, b[0], b[1]);
    ptx::mma_bf16_16816(acc, a1, b[2], b[3]);
  }
}

// direct_group on K group i of a warp's slots in shared memory: weights at ws + i * 512 (lane's 16 bytes), scales
// at ss + i * 64 (the lane's row pair's 8 bytes), as both kernels' bulk copies lay them out.
__device__ __forceinline__ void direct_group_staged(float (&acc)[4], const uint8_t* ws, const uint8_t* ss, int i, int lane,
                                                    const uint8_t* x_row, const DequantMul& mul) {
  direct_group(acc, *reinterpret_cast<const uint4*>(ws + i * pack::kWeightGroupBytes + lane * 16),
               *reinterpret_cast<const uint2*>(ss + i * pack::kScaleGroupBytes + (lane >> 2) * 8), x_row, mul);
}

// Lane 0 of the calling warp initialises `count` mbarriers of one arrival at bar, bar + 8, ... and makes them visible
// to the bulk copies; then every lane may wait on them.
__device__ __forceinline__ void init_warp_barriers(uint32_t bar, int count) {
  if ((threadIdx.x & 31) == 0) {
#pragma unroll
    for (int q = 0; q < count; ++q) ptx::mbarrier_init(bar + 8 * q, 1);
    ptx::fence_mbarrier_init();
  }
  __syncwarp();
}

// Chunk cc's router-weighted terms of the block's 16 columns into terms[row * 16 + column], as the deterministic down
// epilogue stores them (alpha x router weight, then rounded to bf16 where the partials are). alpha is the chunk's
// expert's, from the caller: the direct down kernel reads it before its wait, so that its round trip overlaps gate_up
// rather than following the chunk's MMAs. Called by whole warps (WarpRouting reads the weights by shuffles).
template <class Routing>
__device__ __forceinline__ void direct_store_terms(const DirectDecodeParams& p, const Routing& wr, int cc, float alpha,
                                                   const float (&acc)[4], float* terms) {
  const int lane = threadIdx.x & 31, g8 = lane >> 2, t4 = lane & 3;
  const int row0 = wr.start(cc), rows = wr.rows(cc);
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    const int m = t4 * 2 + k;
    const float w = wr.router_weight(row0 + min(m, rows - 1));  // (every lane: a shuffle)
    if (m >= rows) continue;
    const float scale = alpha * w;
    float a = scale * acc[k], b = scale * acc[2 + k];
    if (p.bf16_terms) {
      a = __bfloat162float(__float2bfloat16_rn(a));
      b = __bfloat162float(__float2bfloat16_rn(b));
    }
    terms[(row0 + m) * 16 + g8] = a;
    terms[(row0 + m) * 16 + g8 + 8] = b;
  }
}

// The call's first `valid` SwiGLU rows (I bf16 each, from L2: gate_up has just written them) into shared memory at
// `rows`, `row_stride` bytes apart, by the whole block in 16-byte pieces (the caller's __syncthreads follows).
__device__ __forceinline__ void direct_stage_rows(const DirectDecodeParams& p, int valid, uint8_t* rows, int64_t row_stride) {
  const int row_chunks = p.intermediate / 8;  // 16-byte pieces of a row
  for (int i = threadIdx.x; i < valid * row_chunks; i += kDirectThreads) {
    const int r = i / row_chunks, q = i % row_chunks;
    *reinterpret_cast<uint4*>(rows + r * row_stride + q * 16) =
        __ldcg(reinterpret_cast<const uint4*>(p.act + static_cast<int64_t>(r) * p.intermediate) + q);
  }
}

// The finalize of the block's 16 columns, by the whole block once every term is in shared memory: each token's slots
// in slot order (skipped pairs, row -1, add nothing), rounded once to bf16. Eight slots at a time: their rows, then
// their terms, are read before any is added, so a token of top-8 costs two shared-memory round trips, not sixteen
// (it runs after the step's last MMA). A skipped slot or one past k adds +0, which changes no sum that starts at +0.
__device__ __forceinline__ void direct_finalize_columns(const DirectDecodeParams& p, const float* terms,
                                                        const int32_t* row_of_pair, int tile) {
  constexpr int kBatch = 8;
  const int T = p.num_tokens, k = p.top_k;
  for (int i = threadIdx.x; i < T * 16; i += kDirectThreads) {
    const int t = i >> 4, h = i & 15;
    const int32_t* slots = row_of_pair + t * k;
    float s = 0.0f;
    for (int s0 = 0; s0 < k; s0 += kBatch) {
      int32_t r[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) r[u] = s0 + u < k ? slots[s0 + u] : -1;
      float v[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) v[u] = r[u] >= 0 ? terms[r[u] * 16 + h] : 0.0f;
#pragma unroll
      for (int u = 0; u < kBatch; ++u) s += v[u];
    }
    p.out[static_cast<int64_t>(t) * p.hidden_dim + tile * 16 + h] = __float2bfloat16_rn(s);
  }
}

// Grid: p.gate_up_chunk_blocks x (2I / 16) tiles, blockIdx.x = y * (2I/16) + tile; block (y, tile) multiplies tile
// `tile` of the chunk pair y leads and of its share of the other chunks (below; the plan sizes the rows by the chunks
// uniform routing reaches, at most what one wave of resident blocks holds, so few blocks exit idle and none waits for
// a slot). The forward pass's
// first kernel: it lets the down kernel launch at once, whose blocks route and load their first weights while these
// stream theirs.
// Each warp's K range arrives by bulk copies issued by its lane 0 right after the ids are read (weights, scales and,
// for the first chunk, the tokens' activations), in kDirectGateUpPieces pieces on as many mbarriers, so the whole tile
// is in flight after one round trip for the ids and each piece is multiplied while the next ones land. A block with
// another chunk to multiply copies that chunk's piece into a slot as soon as its warp has multiplied the piece there,
// so its weights stream on without a round trip between chunks. (Per-lane loads through registers took two batches,
// each a round trip: docs/perf/history.md.)
// kChunkLoop: false where the grid has a block per tile for every chunk a call can have (gate_up_chunk_blocks = the
// pairs), so no block loops.
template <bool kChunkLoop>
__global__ void __launch_bounds__(kDirectThreads, kDirectMinBlocks) moe_direct_gate_up_kernel(const DirectDecodeParams p) {
  extern __shared__ __align__(16) uint8_t smem[];
  // The forward pass's first kernel, a programmatic dependent of whatever kernel the stream ran before (its blocks
  // are resident while that one drains): nothing is read or written before the wait (a no-op after a plain launch).
  ptx::griddep_wait();
  ptx::griddep_launch_dependents();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int n = 2 * p.intermediate, n16 = n / 16;
  const int tile = blockIdx.x % n16;
  const DirectGateUpSmem L = direct_gate_up_smem(p.num_tokens, p.hidden_dim);
  const int groups = p.hidden_dim / pack::kGroupK;
  const int g_begin = warp * groups / kDirectWarps, g_end = (warp + 1) * groups / kDirectWarps;
  uint8_t* ws = smem + warp * L.w_warp_bytes;              // this warp's weights: group g at (g - g_begin) * 512
  uint8_t* ss = smem + L.s_offset + warp * L.s_warp_bytes;  // and scales: at (g - g_begin) * 64
  uint8_t* xs = smem + L.x_offset;                          // token t's row at t * row_stride, group g at g * 128
  float* red = reinterpret_cast<float*>(smem + L.red_offset);
  constexpr int kP = kDirectGateUpPieces;
  // Piece q of the warp's K range: groups [piece(q), piece(q + 1)), on mbarrier bar + 8 q.
  auto piece = [&](int q) { return g_begin + q * (g_end - g_begin) / kP; };
  const uint32_t bar = ptx::smem_addr(smem + L.bar_offset + warp * kP * 8);
  init_warp_barriers(bar, kP);
  const WarpPairs pairs_in = warp_routing_load(p.ex.routing, p.ex.num_global_experts);
  // Lane 0: piece q of expert e's tile into its slot (with the tokens' rows of those K groups where `with_x`).
  auto copy_piece = [&](int e, int q, bool with_x) {
    const int ga = piece(q), ng = piece(q + 1) - ga;
    const uint32_t x_bytes = with_x ? static_cast<uint32_t>(p.num_tokens * ng * pack::kGroupK * 2) : 0u;
    ptx::mbarrier_arrive_expect_tx(bar + 8 * q,
                                   static_cast<uint32_t>(ng * (pack::kWeightGroupBytes + pack::kScaleGroupBytes)) + x_bytes);
    if (ng == 0) return;  // (a warp's range can be empty where H / 64 < kDirectWarps * kP)
    ptx::cp_async_bulk_g2s(ws + (ga - g_begin) * pack::kWeightGroupBytes,
                           p.w13 + pack::weight_group_offset(e, tile, ga, n, p.hidden_dim), ng * pack::kWeightGroupBytes,
                           bar + 8 * q);
    ptx::cp_async_bulk_g2s(ss + (ga - g_begin) * pack::kScaleGroupBytes,
                           p.s13 + pack::scale_group_offset(e, tile, ga, n, p.hidden_dim), ng * pack::kScaleGroupBytes,
                           bar + 8 * q);
    if (with_x)
      for (int t = 0; t < p.num_tokens; ++t)
        ptx::cp_async_bulk_g2s(xs + t * L.row_stride + ga * pack::kGroupK * 2,
                               p.hidden + static_cast<int64_t>(t) * p.hidden_dim + ga * pack::kGroupK,
                               ng * pack::kGroupK * 2, bar + 8 * q);
  };
  const int g8 = lane >> 2, t4 = lane & 3;
  uint32_t parity = 0;
  // Block row y speculates on pair y (y < the rows <= the pairs <= 32): its expert is known from the id alone, so the
  // row's copies go out before the routing's shuffles run, for the chunk that pair leads (most pairs of a step's first
  // token lead one). A row then takes that chunk and, with the chunk loop, the chunks led by pairs past the rows (list
  // R, in chunk order) at positions y, y + rows, ...: every chunk has one leading pair, so each is some row's.
  const int G = p.gate_up_chunk_blocks, y = blockIdx.x / n16;
  int spec_expert = -1;  // the expert of the copies in flight (-1: pair y is skipped, none)
  {
    const int32_t key = __shfl_sync(0xFFFFFFFFu, pairs_in.key, y);
    if (key != INT32_MAX) {
      spec_expert = key;
      if (lane == 0)
#pragma unroll
        for (int q = 0; q < kP; ++q) copy_piece(spec_expert, q, true);
    }
  }
  const WarpRouting wr = warp_routing(p.ex.routing, pairs_in, blockIdx.x == 0);
  const int nc = wr.num_chunks;
  const int lead = __shfl_sync(0xFFFFFFFFu, wr.perm, wr.c_start);  // lane c: the pair at chunk c's first row
  const uint32_t led = __ballot_sync(0xFFFFFFFFu, lane < nc && lead == y);
  const int own = led != 0 ? __ffs(led) - 1 : -1;  // the chunk pair y leads (none: a later row of its expert's chunk)
  const uint32_t rest = kChunkLoop ? __ballot_sync(0xFFFFFFFFu, lane < nc && lead >= G) : 0u;
  auto row_chunk = [&](int i) {  // this row's i-th chunk; nc past its last (block-uniform)
    if (own >= 0) {
      if (i == 0) return own;
      --i;
    }
    const int j = y + i * G;
    return j < __popc(rest) ? static_cast<int>(__fns(rest, 0, j + 1)) : nc;
  };
  int chunk = row_chunk(0);
  if (own < 0) {
    if (spec_expert >= 0) {  // copies in flight for no chunk of this row: let them land (the tokens' rows stay)
#pragma unroll
      for (int q = 0; q < kP; ++q) ptx::mbarrier_wait(bar + 8 * q, 0);
      parity = 1;
    }
    if (chunk < nc) {
      const int e = wr.expert(chunk);  // (a shuffle: every lane)
      if (lane == 0)  // (the slots were only written by the copies that landed: no generic reads to order)
#pragma unroll
        for (int q = 0; q < kP; ++q) copy_piece(e, q, spec_expert < 0);
    }
  }
  for (int i = 0; chunk < nc; ++i) {  // (block-uniform)
    if (kChunkLoop && i > 0) __syncthreads();  // warp 0 has read the previous chunk's sums
    const int e = wr.expert(chunk), row0 = wr.start(chunk), rows = wr.rows(chunk);
    // The expert's alpha, read before the pieces are waited for: its round trip then overlaps the weights' stream
    // instead of following the block's last MMA (warp 0 uses it, every lane reads it).
    const float alpha = p.alpha13[e];
    const int next = kChunkLoop ? row_chunk(i + 1) : nc;
    const bool has_next = kChunkLoop && next < nc;
    const int e_next = has_next ? wr.expert(next) : 0;
    // Column m of the mma is the chunk's row m: its token's staged row (rows past the chunk's read its last row;
    // their sums are never stored, mma columns being independent).
    const int tok = wr.pair(row0 + min(lane & 7, rows - 1)) / p.top_k;
    const uint8_t* x_lane = xs + tok * L.row_stride + (lane >> 3) * 16;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int q = 0; q < kP; ++q) {
      ptx::mbarrier_wait(bar + 8 * q, parity);
      // Two groups an iteration: the second group's shared-memory loads and conversion overlap the first's MMAs
      // (the piece that lands last is multiplied after everything else has arrived: its time is the kernel's tail).
#pragma unroll 2
      for (int g = piece(q); g < piece(q + 1); ++g)
        direct_group_staged(acc, ws, ss, g - g_begin, lane, x_lane + g * 128, p.ex.dequant_mul);
      if (has_next) {
        __syncwarp();  // every lane has read the piece's slot
        if (lane == 0) {
          ptx::fence_proxy_async_shared();  // (those generic-proxy reads before the copy that overwrites them)
          copy_piece(e_next, q, false);
        }
      }
    }
    parity ^= 1u;
    // The warps' sums in warp order (= K order), then the SwiGLU of rows g (gate) and g + 8 (up) of the tile.
    *reinterpret_cast<float4*>(red + (warp * 32 + lane) * 4) = make_float4(acc[0], acc[1], acc[2], acc[3]);
    __syncthreads();
    if (warp == 0) {
      float s[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) s[j] = red[lane * 4 + j];
#pragma unroll
      for (int w = 1; w < kDirectWarps; ++w)
#pragma unroll
        for (int j = 0; j < 4; ++j) s[j] = s[j] + red[(w * 32 + lane) * 4 + j];
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int m = t4 * 2 + c;
        if (m < rows)
          p.act[static_cast<int64_t>(row0 + m) * p.intermediate + tile * 8 + g8] =
              __float2bfloat16_rn(swiglu(alpha * s[c], alpha * s[2 + c]));
      }
    }
    chunk = next;
  }
}

// Grid: H / 16 blocks; block r computes columns [16 r, 16 r + 16) of the output for every token. Its warps take
// the call's chunks (warp w: chunks w, w + 8, ...); with fewer chunks than warps, kDirectWarps / chunks warps
// split each chunk's K and their sums are added in K order. Launched as a programmatic dependent of gate_up: the
// routing and the first weights do not depend on it; the SwiGLU rows are read after griddepcontrol.wait.
// Weights in batches of kDirectDownBatch K groups: kStageWeights, by two bulk copies of lane 0 into the warp's slots
// (fewer registers: more blocks resident beside gate_up's); else by each lane's own loads into registers.
// direct_down_stages_weights says which (the plan's MoeDirectPlan::down_stages_weights).
// The SwiGLU rows are staged in shared memory. kRowsMayExceed (where the plan has room for fewer rows than pairs:
// MoeDirectPlan::down_staged_rows, sized by the rows uniform routing gives, so that an expert-parallel rank's blocks
// stay resident): a call whose routing puts more rows on this rank reads each MMA's token columns from L2 instead (the
// same registers: direct_group<true>). A kernel of its own, so that the others keep their code (the runtime branch
// cost the TP8 step of 2 tokens 1.5-1.9%: docs/perf/history.md).
template <bool kStageWeights, bool kRowsMayExceed = false>
__global__ void __launch_bounds__(kDirectThreads, kStageWeights ? kDirectDownMinBlocks : kDirectMinBlocks)
    moe_direct_down_kernel(const DirectDecodeParams p) {
  // (The plan stages weights only where every pair's row fits: at 48 registers that kernel has none left for the L2
  // path's addresses.)
  static_assert(!(kStageWeights && kRowsMayExceed), "staged weights: every pair's row staged");
  extern __shared__ __align__(16) uint8_t smem[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int H = p.hidden_dim, I = p.intermediate, tile = blockIdx.x;
  const int pairs = p.ex.routing.num_pairs;
  const WarpRouting wr = warp_routing(p.ex.routing, p.ex.num_global_experts, false);
  const int nc = wr.num_chunks;
  // (Without kRowsMayExceed the plan's room is every pair's row.)
  const DirectDownSmem L = direct_down_smem(pairs, I, kStageWeights, kRowsMayExceed ? p.down_staged_rows : -1);
  const int groups = I / pack::kGroupK;
  const int parts = (nc >= kDirectWarps || nc == 0) ? 1 : kDirectWarps / nc;
  const int part = parts == 1 ? 0 : warp / nc;
  const bool has_task = parts == 1 ? warp < nc : warp < nc * parts;
  int c = parts == 1 ? warp : warp % nc;  // this warp's chunk
  const int gk0 = part * groups / parts, gk1 = (part + 1) * groups / parts;
  constexpr int kB = kDirectDownBatch;
  uint8_t* ws = smem + warp * L.w_warp_bytes;  // this warp's slots: group b0 + i's weights at i * 512
  uint8_t* ss = smem + L.s_offset + warp * L.s_warp_bytes;  // and scales at i * 64
  const uint32_t bar = ptx::smem_addr(smem + L.bar_offset + warp * 8);
  uint32_t parity = 0;
  if constexpr (kStageWeights) init_warp_barriers(bar, 1);
  [[maybe_unused]] uint4 wq[kStageWeights ? 1 : kB];
  [[maybe_unused]] uint2 sq[kStageWeights ? 1 : kB];
  // Groups [b0, min(b0 + kB, gk1)) of chunk cc. Staged: lane 0 puts them in flight by two bulk copies (a 16-row
  // tile's prepacked weights and scales are contiguous along K) once the lanes have read the previous batch (the
  // callers' __syncwarp); else each lane loads its 16 weight and 8 scale bytes of each group.
  auto load = [&](int cc, int b0, bool reuse) {
    const int e = wr.expert(cc), ng = min(kB, gk1 - b0);  // (a shuffle: every lane)
    if constexpr (kStageWeights) {
      if (lane == 0) {
        if (reuse) ptx::fence_proxy_async_shared();  // (those generic-proxy reads before the copies overwrite them)
        ptx::mbarrier_arrive_expect_tx(bar, static_cast<uint32_t>(ng * (pack::kWeightGroupBytes + pack::kScaleGroupBytes)));
        if (ng > 0) {  // (a warp's K part can be empty where I / 64 < its parts)
          ptx::cp_async_bulk_g2s(ws, p.w2 + pack::weight_group_offset(e, tile, b0, H, I), ng * pack::kWeightGroupBytes, bar);
          ptx::cp_async_bulk_g2s(ss, p.s2 + pack::scale_group_offset(e, tile, b0, H, I), ng * pack::kScaleGroupBytes, bar);
        }
      }
    } else {
      const uint8_t* wsrc = p.w2 + pack::weight_group_offset(e, tile, b0, H, I) + lane * 16;
      const uint8_t* ssrc = p.s2 + pack::scale_group_offset(e, tile, b0, H, I) + (lane >> 2) * 8;
#pragma unroll
      for (int i = 0; i < kB; ++i)
        if (i < ng) {
          wq[i] = __ldg(reinterpret_cast<const uint4*>(wsrc + i * pack::kWeightGroupBytes));
          sq[i] = __ldg(reinterpret_cast<const uint2*>(ssrc + i * pack::kScaleGroupBytes));
        }
    }
  };
  if (has_task) load(c, gk0, false);
  // Chunk c's alpha (a weight, like the copies just issued: read before the wait, so that its round trip overlaps
  // gate_up instead of following this warp's MMAs).
  float alpha = 0.0f;
  {
    const int e = wr.expert(c);  // (a shuffle: every lane)
    if (has_task) alpha = p.alpha2[e];
  }
  const int valid = nc > 0 ? wr.start(nc - 1) + wr.rows(nc - 1) : 0;  // rows of the permutation
  int32_t* row_of_pair = reinterpret_cast<int32_t*>(smem + L.rows_offset);
  if (warp == 0) {
    if (lane < pairs) row_of_pair[lane] = -1;
    __syncwarp();
    if (lane < valid) row_of_pair[wr.perm] = lane;
  }
  ptx::griddep_wait();  // gate_up's SwiGLU rows are complete and visible
  // (No launch_dependents: the pass's last kernel, and where its blocks are more than a wave, the next pass's first
  // kernel would take the slots its later blocks need.)
  const bool rows_staged = !kRowsMayExceed || valid <= p.down_staged_rows;  // (block-uniform)
  if (rows_staged) direct_stage_rows(p, valid, smem + L.act_offset, L.row_stride);
  __syncthreads();

  float* terms = reinterpret_cast<float*>(smem + L.terms_offset);
  auto store_terms = [&](int cc, const float (&acc)[4]) { direct_store_terms(p, wr, cc, alpha, acc, terms); };
  if (has_task) {
    for (;;) {
      const int row0 = wr.start(c), rows = wr.rows(c);
      // The token columns from shared memory (ldmatrix rows) or, where the rows are not staged, from L2.
      const uint8_t* x_lane =
          rows_staged
              ? smem + L.act_offset + (row0 + min(lane & 7, rows - 1)) * L.row_stride + (lane >> 3) * 16
              : reinterpret_cast<const uint8_t*>(p.act + static_cast<int64_t>(row0 + min(lane >> 2, rows - 1)) * I) +
                    (lane & 3) * 4;
      float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      for (int b0 = gk0; b0 < gk1; b0 += kB) {
        if (b0 != gk0) {
          __syncwarp();
          load(c, b0, true);
        }
        const int ng = min(kB, gk1 - b0);
        if constexpr (kStageWeights) {
          ptx::mbarrier_wait(bar, parity);
          parity ^= 1u;
          // Unrolled (a guard, not a bound of ng): the batch's loads and conversions are scheduled ahead of the MMAs
          // they feed; this loop runs after gate_up's rows arrive, on every down warp at once.
#pragma unroll
          for (int i = 0; i < kB; ++i)
            if (i < ng) direct_group_staged(acc, ws, ss, i, lane, x_lane + (b0 + i) * 128, p.ex.dequant_mul);
        } else {  // (the only kernel with rows that may come from L2)
#pragma unroll
          for (int i = 0; i < kB; ++i)
            if (i < ng) {
              if (rows_staged)
                direct_group<false>(acc, wq[i], sq[i], x_lane + (b0 + i) * 128, p.ex.dequant_mul);
              else
                direct_group<true>(acc, wq[i], sq[i], x_lane + (b0 + i) * 128, p.ex.dequant_mul);
            }
        }
      }
      __syncwarp();  // (every lane has read the batch: its slots may be overwritten)
      if (parts > 1) {
        *reinterpret_cast<float4*>(ws + lane * 16) = make_float4(acc[0], acc[1], acc[2], acc[3]);
        break;
      }
      store_terms(c, acc);
      c += kDirectWarps;
      if (c >= nc) break;
      load(c, gk0, true);
      alpha = p.alpha2[wr.expert(c)];
    }
  }
  if (parts > 1) {
    __syncthreads();
    if (warp < nc) {  // chunk `warp`: its K parts (warps warp + q nc) in K order
      float acc[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) acc[j] = reinterpret_cast<const float*>(smem + warp * L.w_warp_bytes + lane * 16)[j];
      for (int q = 1; q < parts; ++q)
#pragma unroll
        for (int j = 0; j < 4; ++j)
          acc[j] = acc[j] + reinterpret_cast<const float*>(smem + (warp + q * nc) * L.w_warp_bytes + lane * 16)[j];
      store_terms(warp, acc);
    }
  }
  __syncthreads();
  direct_finalize_columns(p, terms, row_of_pair, tile);
}

// Down with the finalize folded in after the tiled gate_up kernels, for up to kBlockRoutingMaxPairs pairs whose chunks'
// K is one batch (the plan takes it on sm_90 for at most kDirectDownRingMaxPairs pairs and I <= kDirectDownBatch x
// 64: a TP shard's decode step of 3 or 4 tokens at top-8, or up to 8 at top-4, past the direct path and the cluster
// kernel; an EP rank of such a shard): the tiled down kernel, the partial sums in
// global memory and the finalize kernel become one kernel whose blocks also start streaming their weights while
// gate_up's last round drains. Grid: H / 16 blocks, block r computing columns [16 r, 16 r + 16) of the output for
// every token, as the direct down kernel does; warp w takes chunks w, w + 8, ... of the block routing (chunks of
// kDirectChunkRows rows, p.ex.routing.block_m: the SwiGLU rows are in the permuted order whatever gate_up's block_m)
// and streams their weights through its kDirectDownRing slots, one bulk copy of weights and one of scales a chunk,
// the next chunk's copy issued as soon as a slot is free. Each chunk's sum runs in K order on one warp (the tiled
// kernels' order), so the output is the tiled path's bit for bit where that runs down's K in one split. Launched as a
// programmatic dependent of gate_up: the routing and the first chunks' weights do not depend on it; the SwiGLU rows
// are read after griddepcontrol.wait.
__global__ void __launch_bounds__(kDirectThreads, kDirectMinBlocks) moe_direct_down_ring_kernel(const DirectDecodeParams p) {
  extern __shared__ __align__(16) uint8_t smem[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int H = p.hidden_dim, I = p.intermediate, tile = blockIdx.x;
  const int pairs = p.ex.routing.num_pairs;
  const DirectDownSmem L = direct_down_ring_smem(pairs, I);
  constexpr int kB = kDirectDownBatch, kR = kDirectDownRing;
  uint8_t* ws = smem + warp * L.w_warp_bytes;               // slot i's weights at i * kB * 512
  uint8_t* ss = smem + L.s_offset + warp * L.s_warp_bytes;  // and scales at i * kB * 64
  const uint32_t bar = ptx::smem_addr(smem + L.bar_offset + warp * kR * 8);  // slot i's mbarrier at bar + 8 i
  init_warp_barriers(bar, kR);
  const BlockRouting wr = block_routing(p.ex.routing, p.ex.num_global_experts, false,
                                        reinterpret_cast<BlockRoutingTables*>(smem + L.tables_offset));
  const int nc = wr.num_chunks, valid = wr.t->num_valid;
  const int ng = I / pack::kGroupK;  // a chunk's K groups: one batch (the plan takes I <= kDirectDownBatch x 64)
  // This warp's work: item j is chunk warp + kDirectWarps * j, in slot j % kR.
  const int items = warp < nc ? (nc - warp + kDirectWarps - 1) / kDirectWarps : 0;
  auto issue = [&](int j) {  // (lane 0)
    const int cc = warp + kDirectWarps * j, slot = j % kR;
    const int e = wr.expert(cc);
    ptx::mbarrier_arrive_expect_tx(bar + 8 * slot,
                                   static_cast<uint32_t>(ng * (pack::kWeightGroupBytes + pack::kScaleGroupBytes)));
    ptx::cp_async_bulk_g2s(ws + slot * kB * pack::kWeightGroupBytes, p.w2 + pack::weight_group_offset(e, tile, 0, H, I),
                           ng * pack::kWeightGroupBytes, bar + 8 * slot);
    ptx::cp_async_bulk_g2s(ss + slot * kB * pack::kScaleGroupBytes, p.s2 + pack::scale_group_offset(e, tile, 0, H, I),
                           ng * pack::kScaleGroupBytes, bar + 8 * slot);
  };
  if (lane == 0)
    for (int j = 0; j < kR && j < items; ++j) issue(j);
  int32_t* row_of_pair = reinterpret_cast<int32_t*>(smem + L.rows_offset);
  for (int i = threadIdx.x; i < pairs; i += kDirectThreads) row_of_pair[i] = -1;
  __syncthreads();
  for (int r = threadIdx.x; r < valid; r += kDirectThreads) row_of_pair[wr.pair(r)] = r;
  ptx::griddep_wait();  // gate_up's SwiGLU rows are complete and visible
  // (No launch_dependents: the pass's last kernel, as the direct down kernel.)
  direct_stage_rows(p, valid, smem + L.act_offset, L.row_stride);
  __syncthreads();
  float* terms = reinterpret_cast<float*>(smem + L.terms_offset);
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int j = 0; j < items; ++j) {
    const int cc = warp + kDirectWarps * j, slot = j % kR;
    const int row0 = wr.start(cc), rows = wr.rows(cc);
    // Column m of the mma is the chunk's row m (rows past the chunk's read its last row; their sums are not stored).
    const uint8_t* x_lane = smem + L.act_offset + (row0 + min(lane & 7, rows - 1)) * L.row_stride + (lane >> 3) * 16;
    ptx::mbarrier_wait(bar + 8 * slot, static_cast<uint32_t>(j / kR) & 1u);
#pragma unroll
    for (int i = 0; i < kB; ++i)
      if (i < ng)
        direct_group_staged(acc, ws + slot * kB * pack::kWeightGroupBytes, ss + slot * kB * pack::kScaleGroupBytes, i,
                            lane, x_lane + i * 128, p.ex.dequant_mul);
    __syncwarp();  // every lane has read the slot
    if (lane == 0 && j + kR < items) {
      ptx::fence_proxy_async_shared();  // (those generic-proxy reads before the copy that overwrites them)
      issue(j + kR);
    }
    direct_store_terms(p, wr, cc, p.alpha2[wr.expert(cc)], acc, terms);
#pragma unroll
    for (int q = 0; q < 4; ++q) acc[q] = 0.0f;
  }
  __syncthreads();
  direct_finalize_columns(p, terms, row_of_pair, tile);
}

}  // namespace fp4moe::kernels
