// Instantiates the shipped grouped-GEMM configs: block_m in {8, 16, 32, 64} x {sm_90, sm_120}; keep
// kShipped in src/planner.cc in step (test PlannerGpu and scripts/check-cubin compare the two).
#include "src/moe_kernel_registry.h"

namespace fp4moe::detail {
namespace {

template <int M, int N, int K, int Arch>
MoeKernelSet make_set() {
  using C = MoeGemmConfig<M, N, K, moe_gemm_planned_stages(M, N, K, Arch), Arch>;
  return MoeKernelSet{M, N, K, C::kStages, Arch, C::kThreads, C::kSmemBytes,
                      kernels::moe_gemm_kernel<C, kernels::MoeEpilogue::kSwiGLU>,
                      kernels::moe_gemm_kernel<C, kernels::MoeEpilogue::kFinalizeStore>,
                      kernels::moe_gemm_kernel<C, kernels::MoeEpilogue::kFinalizeAtomic>};
}

}  // namespace

const std::vector<MoeKernelSet>& moe_kernel_sets() {
  static const std::vector<MoeKernelSet> sets = {
      make_set<8, 128, 256, 90>(),   make_set<16, 128, 256, 90>(),
      make_set<32, 128, 256, 90>(),  make_set<64, 128, 128, 90>(),
      make_set<8, 128, 256, 120>(),  make_set<16, 128, 256, 120>(),
      make_set<32, 128, 256, 120>(), make_set<64, 128, 128, 120>(),
  };
  return sets;
}

}  // namespace fp4moe::detail
