// The direct decode path: a step of at most 32 pairs in two kernels, gate_up with its K split over one block's
// warps and down with the finalize folded in; no work list, no split fix-up, no partial sums in global memory.
// SPDX-License-Identifier: Apache-2.0
//
// Why: at T=1 on the TP8 shard the tiled path is three dependent kernels plus a memset for 21 MB of weights
// (docs/perf/shards.md, "T=1 is fixed cost"). Here every block knows its work from blockIdx and the routing it
// computes itself (warp_routing): gate_up block (chunk c, 16-row tile r) has its 8 warps each multiply 1/8 of K
// and adds their sums in warp order in shared memory (the order gate_up_split_fixup uses for 8 K splits, so the
// sums are the same bits); down block r computes 16 columns of H for every pair and then sums each token's
// slots in slot order (the deterministic finalize's order) and stores the output row. Both use mma.sync on the
// prepacked fragments (kernels/weight_pack.h) with the multistage kernels' dequantizer, on every arch.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/moe_decode_direct_layout.h"
#include "kernels/moe_gemm_epilogue.cuh"
#include "kernels/moe_routing_warp.cuh"
#include "kernels/nvfp4_dequant_mma.cuh"
#include "kernels/ptx.cuh"
#include "kernels/weight_pack.h"

namespace fp4moe::kernels {

struct DirectDecodeParams {
  RoutingParams routing;        // block_m = kDirectChunkRows; gate_up's block 0 writes the tables
  int32_t num_global_experts;
  DequantMul dequant_mul;
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
  bool bf16_terms;              // FinalizeMode::kDeterministicBf16: each term rounded to bf16, as its partials are
};

// One 64-wide K group: this warp's 16 weight rows (lane's 16 weight bytes wq and 8 scale bytes sq) times 8 token
// columns from shared memory; x_row is the lane's ldmatrix row address at the group's first K (token lane % 8,
// byte offset 16 * (lane / 8)). The multistage kernels' mma.sync step, in the same order.
__device__ __forceinline__ void direct_group(float (&acc)[4], const uint4 wq, const uint2 sq, const uint8_t* x_row,
                                             const DequantMul& mul) {
  const uint32_t words[4] = {wq.x, wq.y, wq.z, wq.w};
#pragma unroll
  for (int h = 0; h < 2; ++h) {  // two k16 steps per ldmatrix.x4
    uint32_t b[4];
    ptx::ldmatrix_x4(b, x_row + h * 64);
    const uint32_t s_g = scale_pair2(sq.x, h, mul), s_g8 = scale_pair2(sq.y, h, mul);
    uint32_t a0[4], a1[4];
    dequant_a_fragments(words[2 * h], words[2 * h + 1], s_g, s_g8, mul, a0, a1);
    ptx::mma_bf16_16816(acc, a0, b[0], b[1]);
    ptx::mma_bf16_16816(acc, a1, b[2], b[3]);
  }
}

// A warp's ring of K groups in shared memory: slot i holds, for each lane, the 16 weight bytes and 8 scale bytes
// that lane multiplies (LaneSlot's view of a stage, kernels/moe_gemm_mainloop.cuh). Each lane copies its own bytes
// with cp.async and reads back only those, so a slot needs no warp barrier between its copy and its use; one
// commit group per step, so step s has landed after cp.async.wait_group(kSlots - 1) at step s.
template <int kSlots>
struct WarpGroupRing {
  uint8_t* w;  // this lane's weight bytes in slot 0 (slot i: + i * kDirectSlotBytes)
  uint8_t* s;  // this lane's scale bytes in slot 0
  __device__ __forceinline__ WarpGroupRing(uint8_t* warp_smem, int lane)
      : w(warp_smem + lane * 16), s(warp_smem + 512 + lane * 8) {}
  // Copies the group whose lane bytes start at w_src / s_src into `slot`, then commits (with or without a copy).
  __device__ __forceinline__ void issue(int slot, const uint8_t* w_src, const uint8_t* s_src, bool copy) {
    if (copy) {
      ptx::cp_async_16(w + slot * kDirectSlotBytes, w_src);
      ptx::cp_async_8(s + slot * kDirectSlotBytes, s_src);
    }
    ptx::cp_async_commit();
  }
  __device__ __forceinline__ void read(int slot, uint4* wq, uint2* sq) const {
    ptx::cp_async_wait<kSlots - 1>();
    *wq = *reinterpret_cast<const uint4*>(w + slot * kDirectSlotBytes);
    *sq = *reinterpret_cast<const uint2*>(s + slot * kDirectSlotBytes);
  }
};

// Grid: (pairs: the most chunks a call can have) x (2I / 16) tiles, blockIdx.x = chunk * (2I/16) + tile; blocks
// past the call's chunks exit. The forward pass's first kernel: it lets the down kernel launch at once, whose
// blocks route and start their weight copies while these stream theirs.
__global__ void __launch_bounds__(kDirectThreads, kDirectMinBlocks) moe_direct_gate_up_kernel(const DirectDecodeParams p) {
  extern __shared__ __align__(16) uint8_t smem[];
  ptx::griddep_wait();  // (launched without a programmatic predecessor: returns at once)
  ptx::griddep_launch_dependents();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int n = 2 * p.intermediate, n16 = n / 16;
  const int chunk = blockIdx.x / n16, tile = blockIdx.x % n16;
  const WarpRouting wr = warp_routing(p.routing, p.num_global_experts, blockIdx.x == 0);
  if (chunk >= wr.num_chunks) return;  // block-uniform
  const int e = wr.expert(chunk), row0 = wr.start(chunk), rows = wr.rows(chunk);
  const DirectGateUpSmem L = direct_gate_up_smem(p.num_tokens, p.hidden_dim);
  const int groups = p.hidden_dim / pack::kGroupK;
  const int g_begin = warp * groups / kDirectWarps, steps = (warp + 1) * groups / kDirectWarps - g_begin;
  const uint8_t* wsrc = p.w13 + pack::weight_group_offset(e, tile, g_begin, n, p.hidden_dim) + lane * 16;
  const uint8_t* ssrc = p.s13 + pack::scale_group_offset(e, tile, g_begin, n, p.hidden_dim) + (lane >> 2) * 8;
  uint8_t* const wsm = smem + warp * L.warp_bytes;
  WarpGroupRing<kDirectGateUpSlots> ring(wsm, lane);
  const int staged = static_cast<int>(direct_staged_rows(p.num_tokens));
  float* red = reinterpret_cast<float*>(smem + L.red_offset);
  const int g8 = lane >> 2, t4 = lane & 3;
  // Rows r0 .. r0 + prow - 1 of the chunk per pass: one pass unless a token names the expert more than once.
  for (int r0 = 0; r0 < rows; r0 += staged) {  // (block-uniform)
    const int prow = min(staged, rows - r0);
    if (r0 > 0) __syncthreads();  // warp 0 has read the previous pass's sums
#pragma unroll
    for (int i = 0; i < kDirectGateUpSlots; ++i)
      ring.issue(i, wsrc + i * pack::kWeightGroupBytes, ssrc + i * pack::kScaleGroupBytes, i < steps);
    // This warp's K range of the pass's tokens, staged while the weights are on their way.
    for (int m = 0; m < prow; ++m) {
      const int64_t tok = wr.pair(row0 + r0 + m) / p.top_k;  // (warp-uniform)
      const uint4* src = reinterpret_cast<const uint4*>(p.hidden + tok * p.hidden_dim + g_begin * pack::kGroupK);
      for (int c = lane; c < steps * 8; c += 32)
        *reinterpret_cast<uint4*>(wsm + L.x_offset + m * L.row_stride + c * 16) = __ldg(src + c);
    }
    __syncwarp();
    // Columns past the pass's rows read its last row: their sums are never stored (mma columns are independent).
    const uint8_t* x_lane = wsm + L.x_offset + min(lane & 7, prow - 1) * L.row_stride + (lane >> 3) * 16;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int st = 0, slot = 0; st < steps; ++st) {
      uint4 wq;
      uint2 sq;
      ring.read(slot, &wq, &sq);
      direct_group(acc, wq, sq, x_lane + st * 128, p.dequant_mul);
      const int next = st + kDirectGateUpSlots;  // into the slot just read
      ring.issue(slot, wsrc + next * pack::kWeightGroupBytes, ssrc + next * pack::kScaleGroupBytes, next < steps);
      if (++slot == kDirectGateUpSlots) slot = 0;
    }
    ptx::cp_async_wait<0>();
    // The warps' sums in warp order (= K order), then the SwiGLU of rows g (gate) and g + 8 (up) of the tile.
    *reinterpret_cast<float4*>(red + (warp * 32 + lane) * 4) = make_float4(acc[0], acc[1], acc[2], acc[3]);
    __syncthreads();
    if (warp == 0) {
      float sum[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) sum[j] = red[lane * 4 + j];
#pragma unroll
      for (int w = 1; w < kDirectWarps; ++w)
#pragma unroll
        for (int j = 0; j < 4; ++j) sum[j] = sum[j] + red[(w * 32 + lane) * 4 + j];
      const float alpha = p.alpha13[e];
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int m = t4 * 2 + c;
        if (m < prow)
          p.act[static_cast<int64_t>(row0 + r0 + m) * p.intermediate + tile * 8 + g8] =
              __float2bfloat16_rn(swiglu(alpha * sum[c], alpha * sum[2 + c]));
      }
    }
  }
}

// Grid: H / 16 blocks; block r computes columns [16 r, 16 r + 16) of the output for every token. Its warps take
// the call's chunks (warp w: chunks w, w + 8, ...); with fewer chunks than warps, kDirectWarps / chunks warps
// split each chunk's K and their sums are added in K order. Launched as a programmatic dependent of gate_up: the
// routing and the first kDirectDownSlots weight groups per warp do not depend on it; the SwiGLU rows are read
// after griddepcontrol.wait.
__global__ void __launch_bounds__(kDirectThreads, kDirectMinBlocks) moe_direct_down_kernel(const DirectDecodeParams p) {
  extern __shared__ __align__(16) uint8_t smem[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int H = p.hidden_dim, I = p.intermediate, tile = blockIdx.x;
  const int pairs = p.routing.num_pairs;
  const WarpRouting wr = warp_routing(p.routing, p.num_global_experts, false);
  const int nc = wr.num_chunks;
  const DirectDownSmem L = direct_down_smem(pairs, I);
  const int groups = I / pack::kGroupK;
  const int parts = (nc >= kDirectWarps || nc == 0) ? 1 : kDirectWarps / nc;
  const int part = parts == 1 ? 0 : warp / nc;
  const int first = parts == 1 ? warp : warp % nc;  // this warp's first chunk
  const int tasks = parts == 1 ? (nc > warp ? (nc - 1 - warp) / kDirectWarps + 1 : 0) : (warp < nc * parts ? 1 : 0);
  const int gk0 = part * groups / parts, per_task = (part + 1) * groups / parts - gk0;
  const int steps = tasks * per_task;  // step st: task st / per_task (chunk first + 8 * task), group gk0 + st % per_task
  WarpGroupRing<kDirectDownSlots> ring(smem + warp * kDirectDownSlots * kDirectSlotBytes, lane);
  const int64_t lane_w = lane * 16, lane_s = (lane >> 2) * 8;
  auto issue = [&](int slot, int st) {
    const int t = st < steps ? st / per_task : 0, g = gk0 + (st < steps ? st % per_task : 0);
    const int e = wr.expert(first + t * kDirectWarps);  // (every lane: a shuffle)
    ring.issue(slot, p.w2 + pack::weight_group_offset(e, tile, g, H, I) + lane_w,
               p.s2 + pack::scale_group_offset(e, tile, g, H, I) + lane_s, st < steps);
  };
#pragma unroll
  for (int i = 0; i < kDirectDownSlots; ++i) issue(i, i);
  const int valid = nc > 0 ? wr.start(nc - 1) + wr.rows(nc - 1) : 0;  // rows of the permutation
  int32_t* row_of_pair = reinterpret_cast<int32_t*>(smem + L.rows_offset);
  if (warp == 0) {
    if (lane < pairs) row_of_pair[lane] = -1;
    __syncwarp();
    if (lane < valid) row_of_pair[wr.perm] = lane;
  }
  ptx::griddep_wait();  // gate_up's SwiGLU rows are complete and visible
  const int row_chunks = I / 8;  // 16-byte pieces of a row
  for (int i = threadIdx.x; i < valid * row_chunks; i += kDirectThreads) {
    const int r = i / row_chunks, q = i % row_chunks;
    *reinterpret_cast<uint4*>(smem + L.act_offset + r * L.row_stride + q * 16) =
        __ldcg(reinterpret_cast<const uint4*>(p.act + static_cast<int64_t>(r) * I) + q);
  }
  __syncthreads();

  float* terms = reinterpret_cast<float*>(smem + L.terms_offset);
  float* red = reinterpret_cast<float*>(smem + L.red_offset);
  const int g8 = lane >> 2, t4 = lane & 3;
  // Chunk cc's router-weighted terms of the block's 16 columns, as the deterministic down epilogue stores them.
  auto store_terms = [&](int cc, const float (&acc)[4]) {
    const int e = wr.expert(cc), row0 = wr.start(cc), rows = wr.rows(cc);
    const float alpha = p.alpha2[e];
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
  };
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  const uint8_t* x_lane = nullptr;
  for (int st = 0, slot = 0, q = 0; st < steps; ++st) {  // q: the step's group within its task
    const int c = first + (st / per_task) * kDirectWarps;
    if (q == 0) {
      const int row0 = wr.start(c), rows = wr.rows(c);
      x_lane = smem + L.act_offset + (row0 + min(lane & 7, rows - 1)) * L.row_stride + (lane >> 3) * 16;
    }
    uint4 wq;
    uint2 sq;
    ring.read(slot, &wq, &sq);
    direct_group(acc, wq, sq, x_lane + (gk0 + q) * 128, p.dequant_mul);
    issue(slot, st + kDirectDownSlots);  // into the slot just read
    if (++slot == kDirectDownSlots) slot = 0;
    if (++q == per_task && parts == 1) {  // the chunk's last group
      q = 0;
      store_terms(c, acc);
      acc[0] = acc[1] = acc[2] = acc[3] = 0.0f;
    }
  }
  ptx::cp_async_wait<0>();
  if (parts > 1) {
    // This warp's part of its chunk's K (zeros where the part is empty: fewer K groups than parts).
    *reinterpret_cast<float4*>(red + (warp * 32 + lane) * 4) = make_float4(acc[0], acc[1], acc[2], acc[3]);
    __syncthreads();
    if (warp < nc) {  // chunk `warp`: its K parts (warps warp + q nc) in K order
      float sum[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) sum[j] = red[(warp * 32 + lane) * 4 + j];
      for (int q = 1; q < parts; ++q)
#pragma unroll
        for (int j = 0; j < 4; ++j) sum[j] = sum[j] + red[((warp + q * nc) * 32 + lane) * 4 + j];
      store_terms(warp, sum);
    }
  }
  __syncthreads();
  // The finalize: each token's slots in slot order (skipped pairs add nothing), rounded once to bf16.
  const int T = p.num_tokens, k = p.top_k;
  for (int i = threadIdx.x; i < T * 16; i += kDirectThreads) {
    const int t = i >> 4, h = i & 15;
    float s = 0.0f;
    for (int slot = 0; slot < k; ++slot) {
      const int r = row_of_pair[t * k + slot];
      if (r >= 0) s += terms[r * 16 + h];
    }
    p.out[static_cast<int64_t>(t) * H + tile * 16 + h] = __float2bfloat16_rn(s);
  }
}

}  // namespace fp4moe::kernels
