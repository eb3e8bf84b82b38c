// The grouped-GEMM kernels compiled into fp4moe: one set per catalogue config and arch, for the layer and tests.
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstddef>
#include <vector>

#include "kernels/moe_gemm_catalogue.h"
#include "kernels/moe_gemm_params.cuh"

namespace fp4moe::detail {

using GemmKernelFn = void (*)(const kernels::MoeGemmParams, const kernels::MoeGemmExtras);
// The cluster decode kernel: gate_up's and down's parameters, the routing.
using ClusterDecodeFn = void (*)(const kernels::MoeGemmParams, const kernels::MoeGemmParams, const kernels::MoeGemmExtras);

struct MoeKernelSet {
  catalogue::ShippedConfig config;  // the catalogue entry on its arch: tile, family, stages, threads, smem
  size_t tile_index = 0;            // into catalogue::kTiles
  // down_store: fp32 partials (FinalizeMode::kDeterministic); down_store_bf16: bf16 ones (kDeterministicBf16).
  GemmKernelFn gate_up = nullptr, down_store = nullptr, down_store_bf16 = nullptr, down_atomic = nullptr;
  // The same with kFusedRouting (routing of at most kMaxFusedRoutingPairs pairs inside the GEMMs: the decode tiles,
  // catalogue fused_routing); nullptr where not built.
  GemmKernelFn gate_up_fused = nullptr, down_store_fused = nullptr, down_store_bf16_fused = nullptr,
               down_atomic_fused = nullptr;
  // gate_up with split K (kSplitK), without and with fused routing: the decode tiles with catalogue split_k;
  // nullptr elsewhere.
  GemmKernelFn gate_up_split = nullptr, gate_up_split_fused = nullptr;
  // gate_up's tail kernel (kTail: the last partial round's tiles in K pieces, after gate_up): the tiles with catalogue
  // gate_up_tail, on sm_90; nullptr elsewhere.
  GemmKernelFn gate_up_tail = nullptr;
  // The cluster decode kernel of the tile (catalogue cluster_decode, sm_90); nullptr elsewhere. Not in all(): another
  // signature (the layer sets its shared memory itself).
  ClusterDecodeFn cluster_decode = nullptr;
  // Every kernel of the set: the four epilogues, then their fused-routing, split-K and tail versions where built.
  std::vector<GemmKernelFn> all() const {
    std::vector<GemmKernelFn> v{gate_up, down_store, down_store_bf16, down_atomic};
    for (GemmKernelFn f : {gate_up_fused, down_store_fused, down_store_bf16_fused, down_atomic_fused, gate_up_split,
                           gate_up_split_fused, gate_up_tail})
      if (f != nullptr) v.push_back(f);
    return v;
  }
};

// Every compiled config, for each arch family of catalogue::kKernelArchs, in catalogue order.
const std::vector<MoeKernelSet>& moe_kernel_sets();

// Whether the sm_120 configs' kernels also have bodies in the sm_90 cubin (FP4MOE_SM120_ON_SM90).
constexpr bool sm120_configs_run_on_sm90() {
#if defined(FP4MOE_SM120_ON_SM90)
  return true;
#else
  return false;
#endif
}

}  // namespace fp4moe::detail
