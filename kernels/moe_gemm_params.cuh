// The grouped-GEMM kernels' parameters and epilogue kinds (shared by both kernel families).
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/moe_gemm_items.h"
#include "kernels/moe_routing_warp.cuh"
#include "kernels/nvfp4_dequant_mma.cuh"

namespace fp4moe::kernels {

enum class MoeEpilogue {
  kSwiGLU,          // gate_up: out[row, j] = bf16(silu(alpha * gate_j) * alpha * up_j), permuted rows
  kFinalizeStore,   // down, deterministic: partial[row, h] = alpha * router_weight * acc (fp32), summed later in fixed order
  kFinalizeStoreBf16,  // the same rounded to bf16 (FinalizeMode::kDeterministicBf16: half the partial bytes)
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
  int32_t k_splits;            // K ranges per (chunk, N tile) item: 1, or (small T) 2/4/8 dividing K / kBlockK
  __nv_bfloat16* act_out;      // kSwiGLU: [P, N/2]
  // kFinalizeStore: [k_splits, P, N] (kFinalizeStoreBf16: the same in bf16 elements); kFinalizeAtomic: [T, N]; kSwiGLU with k_splits > 1 (multistage kernels):
  // [k_splits, P, N] raw partial sums, then one int32 arrival counter per (chunk, N tile), zeroed before the launch
  float* partial_out;
  int64_t split_stride;        // kFinalizeStore(Bf16), split kSwiGLU: elements between the k_splits partial buffers (P * N)
  const float* topk_weights;   // [T * k] router weights (finalize epilogues)
};
// The routing inputs of the kFusedRouting kernels are a second kernel parameter (RoutingParams), not members of
// this struct: growing this struct changes the code ptxas generates for every kernel, and a version that grew it
// by one int was slower (docs/perf/history.md). For the same reason the chunk-table pointers stay in both
// structs, as the measured kernels have them: the multistage and warp-specialized kernels read them here, the
// fused-routing kernels and the routing kernel in RoutingParams.

// The second parameter of every grouped-GEMM kernel: the routing inputs and tables (read there only by the
// fused-routing kernels, which route the pairs themselves) and the NVFP4 dequantizer's multipliers (= kDequantMul,
// read by all of them: kernels/nvfp4_dequant_mma.cuh says why they are not literals).
struct MoeGemmExtras {
  RoutingParams routing;
  DequantMul dequant_mul;
  // Routing: ids in topk_ids are valid in [0, num_global_experts) (expert parallelism; else = num_experts). Here,
  // after dequant_mul, it fills what was padding: every field the other kernels read keeps its offset.
  int32_t num_global_experts;
  // gate_up (multistage, K whole) followed by its tail kernel (MoeRunPlan::gate_up_tail_pieces): this kernel's grid G.
  // It then takes the first F = floor(tiles / G) x G tiles only (all of them where fewer than G), and the tail kernel
  // the rest, one K piece a block. 0: every tile (no tail kernel).
  int32_t tail_grid;
};

}  // namespace fp4moe::kernels
