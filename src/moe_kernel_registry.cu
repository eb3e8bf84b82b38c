// Instantiates the shipped grouped-GEMM configs: block_m in {8, 16, 32, 64} x {sm_90, sm_120}, on sm_90 the
// 8-token tile a second time at 3 blocks per SM, and warp-specialized 16-, 32- and 64-token tiles (sm_90);
// keep kShipped in src/planner.cc in step (test PlannerGpu and scripts/check-cubin compare the two).
#include "src/moe_kernel_registry.h"

namespace fp4moe::detail {
namespace {

// The decode tiles (block_m <= 16) also get kernels that route at most 32 pairs themselves (kFusedRouting).
template <int M, int N, int K, int Arch, int Blocks = 2>
MoeKernelSet make_set() {
  using C = MoeGemmConfig<M, N, K, moe_gemm_planned_stages(M, N, K, Arch, Blocks), Arch, Blocks>;
  using kernels::MoeEpilogue;
  MoeKernelSet s{M, N, K, C::kStages, Arch, C::kThreads, C::kMinBlocksPerSm, C::kSmemBytes,
                 kernels::moe_gemm_kernel<C, MoeEpilogue::kSwiGLU>,
                 kernels::moe_gemm_kernel<C, MoeEpilogue::kFinalizeStore>,
                 kernels::moe_gemm_kernel<C, MoeEpilogue::kFinalizeAtomic>};
  if constexpr (M <= 16 && Blocks == 2) {  // (the layer takes the 3-block 8-token config above 64 pairs only)
    s.gate_up_fused = kernels::moe_gemm_kernel<C, MoeEpilogue::kSwiGLU, true>;
    s.down_store_fused = kernels::moe_gemm_kernel<C, MoeEpilogue::kFinalizeStore, true>;
    s.down_atomic_fused = kernels::moe_gemm_kernel<C, MoeEpilogue::kFinalizeAtomic, true>;
  }
  return s;
}

// Warp-specialized sm_90 tiles (MoeLayerOptions::warp_specialized, on by default): 256 weight rows per tile.
template <int M, int N, int K>
MoeKernelSet make_ws_set() {
  using C = MoeGemmWsConfig<M, N, K, moe_gemm_ws_planned_stages(M, N, K, 90)>;
  using kernels::MoeEpilogue;
  MoeKernelSet s{M, N, K, C::kStages, 90, C::kThreads, C::kMinBlocksPerSm, C::kSmemBytes,
                 kernels::moe_gemm_ws_kernel<C, MoeEpilogue::kSwiGLU>,
                 kernels::moe_gemm_ws_kernel<C, MoeEpilogue::kFinalizeStore>,
                 kernels::moe_gemm_ws_kernel<C, MoeEpilogue::kFinalizeAtomic>};
  s.warp_specialized = true;
  return s;
}

}  // namespace

const std::vector<MoeKernelSet>& moe_kernel_sets() {
  static const std::vector<MoeKernelSet> sets = {
      make_set<8, 128, 256, 90>(),   make_set<8, 128, 256, 90, 3>(), make_set<16, 128, 256, 90>(),
      make_set<32, 128, 256, 90>(),  make_set<64, 128, 128, 90>(),
      make_set<8, 128, 256, 120>(),  make_set<16, 128, 256, 120>(),
      make_set<32, 128, 256, 120>(), make_set<64, 128, 128, 120>(),
      make_ws_set<16, 256, 128>(),   make_ws_set<32, 256, 128>(),   make_ws_set<64, 256, 128>(),
  };
  return sets;
}

}  // namespace fp4moe::detail
