// Unit tests of the planner: tables, fp4moe kernel plans (formulas, monotonicity, shipped configs fit).
// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <algorithm>

#include "kernels/moe_gemm_catalogue.h"
#include "kernels/moe_gemm_layout.h"
#include "fp4moe/planner.h"

namespace fp4moe {
namespace {

TEST(Planner, ArchLookupAndErrors) {
  const ArchInfo* a = nullptr;
  ASSERT_TRUE(find_arch("sm_120a", &a).is_ok());
  EXPECT_EQ(a->smem_per_block, 101376);
  ASSERT_TRUE(find_arch("sm90", &a).is_ok());
  EXPECT_EQ(a->smem_per_block, 232448);
  const Status s = find_arch("sm_75", &a);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("sm_121"), std::string::npos) << "lists the known archs";
  for (const auto& row : arch_table()) EXPECT_EQ(arch_info(row.cc).smem_per_block, row.smem_per_block) << row.name;
  const GpuInfo* g = nullptr;
  ASSERT_TRUE(find_gpu("rtx pro 6000", &g).is_ok());
  EXPECT_EQ(g->cc, 120);
  EXPECT_FALSE(find_gpu("tpu", &g).is_ok());
  const ModelPreset* m = nullptr;
  ASSERT_TRUE(find_model("GLM5", &m).is_ok());
  EXPECT_EQ(m->shape.hidden, 6144);
  EXPECT_FALSE(find_model("llama", &m).is_ok());
}

// Preset, GPU and arch names: exact names, aliases and the CUDA runtime's device names work; empty, non-ASCII,
// punctuation-only, unknown and ambiguous names are errors that list the candidates.
TEST(Planner, NamesAreExactAliasesOrUniquePrefixes) {
  const ModelPreset* m = nullptr;
  ASSERT_TRUE(find_model("glm-5 (744b-a40b)", &m).is_ok());
  EXPECT_STREQ(m->key, "glm5");
  ASSERT_TRUE(find_model("Qwen3-30B", &m).is_ok());
  EXPECT_STREQ(m->key, "qwen3-30b");
  ASSERT_TRUE(find_model("mixtral", &m).is_ok());
  for (const char* bad : {"", "glm5\xc3\xa9", "\xf0\x9f\x99\x82", "!!!", "llama"}) {
    m = nullptr;
    const Status s = find_model(bad, &m);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << "'" << bad << "'";
    EXPECT_EQ(m, nullptr);
    EXPECT_NE(s.message().find("glm5, deepseek-v3"), std::string::npos) << s.message();
  }
  for (const char* ambiguous : {"qwen3", "g"}) {
    const Status s = find_model(ambiguous, &m);
    EXPECT_NE(s.message().find("ambiguous"), std::string::npos) << ambiguous << ": " << s.message();
  }
  EXPECT_NE(find_model("qwen3", &m).message().find("qwen3-235b, qwen3-30b"), std::string::npos);
  const GpuInfo* g = nullptr;
  for (const char* name : {"NVIDIA H200", "h200", "NVIDIA GeForce RTX 4090", "NVIDIA RTX PRO 6000 Blackwell Workstation Edition",
                           "NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA A100-SXM4-80GB", "DGX Spark", "NVIDIA GB10",
                           "RTX 3090", "A40", "B300", "GB200"}) {
    ASSERT_TRUE(find_gpu(name, &g).is_ok()) << name << ": " << find_gpu(name, &g).message();
  }
  ASSERT_TRUE(find_gpu("NVIDIA H100 PCIe", &g).is_ok());
  EXPECT_EQ(g->sms, 114);
  ASSERT_TRUE(find_gpu("DGX Spark", &g).is_ok());
  EXPECT_EQ(g->cc, 121);
  for (const char* bad : {"!!!", "", "tpu", "h"}) EXPECT_FALSE(find_gpu(bad, &g).is_ok()) << bad;
  EXPECT_NE(find_gpu("h", &g).message().find("ambiguous"), std::string::npos);
  const ArchInfo* a = nullptr;
  ASSERT_TRUE(find_arch("sm_120f", &a).is_ok());
  EXPECT_EQ(a->cc, 120);
  EXPECT_FALSE(find_arch("", &a).is_ok());
  EXPECT_FALSE(find_arch("sm_90\xc3\xa9", &a).is_ok());
  EXPECT_EQ(find_model("glm5", nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(plan_kernels(MoeShape{256, 6144, 2048, 8}, *a, std::nullopt, std::nullopt, nullptr).code(),
            StatusCode::kInvalidArgument);
}

// A call that is rejected leaves *out as it was; a forced stage count other than the built one is not "shipped".
TEST(Planner, RejectedCallsWriteNothingAndForcedStagesAreNotShipped) {
  const ArchInfo* a = nullptr;
  ASSERT_TRUE(find_arch("sm_90", &a).is_ok());
  std::vector<KernelPlan> plans(3);
  EXPECT_FALSE(plan_kernels(MoeShape{256, 6144, 2048, 8}, *a, std::nullopt, 0, &plans).is_ok());
  EXPECT_EQ(plans.size(), 3u);
  EXPECT_FALSE(plan_kernels(MoeShape{1, int64_t{1} << 62, 256, 1}, *a, std::nullopt, std::nullopt, &plans).is_ok());
  EXPECT_EQ(plans.size(), 3u);
  std::vector<KernelPlan> planned;
  ASSERT_TRUE(plan_kernels(MoeShape{256, 6144, 2048, 8}, *a, std::nullopt, std::nullopt, &planned).is_ok());
  ASSERT_TRUE(plan_kernels(MoeShape{256, 6144, 2048, 8}, *a, std::nullopt, 6, &plans).is_ok());
  ASSERT_EQ(plans.size(), planned.size());
  int forced_equal = 0;
  for (size_t i = 0; i < plans.size(); ++i) {
    EXPECT_EQ(plans[i].shipped, planned[i].shipped && planned[i].stages == 6) << plans[i].block_m << " at 6 stages";
    forced_equal += planned[i].stages == 6;
  }
  EXPECT_GT(forced_equal, 0) << "(the 64-token tiles are built with 6 stages: they stay shipped)";
  ASSERT_TRUE(plan_kernels(MoeShape{256, 6144, 2048, 8}, *a, std::nullopt, 1, &plans).is_ok());
  for (const auto& p : plans) {
    EXPECT_FALSE(p.fits);
    EXPECT_NE(p.reason.find("1 requested"), std::string::npos) << p.reason;
  }
  EXPECT_EQ(with_commas(INT64_MIN), "-9,223,372,036,854,775,808");
  EXPECT_EQ(with_commas(-1024), "-1,024");
}

TEST(Planner, ShippedFollowsTheCudaTargetsBuilt) {
  EXPECT_TRUE(cuda_target_runs_on("90a", 90));
  EXPECT_FALSE(cuda_target_runs_on("90a", 100)) << "arch-specific SASS runs on its own compute capability only";
  EXPECT_TRUE(cuda_target_runs_on("120a", 120));
  EXPECT_FALSE(cuda_target_runs_on("120a", 121));
  EXPECT_TRUE(cuda_target_runs_on("120f", 121)) << "family-specific: the family's later minors";
  EXPECT_TRUE(cuda_target_runs_on("120", 121));
  EXPECT_FALSE(cuda_target_runs_on("121a", 120));
  EXPECT_FALSE(cuda_target_runs_on("80", 86)) << "runs there, but no kernel of the sm_80 cubin has a body";
  EXPECT_FALSE(cuda_target_runs_on("90x", 90));
  EXPECT_FALSE(cuda_target_runs_on("", 90));
  // arch_has_kernels is exactly "some built target runs there".
  for (const auto& a : arch_table()) {
    bool any = false;
    for (const auto& t : built_cuda_targets()) any = any || cuda_target_runs_on(t, a.cc);
    EXPECT_EQ(arch_has_kernels(a.cc), any && catalogue::kernels_planned_for(a.cc)) << a.name;
  }
}

TEST(Planner, LayoutFormulaByteByByte) {
  // 16 x 128 x 256: weights 128*256/2, scales 128*256/16, activations 16*256*2 + 16 B padding per row; a decode
  // tile, so after the stages the routing tables of 64 pairs: 6 int32 or fp32 per pair, the chunk and row counts,
  // 8 B of padding.
  const auto l = moe_gemm_smem_layout(16, 128, 256, 4);
  EXPECT_EQ(l.weight_tile, 16384);
  EXPECT_EQ(l.scale_tile, 2048);
  EXPECT_EQ(l.act_tile, 8192);
  EXPECT_EQ(l.act_padding, 256);
  EXPECT_EQ(l.stage_bytes, 26880);
  EXPECT_EQ(l.routing, 6 * 64 * 4 + 16);
  EXPECT_EQ(l.routing_offset, 4 * 26880);
  EXPECT_EQ(l.total, 4 * 26880 + 1552);
  EXPECT_EQ(l.act_offset, 16384 + 2048);
  EXPECT_EQ(l.act_row_stride, 528);
  // 32 tokens: no tables (the routing kernel's in global memory).
  const auto l32 = moe_gemm_smem_layout(32, 128, 256, 2);
  EXPECT_EQ(l32.routing, 0);
  EXPECT_EQ(l32.total, 2 * l32.stage_bytes);
  // The stage count that fits a budget leaves room for the tables: 4 stages + tables = 109,072 B.
  EXPECT_EQ(moe_gemm_max_stages(16, 128, 256, 109072), 4);
  EXPECT_EQ(moe_gemm_max_stages(16, 128, 256, 109071), 3);
}

TEST(Planner, MoreBudgetNeverMeansFewerStagesAndPlansNeverExceedTheBudget) {
  for (int m : {8, 16, 32, 64, 128})
    for (int n : {16, 64, 128, 256})
      for (int k : {64, 128, 256, 512}) {
        int prev = 0;
        for (int64_t budget = 0; budget <= 240000; budget += 1000) {
          const int s = moe_gemm_max_stages(m, n, k, budget);
          ASSERT_GE(s, prev) << m << "x" << n << "x" << k << " budget " << budget;
          if (s > 0) {
            ASSERT_LE(moe_gemm_smem_layout(m, n, k, s).total, budget);
          }
          ASSERT_GT(moe_gemm_smem_layout(m, n, k, s + 1).total, budget);  // and it is the largest
          prev = s;
        }
      }
}

TEST(Planner, ShippedConfigsFitSm90AndSm120ForGlm5) {
  const ModelPreset* m = nullptr;
  ASSERT_TRUE(find_model("glm5", &m).is_ok());
  for (const char* arch : {"sm_90", "sm_120", "sm_121"}) {
    const ArchInfo* a = nullptr;
    ASSERT_TRUE(find_arch(arch, &a).is_ok());
    std::vector<KernelPlan> plans;
    ASSERT_TRUE(plan_kernels(m->shape, *a, std::nullopt, std::nullopt, &plans).is_ok());
    // 4 tiles and 4 small-K tiles (K 64) x 2 GEMMs; on sm_90 also the 8-token tile at 3 blocks per SM (5 stages at
    // 2, 3 at 3) and the warp-specialized 16x256x128, 32x256x128, 64x256x128 and 128x256x128 tiles (one block per
    // SM; two 8-byte mbarriers per stage), whose 32- and 64-token small-K tiles are warp-specialized there too.
    ASSERT_EQ(plans.size(), std::string(arch) == "sm_90" ? 26u : 16u);
    if (std::string(arch) == "sm_90") {
      EXPECT_EQ(plans[0].block_m, 8);
      EXPECT_EQ(plans[0].stages, 5);
      EXPECT_EQ(plans[0].blocks_per_sm, 2);
      EXPECT_EQ(plans[2].block_m, 8);
      EXPECT_EQ(plans[2].stages, 3);
      EXPECT_EQ(plans[2].blocks_per_sm, 3);
      int ws = 0;
      for (const auto& p : plans) {
        if (!p.warp_specialized) continue;
        ++ws;
        EXPECT_EQ(p.block_n, 256);
        EXPECT_EQ(p.blocks_per_sm, 1);
        EXPECT_EQ(p.smem.barriers, 16 * p.stages);
        EXPECT_EQ(p.smem.epilogue, p.stages * (16 + 8 * p.block_m));  // one item record per stage
        EXPECT_EQ(p.smem.total, p.smem.pipeline + p.smem.barriers + p.smem.epilogue);
        EXPECT_EQ(p.smem.barrier_offset, p.smem.pipeline);
        EXPECT_EQ(p.smem.epilogue_offset, p.smem.pipeline + p.smem.barriers);
        EXPECT_NE(p.reason.find("mbarriers"), std::string::npos) << p.reason;
        EXPECT_NE(p.reason.find("item records"), std::string::npos) << p.reason;
      }
      EXPECT_EQ(ws, 12);  // the 16-, 32-, 64- and 128-token tiles and the 32- and 64-token small-K ones, x 2 GEMMs
      const auto prefill = std::find_if(plans.begin(), plans.end(), [](const KernelPlan& p) { return p.block_m == 128; });
      ASSERT_NE(prefill, plans.end());
      EXPECT_EQ(prefill->stages, 4);  // 51,200 B per stage + its barriers and record: 4 in 232,448 B
      EXPECT_EQ(prefill->smem.total, 209024);
    }
    for (const auto& p : plans) EXPECT_TRUE(!p.warp_specialized || std::string(arch) == "sm_90");
    for (const auto& p : plans) {
      EXPECT_TRUE(p.fits) << arch << " " << p.reason;
      EXPECT_EQ(p.shipped, arch_has_kernels(a->cc)) << arch << ": shipped exactly where this build has kernels";
      EXPECT_LE(p.smem.total, a->smem_per_block);
      EXPECT_GE(p.stages, 2);
      EXPECT_GE(p.blocks_per_sm, 1);
    }
  }
}

// The block_ms each arch has tiles for: sm_90 adds the warp-specialized 128-token tile, sm_120 and sm_121 stop at
// 64, an arch without kernels has none; all of them are among the catalogue's.
TEST(Planner, ShippedBlockMsPerArch) {
  EXPECT_EQ(shipped_block_ms(90), (std::vector<int>{8, 16, 32, 64, 128}));
  EXPECT_EQ(shipped_block_ms(120), (std::vector<int>{8, 16, 32, 64}));
  EXPECT_EQ(shipped_block_ms(121), (std::vector<int>{8, 16, 32, 64}));
  EXPECT_TRUE(shipped_block_ms(80).empty());
  EXPECT_EQ(shipped_block_ms(), shipped_block_ms(90));
}

// The warp-specialized tiles' item widths: the smallest multiple of kWsShortItemStep that holds the rows, at most the
// tile (what the kernel's K loops and the 128-token tile's chunk costs count), for every tile wider than one step.
TEST(Planner, ShortItemWidthsAreTheRowsRoundedUpToTheStep) {
  EXPECT_FALSE(moe_gemm_ws_short_items(16, false));
  EXPECT_FALSE(moe_gemm_ws_short_items(32, /*bf16_partials=*/true));  // (its consumers would spill)
  EXPECT_TRUE(moe_gemm_ws_short_items(64, true));
  EXPECT_TRUE(moe_gemm_ws_short_items(128, true));
  for (int block_m : {32, 64, 128}) {
    EXPECT_TRUE(moe_gemm_ws_short_items(block_m, false)) << block_m;
    for (int rows = 1; rows <= block_m; ++rows) {
      const int n = moe_gemm_ws_item_tokens(rows, block_m);
      EXPECT_GE(n, rows) << rows;
      EXPECT_LE(n, block_m) << rows;
      EXPECT_EQ(n % kWsShortItemStep, 0) << rows;
      EXPECT_LT(n - rows, kWsShortItemStep) << rows;
    }
  }
  EXPECT_EQ(moe_gemm_ws_item_tokens(17, 32), 32);
  EXPECT_EQ(moe_gemm_ws_item_tokens(40, 64), 48);
  EXPECT_EQ(moe_gemm_ws_item_tokens(1, 128), 16);
  EXPECT_EQ(moe_gemm_ws_item_tokens(65, 128), 80);
  EXPECT_EQ(moe_gemm_ws_item_tokens(128, 128), 128);
  EXPECT_EQ(moe_gemm_ws_item_tokens(200, 128), 128);  // (capped at the tile)
}

TEST(Planner, CustomTilesAndClearErrors) {
  const ArchInfo* a = nullptr;
  ASSERT_TRUE(find_arch("sm_120", &a).is_ok());
  const MoeShape glm{256, 6144, 2048, 8};
  std::vector<KernelPlan> plans;
  // A tile that cannot fit even two stages in 101,376 B.
  ASSERT_TRUE(plan_kernels(glm, *a, std::vector<int>{128, 256, 512}, std::nullopt, &plans).is_ok());
  EXPECT_FALSE(plans[0].fits);
  EXPECT_NE(plans[0].reason.find("does not fit"), std::string::npos) << plans[0].reason;
  // Forcing too many stages names the overshoot and the stage count that fits.
  ASSERT_TRUE(plan_kernels(glm, *a, std::vector<int>{16, 128, 256}, 4, &plans).is_ok());
  EXPECT_FALSE(plans[0].fits);
  EXPECT_NE(plans[0].reason.find("over by 7,696"), std::string::npos) << plans[0].reason;
  EXPECT_NE(plans[0].reason.find("1,552 B of routing tables"), std::string::npos) << plans[0].reason;
  EXPECT_NE(plans[0].reason.find("use 3 stages"), std::string::npos) << plans[0].reason;
  // Tile not a multiple of the MMA shape; K of the model not a multiple of 16.
  EXPECT_NE(plan_kernels(glm, *a, std::vector<int>{12, 128, 256}, std::nullopt, &plans).message().find("multiple of 8"),
            std::string::npos);
  EXPECT_NE(plan_kernels(glm, *a, std::vector<int>{16, 100, 256}, std::nullopt, &plans).message().find("multiple of 16"),
            std::string::npos);
  EXPECT_NE(plan_kernels(glm, *a, std::vector<int>{16, 128, 96}, std::nullopt, &plans).message().find("multiple of 64"),
            std::string::npos);
  EXPECT_NE(plan_kernels(MoeShape{8, 6150, 2048, 2}, *a, std::nullopt, std::nullopt, &plans).message().find("multiples of 16"),
            std::string::npos);
  // A tile whose shared memory fits but which the kernels' copy assignment cannot serve: 32 copying threads
  // (block_n 16) for 64 chunks per token row (block_k 512). The planner says so instead of "fits".
  ASSERT_TRUE(plan_kernels(glm, *a, std::vector<int>{8, 16, 512}, std::nullopt, &plans).is_ok());
  EXPECT_FALSE(plans[0].fits);
  EXPECT_FALSE(plans[0].buildable);
  EXPECT_NE(plans[0].reason.find("not whole rows apart"), std::string::npos) << plans[0].reason;
  // Every shipped tile is buildable on every arch that builds kernels.
  for (const char* arch : {"sm_90", "sm_120"}) {
    const ArchInfo* b = nullptr;
    ASSERT_TRUE(find_arch(arch, &b).is_ok());
    ASSERT_TRUE(plan_kernels(glm, *b, std::nullopt, std::nullopt, &plans).is_ok());
    for (const auto& p : plans) EXPECT_TRUE(p.buildable) << arch << " " << p.reason;
  }
  // A shape that the tile does not divide.
  ASSERT_TRUE(plan_kernels(MoeShape{128, 2880, 2880, 4}, *a, std::nullopt, std::nullopt, &plans).is_ok());
  EXPECT_FALSE(plans[0].fits);
  EXPECT_NE(plans[0].reason.find("does not divide"), std::string::npos);
}

TEST(Planner, ExpectedActiveExperts) {
  const MoeShape glm{256, 6144, 2048, 8};
  EXPECT_NEAR(expected_active_experts(glm, 1), 8.0, 1e-9);
  EXPECT_NEAR(expected_active_experts(glm, 100000), 256.0, 1e-6);
  EXPECT_NEAR(moe_weight_bytes(glm, 256) / 1e9, 5.4358, 1e-3);
}

// The workspace a call needs, from a shape and a mode alone (what `fp4moe plan --floors` prints): the partial sums
// dominate at large T, bf16 ones are half the fp32 ones, and a shape or T the layer rejects gives 0.
TEST(Planner, WorkspaceBytesByFinalizeMode) {
  const MoeShape tp8{256, 6144, 256, 8};
  const int64_t T = 16384, pairs = T * 8;
  const int64_t f32 = moe_workspace_bytes(tp8, FinalizeMode::kDeterministic, T);
  const int64_t b16 = moe_workspace_bytes(tp8, FinalizeMode::kDeterministicBf16, T);
  const int64_t atom = moe_workspace_bytes(tp8, FinalizeMode::kAtomic, T);
  EXPECT_GT(f32, pairs * 6144 * 4);                        // the fp32 partials and more
  EXPECT_LT(f32, pairs * 6144 * 4 + pairs * 256 * 2 + (int64_t{16} << 20));  // + the activations + the tables
  EXPECT_EQ(f32 - b16, pairs * 6144 * 2);
  EXPECT_EQ(f32 - atom, (pairs - T) * 6144 * 4);
  EXPECT_EQ(moe_workspace_bytes(tp8, FinalizeMode::kDeterministic, T, 2) - f32, pairs * 6144 * 4);  // a 2nd split
  EXPECT_GT(moe_workspace_bytes(tp8, FinalizeMode::kDeterministic, 0), 0);  // T=0: the fixed tables only
  EXPECT_EQ(moe_workspace_bytes(tp8, FinalizeMode::kDeterministic, -1), 0);
  EXPECT_EQ(moe_workspace_bytes(tp8, FinalizeMode::kDeterministic, T, 3), 0);  // not a split count it supports
  EXPECT_EQ(moe_workspace_bytes(MoeShape{256, 6000, 256, 8}, FinalizeMode::kDeterministic, T), 0);  // H % 256
}

}  // namespace
}  // namespace fp4moe
