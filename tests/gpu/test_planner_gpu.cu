// GPU test: the compiled kernels' shared memory as the runtime reports it equals the planner's figure.
#include <gtest/gtest.h>

#include "fp4moe/planner.h"
#include "src/moe_kernel_registry.h"
#include "tests/gpu/gpu_test_util.h"

namespace fp4moe {
namespace {

TEST(PlannerGpu, CudaFuncAttributesMatchThePlanForEveryShippedConfig) {
  FP4MOE_SKIP_WITHOUT_GPU();
  cudaDeviceProp prop{};
  CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  const int cc = prop.major * 10 + prop.minor;
  const ArchInfo* arch = nullptr;
  ASSERT_TRUE(find_arch(std::to_string(cc), &arch).is_ok());
  EXPECT_EQ(static_cast<int64_t>(prop.sharedMemPerBlockOptin), arch->smem_per_block) << "table vs live device";
  EXPECT_EQ(static_cast<int64_t>(prop.sharedMemPerMultiprocessor), arch->smem_per_sm) << "table vs live device";
  std::vector<KernelPlan> plans;
  ASSERT_TRUE(plan_kernels(MoeShape{256, 6144, 2048, 8}, *arch, std::nullopt, std::nullopt, &plans).is_ok());
  int checked = 0;
  for (const auto& set : detail::moe_kernel_sets()) {
    if (set.arch != (cc == 121 ? 120 : cc)) continue;
    const KernelPlan* plan = nullptr;
    for (const auto& p : plans)
      if (p.block_m == set.block_m && p.block_n == set.block_n && p.block_k == set.block_k) plan = &p;
    ASSERT_NE(plan, nullptr) << "no plan for block_m " << set.block_m;
    EXPECT_EQ(plan->stages, set.stages);
    EXPECT_EQ(plan->smem.total, set.smem_bytes);
    for (auto fn : {set.gate_up, set.down_store, set.down_atomic}) {
      CUDA_OK(cudaFuncSetAttribute(reinterpret_cast<const void*>(fn), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(set.smem_bytes)));
      cudaFuncAttributes attr{};
      CUDA_OK(cudaFuncGetAttributes(&attr, reinterpret_cast<const void*>(fn)));
      EXPECT_EQ(attr.maxDynamicSharedSizeBytes, plan->smem.total) << "block_m " << set.block_m;
      // The cubins report 1 KB of static shared memory for every kernel, empty ones too (the runtime's
      // per-block reservation); anything above it would be shared memory outside the planner's layout.
      EXPECT_LE(attr.sharedSizeBytes, static_cast<size_t>(kReservedSmemPerBlock)) << "static shared memory";
      EXPECT_EQ(attr.localSizeBytes, 0u) << "spills";
      EXPECT_LE(static_cast<int64_t>(attr.sharedSizeBytes) + plan->smem.total, arch->smem_per_block);
      int occ = 0;
      CUDA_OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, reinterpret_cast<const void*>(fn), set.threads,
                                                            static_cast<size_t>(set.smem_bytes)));
      EXPECT_GE(occ, 1);
      EXPECT_LE(occ, plan->blocks_per_sm) << "the planner's blocks/SM is an upper bound (registers may cut it)";
      ++checked;
    }
  }
  EXPECT_EQ(checked, 12) << "4 block_m configs x 3 epilogues for this arch";
}

TEST(PlannerShipped, PlannerListMatchesTheCompiledKernels) {
  // Runs without a GPU: the registry is host data.
  EXPECT_EQ(shipped_block_ms(), kernel_block_ms());
  for (const auto& set : detail::moe_kernel_sets()) {
    const ArchInfo* a = nullptr;
    ASSERT_TRUE(find_arch(std::to_string(set.arch), &a).is_ok());
    std::vector<KernelPlan> plans;
    ASSERT_TRUE(plan_kernels(MoeShape{256, 6144, 2048, 8}, *a, std::nullopt, std::nullopt, &plans).is_ok());
    bool found = false;
    for (const auto& p : plans)
      found |= p.shipped && p.block_m == set.block_m && p.block_n == set.block_n && p.block_k == set.block_k &&
               p.stages == set.stages && p.smem.total == set.smem_bytes;
    EXPECT_TRUE(found) << "sm_" << set.arch << " block_m " << set.block_m;
  }
}

}  // namespace
}  // namespace fp4moe
