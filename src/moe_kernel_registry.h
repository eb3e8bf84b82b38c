// The grouped-GEMM kernel configs compiled into fp4moe (per architecture), for the layer, planner and tests.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/moe_gemm.cuh"
#include "kernels/moe_gemm_ws.cuh"

namespace fp4moe::detail {

using GemmKernelFn = void (*)(const kernels::MoeGemmParams, const kernels::RoutingParams);

struct MoeKernelSet {
  int block_m, block_n, block_k, stages, arch, threads;
  int blocks_per_sm;  // planned (__launch_bounds__): two block_m 8 configs on sm_90 differ in it (2 and 3)
  int64_t smem_bytes;
  GemmKernelFn gate_up, down_store, down_atomic;
  // The same with kFusedRouting (routing of at most 32 pairs inside the GEMMs); nullptr where not built.
  GemmKernelFn gate_up_fused = nullptr, down_store_fused = nullptr, down_atomic_fused = nullptr;
  // A producer warpgroup and block_n / 64 consumer warpgroups per block, one block per SM
  // (kernels/moe_gemm_ws.cuh); the layer prefers it for its block_m unless MoeLayerOptions::warp_specialized is off.
  bool warp_specialized = false;
  // Every kernel of the set: the three epilogues, then their fused-routing versions where built.
  std::vector<GemmKernelFn> all() const {
    std::vector<GemmKernelFn> v{gate_up, down_store, down_atomic};
    for (GemmKernelFn f : {gate_up_fused, down_store_fused, down_atomic_fused})
      if (f != nullptr) v.push_back(f);
    return v;
  }
};

// Every shipped config; `arch` is the compute-capability family it was planned for (90 or 120).
const std::vector<MoeKernelSet>& moe_kernel_sets();

}  // namespace fp4moe::detail
