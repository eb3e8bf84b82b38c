// GPU test: the compiled kernels' shared memory as the runtime reports it equals the planner's figure; and (no GPU
// needed) the compiled kernel sets are the catalogue's configs, which the planner lists as shipped.
// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <algorithm>

#include "fp4moe/planner.h"
#include "src/moe/kernel_registry.h"
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
    const catalogue::ShippedConfig& c = set.config;
    if (c.cc != kernel_arch_family(cc)) continue;
    const KernelPlan* plan = nullptr;
    for (const auto& p : plans)
      if (p.family == c.tile.family && p.block_m == c.tile.block_m && p.block_n == c.tile.block_n &&
          p.block_k == c.tile.block_k && p.stages == c.stages)
        plan = &p;
    ASSERT_NE(plan, nullptr) << "no plan for block_m " << c.tile.block_m << " at " << c.stages << " stages";
    EXPECT_EQ(plan->blocks_per_sm, c.blocks_per_sm) << "__launch_bounds__ vs the planner's blocks per SM";
    EXPECT_EQ(plan->smem.total, c.smem_bytes);
    for (auto fn : set.all()) {
      // The runtime accepts the catalogue's dynamic shared memory for this kernel (it refuses a size that, with the
      // kernel's static shared memory, exceeds the block's opt-in limit).
      CUDA_OK(cudaFuncSetAttribute(reinterpret_cast<const void*>(fn), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(c.smem_bytes)));
      cudaFuncAttributes attr{};
      CUDA_OK(cudaFuncGetAttributes(&attr, reinterpret_cast<const void*>(fn)));
      // The cubins report 1 KB of static shared memory for every kernel, empty ones too (the runtime's
      // per-block reservation); anything above it would be shared memory outside the planner's layout.
      EXPECT_LE(attr.sharedSizeBytes, static_cast<size_t>(arch->reserved_smem_per_block)) << "static shared memory";
      EXPECT_EQ(attr.localSizeBytes, 0u) << "spills";
      EXPECT_LE(static_cast<int64_t>(attr.sharedSizeBytes) + plan->smem.total, arch->smem_per_block);
      int occ = 0;
      CUDA_OK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, reinterpret_cast<const void*>(fn), c.threads,
                                                            static_cast<size_t>(c.smem_bytes)));
      EXPECT_GE(occ, plan->blocks_per_sm) << "the planned blocks per SM are resident";
      // More only where shared memory leaves room (a small-K tile's capped stages): never past what it allows.
      const int64_t by_smem = arch->smem_per_sm / (c.smem_bytes + arch->reserved_smem_per_block);
      EXPECT_LE(occ, std::max<int64_t>(plan->blocks_per_sm, by_smem)) << "block_m " << c.tile.block_m;
      ++checked;
    }
  }
  // Every catalogue tile on this arch: 4 epilogues (SwiGLU, finalize store in fp32 and in bf16, finalize atomic),
  // and for the decode tiles 4 more with fused routing and (but the 8-token tile's 3-block config) 2 split-K gate_up
  // kernels, and on sm_90 the 8-token tile's two configs' gate_up tail kernels (sm_90: 82 kernels, sm_120: 56).
  int want = 0;
  const int family = kernel_arch_family(cc);
  for (size_t i = 0; i < catalogue::kNumTiles; ++i)
    if (catalogue::tile_on(i, family))
      want += 4 + (catalogue::kTiles[i].fused_routing() ? 4 : 0) + (catalogue::kTiles[i].split_k ? 2 : 0) +
              (catalogue::builds_gate_up_tail(catalogue::kTiles[i], family) ? 1 : 0);
  EXPECT_EQ(checked, want);
  EXPECT_EQ(want, family == 90 ? 82 : 56);
}

TEST(PlannerShipped, TheCompiledKernelSetsAreTheCatalogueConfigs) {
  // Runs without a GPU: the registry is host data. Every catalogue tile on each kernel arch has one set, in
  // catalogue order, with the config the planner lists as shipped (where this build has kernels for the arch).
  const auto& sets = detail::moe_kernel_sets();
  size_t next = 0;
  for (int arch : catalogue::kKernelArchs) {
    const ArchInfo* a = nullptr;
    ASSERT_TRUE(find_arch(std::to_string(arch), &a).is_ok());
    std::vector<KernelPlan> plans;
    ASSERT_TRUE(plan_kernels(MoeShape{256, 6144, 2048, 8}, *a, std::nullopt, std::nullopt, &plans).is_ok());
    size_t on_arch = 0;
    for (size_t i = 0; i < catalogue::kNumTiles; ++i) {
      if (!catalogue::tile_on(i, arch)) continue;
      ++on_arch;
      ASSERT_LT(next, sets.size());
      const auto& set = sets[next++];
      EXPECT_EQ(set.tile_index, i);
      EXPECT_EQ(set.config.cc, arch);
      bool found = false;
      for (const auto& p : plans)
        found |= p.shipped == arch_has_kernels(arch) && p.family == set.config.tile.family &&
                 p.block_m == set.config.tile.block_m && p.block_n == set.config.tile.block_n &&
                 p.block_k == set.config.tile.block_k && p.stages == set.config.stages &&
                 p.smem.total == set.config.smem_bytes && p.blocks_per_sm == set.config.blocks_per_sm;
      EXPECT_TRUE(found) << "sm_" << arch << " tile " << i << ": " << set.config.tile.block_m << "x" << set.config.tile.block_n
                         << "x" << set.config.tile.block_k << " stages " << set.config.stages << " smem "
                         << set.config.smem_bytes << " blocks " << set.config.blocks_per_sm;
      EXPECT_EQ(set.gate_up_fused != nullptr, set.config.tile.fused_routing());
      EXPECT_EQ(set.down_store_fused != nullptr, set.config.tile.fused_routing());
      EXPECT_EQ(set.gate_up_split != nullptr, set.config.tile.split_k);
    }
    EXPECT_EQ(plans.size(), 2 * on_arch) << "sm_" << arch << ": two GEMMs per config";
  }
  EXPECT_EQ(next, sets.size());
}

}  // namespace
}  // namespace fp4moe
