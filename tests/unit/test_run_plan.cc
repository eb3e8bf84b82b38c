// Unit tests of the MoE layer's per-call decision without a GPU: the heuristic's tiles, K splits and routing path
// on the configs an H200 and an RTX PRO 6000 keep resident, the tuning cache's precedence, and the input checks.
// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <vector>

#include "fp4moe/planner.h"
#include "fp4moe/shard.h"
#include "kernels/moe_decode_direct_layout.h"
#include "src/moe/run_plan.h"
#include "tests/unit/run_plan_fixture.h"

namespace fp4moe::detail {
namespace {

using namespace plan_test;  // (resident_on, Fixture, h200)

TEST(RunPlan, H200Glm5TilesFollowTheBusiestExpert) {
  const Fixture f = h200();
  // T=1: 8 pairs on the 8-token tile's deep (2-block) config, routed inside the GEMMs, down K in two (384 items
  // in 2 rounds of 264 = 73% full, 768 in 3 = 97%).
  MoeRunPlan p = f.plan(1);
  EXPECT_EQ(p.block_m, 8);
  EXPECT_EQ(p.gate_up.family, KernelFamily::kMultistage);
  EXPECT_EQ(p.gate_up.grid, 2 * 132);
  EXPECT_TRUE(p.fused_routing);
  EXPECT_EQ(p.down_k_splits, 2);
  EXPECT_FALSE(p.gate_up.wgmma);
  EXPECT_TRUE(p.programmatic_launch);
  EXPECT_NE(p.source.find("heuristic"), std::string::npos) << p.source;
  // T=4: 32 pairs, fused, both GEMMs on the deep config. T=8: 64 pairs, still fused (the 8-token tile has no
  // warp-specialized rival), gate_up deep, down by the expected round fill; at block_m 16 (which has one) only up to
  // 32 pairs. T=9: 72, the routing kernel.
  p = f.plan(4);
  EXPECT_TRUE(p.fused_routing);
  EXPECT_EQ(p.down.grid, 2 * 132);
  p = f.plan(8);
  EXPECT_TRUE(p.fused_routing) << p.to_string();
  EXPECT_EQ(p.block_m, 8);
  EXPECT_EQ(p.gate_up.grid, 2 * 132);
  EXPECT_TRUE(f.plan(4, 16).fused_routing);
  EXPECT_FALSE(f.plan(5, 16).fused_routing);
  EXPECT_EQ(f.plan(5, 16).gate_up.family, KernelFamily::kWarpSpecialized);
  EXPECT_FALSE(f.plan(9).fused_routing);
  // T=128: busiest expert 10 (<= 12), the 8-token tile; 1024 pairs take its 3-block config.
  p = f.plan(128);
  EXPECT_EQ(p.block_m, 8);
  EXPECT_EQ(p.gate_up.grid, 3 * 132);
  // T=192: busiest 13.3: the warp-specialized 16-token tile. T=512: busiest 28: the 32-token one. T=1024: 64.
  p = f.plan(192);
  EXPECT_EQ(p.block_m, 16);
  EXPECT_EQ(p.gate_up.family, KernelFamily::kWarpSpecialized);
  EXPECT_TRUE(p.gate_up.wgmma);
  EXPECT_EQ(p.gate_up.grid, 132);
  EXPECT_EQ(f.plan(512).block_m, 32);
  EXPECT_EQ(f.plan(1024).block_m, 64);
  EXPECT_EQ(f.plan(4096).gate_up.family, KernelFamily::kWarpSpecialized);
  // Above kMaxSplitTokens the down GEMM is never split.
  EXPECT_EQ(f.plan(65).down_k_splits, 1);
  // The unsharded shape: both GEMMs run the same tile at every T, and the same config except at T=8, where gate_up
  // (64 pairs) keeps the 8-token tile's deep config and down takes the 3-block one (its 2736 expected items fill
  // 98.7% of 7 rounds of 396 blocks, 94% of 11 rounds of 264).
  for (int64_t T : {1, 8, 64, 192, 512, 4096}) {
    const MoeRunPlan q = f.plan(T);
    EXPECT_EQ(q.gate_up.family, q.down.family) << T;
    EXPECT_EQ(q.gate_up.block_k, q.down.block_k) << T;
    if (T != 8) {
      EXPECT_EQ(q.gate_up.grid, q.down.grid) << T;
    }
  }
  EXPECT_EQ(f.plan(8).gate_up.grid, 2 * 132);
  EXPECT_EQ(f.plan(8).down.grid, 3 * 132);
  // The plan's text names each GEMM's config where they differ in anything, here only in stages and blocks.
  const std::string t8 = f.plan(8).to_string();
  EXPECT_NE(t8.find("gate_up multistage 128x256, 5 stages"), std::string::npos) << t8;
  EXPECT_NE(t8.find("down multistage 128x256, 3 stages"), std::string::npos) << t8;
  EXPECT_NE(t8.find("396 blocks"), std::string::npos) << t8;
  // to_string says it all in one line.
  const std::string s = f.plan(192).to_string();
  for (const char* part : {"T=192", "block_m 16, both GEMMs warp-specialized 256x128", "stages", "wgmma", "deterministic finalize"})
    EXPECT_NE(s.find(part), std::string::npos) << part << " in " << s;
}

// sm_90's 8-token tile at 2 and 3 blocks per SM, chosen per GEMM: the deep (2-block) config up to 32 pairs and for
// gate_up up to 64; above, the 3-block one unless the deep one's rounds are expected 10 points
// fuller. GLM-5 TP8 (gate_up: 4 N tiles of 128 per chunk): T=16 gate_up 412 items, 78% of 2 rounds of 264 against 52%
// of 2 of 396 -> deep; T=32 656 items, 83% either way -> 3 blocks; T=64 888, 84% against 75% -> 3 blocks; T=128
// 1004, 95% against 85% -> deep. Down (48 N tiles per chunk) takes 3 blocks from T=5 on; EP8's down at T=5 (about
// 4.8 local chunks, 232 items: 88% against 59%) the deep one.
TEST(RunPlan, EightTokenTileConfigFollowsTheExpectedRoundFillPerGemm) {
  Fixture f = h200();
  f.shape = MoeShape{256, 6144, 256, 8};  // TP8
  auto grids = [&](int64_t T) {
    const MoeRunPlan p = f.plan(T, 8);
    return std::pair<int, int>{p.gate_up.grid / 132, p.down.grid / 132};
  };
  EXPECT_EQ(grids(4), (std::pair<int, int>{2, 2})) << "32 pairs: the deep config for both GEMMs";
  EXPECT_EQ(grids(5), (std::pair<int, int>{2, 3}));
  EXPECT_EQ(grids(8), (std::pair<int, int>{2, 3}));
  EXPECT_EQ(grids(16), (std::pair<int, int>{2, 3}));
  EXPECT_EQ(grids(32), (std::pair<int, int>{3, 3}));
  EXPECT_EQ(grids(64), (std::pair<int, int>{3, 3}));
  EXPECT_EQ(grids(128), (std::pair<int, int>{2, 3}));
  f.shape = MoeShape{32, 6144, 2048, 8, 256, 0};  // EP8
  EXPECT_EQ(grids(5), (std::pair<int, int>{2, 2}));
  EXPECT_EQ(grids(8), (std::pair<int, int>{2, 3}));
  EXPECT_EQ(grids(128), (std::pair<int, int>{2, 3}));
  // The split-K gate_up kernels are on the deep config: a forced split there keeps it, and one where the layer would
  // take the 3-block config takes the deep one for gate_up only.
  f.shape = MoeShape{256, 6144, 256, 8};
  MoeRunPlan p;
  ASSERT_TRUE(make_run_plan(f.ctx(), 64, 8, 0, &p, nullptr, 2).is_ok());
  EXPECT_EQ(p.gate_up_k_splits, 2);
  EXPECT_EQ(p.gate_up.grid, 2 * 132);
  EXPECT_EQ(p.down.grid, 3 * 132);
}

// Above 64 tokens per chunk: the 128-token tile where the expected chunk costs favour it (one 128-row chunk holds an
// expert's 65..128 tokens that the 64-token tile splits in two, and multiplies them rounded up to 16: GLM-5 at T=2048,
// 64 per expert, half of them past 64; at T=3072, 96 per expert; 128 per expert at T=4096, whose second chunk
// multiplies 16..48 tokens; long runs of full chunks at T=16384), the 64-token tile where one 64-row chunk holds all
// of them (T=1024); never without the warp-specialized kernels or on sm_120.
TEST(RunPlan, PrefillTileWhereItsChunksPay) {
  EXPECT_EQ(prefill_chunk128_cost(1), kPrefillHalfChunkCost);
  EXPECT_EQ(prefill_chunk128_cost(64), kPrefillHalfChunkCost);
  EXPECT_NEAR(prefill_chunk128_cost(65), kPrefillHalfChunkCost + 0.25 * (kPrefillChunkCost - kPrefillHalfChunkCost), 1e-12);
  EXPECT_EQ(prefill_chunk128_cost(80), prefill_chunk128_cost(65));
  EXPECT_NEAR(prefill_chunk128_cost(96), 0.5 * (kPrefillChunkCost + kPrefillHalfChunkCost), 1e-12);
  EXPECT_EQ(prefill_chunk128_cost(113), kPrefillChunkCost);
  EXPECT_EQ(prefill_chunk128_cost(128), kPrefillChunkCost);
  const PrefillChunkCosts c96 = prefill_chunk_costs(96.0), c128 = prefill_chunk_costs(128.0);
  EXPECT_NEAR(c96.tile64, 2.0, 0.01);
  EXPECT_GT(c96.tile128, prefill_chunk128_cost(80));  // (96 +- 10 rows: widths 80..128)
  EXPECT_LT(c96.tile128, kPrefillChunkCost);
  EXPECT_NEAR(c128.tile64, 2.5, 0.05);
  // Half the experts have one chunk of 97..128 rows (cost 1.57..1.68), the other half a full one and one more of a
  // few rows (kPrefillHalfChunkCost).
  EXPECT_GT(c128.tile128, 0.5 * prefill_chunk128_cost(97) + 0.5 * (kPrefillChunkCost + kPrefillHalfChunkCost));
  EXPECT_LT(c128.tile128, 0.5 * kPrefillChunkCost + 0.5 * (kPrefillChunkCost + kPrefillHalfChunkCost));
  EXPECT_EQ(prefill_chunk_costs(0.0).tile64, 0.0);
  Fixture f = h200();  // (the choice at T=2048 was measured on an H100: docs/perf/prefill.md)
  EXPECT_EQ(f.plan(1024).block_m, 64);
  for (int64_t T : {2048, 3072, 4096, 8192, 16384}) EXPECT_EQ(f.plan(T).block_m, 128) << T;
  const MoeRunPlan p = f.plan(3072);
  EXPECT_EQ(p.gate_up.family, KernelFamily::kWarpSpecialized);
  EXPECT_EQ(p.gate_up.grid, 132);
  EXPECT_NE(p.to_string().find("block_m 128, both GEMMs warp-specialized 256x128"), std::string::npos) << p.to_string();
  f.shape = MoeShape{32, 6144, 2048, 8, 256, 0};  // EP8: the same tokens per expert
  EXPECT_EQ(f.plan(3072).block_m, 128);
  f.shape = MoeShape{128, 4096, 1536 / 8, 8};  // Qwen3-235B-A22B TP8: gate_up N = 384 has no 256-row tile
  EXPECT_EQ(f.plan(16384).block_m, 64);
  f.shape = MoeShape{256, 6144, 2048, 8};
  f.options.warp_specialized = false;
  f.configs = resident_on(90, 132, false);
  EXPECT_EQ(f.plan(3072).block_m, 64);
  Fixture g;
  g.arch = 120;
  g.configs = resident_on(120, 188);
  EXPECT_EQ(g.plan(16384).block_m, 64);
}

// The deterministic finalize after a prefill tile's down (block_m >= kPlainFinalizeMinBlockM) on a TP shard (I <=
// kPlainFinalizeMaxDownK) launches plain, the kernels before it programmatic; decode tiles, layers with a longer down
// K (the full layer, an EP rank), the atomic finalize's convert kernel, sm_120's kernels and the option keep it
// programmatic; without programmatic launch nothing is.
TEST(RunPlan, TensorParallelPrefillFinalizeLaunchesPlain) {
  Fixture f = h200();
  for (const MoeShape& full : {MoeShape{256, 6144, 2048, 8}, MoeShape{32, 6144, 2048, 8, 256, 0}}) {
    f.shape = full;
    for (int64_t T : {2048, 16384}) {
      const MoeRunPlan p = f.plan(T);
      EXPECT_GE(p.block_m, kPlainFinalizeMinBlockM) << T;
      EXPECT_TRUE(p.programmatic_finalize) << T;
      EXPECT_EQ(p.to_string().find("the finalize plain"), std::string::npos) << p.to_string();
    }
  }
  f.shape = MoeShape{128, 4096, 1536 / 8, 8};  // Qwen3-235B-A22B TP8 (I 192: the 64-token tile at every prefill T)
  EXPECT_FALSE(f.plan(16384).programmatic_finalize);
  f.shape = MoeShape{256, 6144, 2048 / 8, 8};  // GLM-5 TP8
  for (int64_t T : {2048, 4096, 16384}) {
    const MoeRunPlan p = f.plan(T);
    EXPECT_GE(p.block_m, kPlainFinalizeMinBlockM) << T;
    EXPECT_TRUE(p.programmatic_launch) << T;
    EXPECT_FALSE(p.programmatic_finalize) << T;
    EXPECT_NE(p.to_string().find("programmatic launch (the finalize plain)"), std::string::npos) << p.to_string();
  }
  for (int64_t T : {1, 8, 64, 512}) {
    const MoeRunPlan p = f.plan(T);
    EXPECT_LT(p.block_m, kPlainFinalizeMinBlockM) << T;
    EXPECT_TRUE(p.programmatic_finalize) << T;
    EXPECT_EQ(p.to_string().find("the finalize plain"), std::string::npos) << p.to_string();
  }
  EXPECT_TRUE(f.plan(4096, 32).programmatic_finalize);  // (a decode tile forced at a prefill T)
  EXPECT_FALSE(f.plan(512, 64).programmatic_finalize);  // (and a prefill tile at a decode T)
  f.options.finalize = FinalizeMode::kDeterministicBf16;
  EXPECT_FALSE(f.plan(4096).programmatic_finalize);
  f.options.finalize = FinalizeMode::kAtomic;
  EXPECT_TRUE(f.plan(4096).programmatic_finalize);
  f.options.finalize = FinalizeMode::kDeterministic;
  f.options.programmatic_prefill_finalize = true;
  EXPECT_TRUE(f.plan(4096).programmatic_finalize);
  f.options.programmatic_prefill_finalize = false;
  Fixture d = f;  // a plan without a finalize kernel (the direct path) keeps the field equal to programmatic_launch
  d.options.direct_decode = true;
  const MoeRunPlan dp = d.plan(1);
  EXPECT_TRUE(dp.direct_decode && dp.programmatic_launch && dp.programmatic_finalize) << dp.to_string();
  Fixture g;  // sm_120's kernels (RTX PRO 6000): the rule was measured on sm_90 only
  g.arch = 120;
  g.configs = resident_on(120, 188);
  g.shape = f.shape;
  const MoeRunPlan q = g.plan(16384);
  EXPECT_GE(q.block_m, kPlainFinalizeMinBlockM);
  EXPECT_TRUE(q.programmatic_launch && q.programmatic_finalize) << q.to_string();
  f.options.programmatic_launch = false;
  for (bool opt : {false, true}) {
    f.options.programmatic_prefill_finalize = opt;
    for (int64_t T : {8, 4096}) {
      const MoeRunPlan p = f.plan(T);
      EXPECT_FALSE(p.programmatic_launch || p.programmatic_finalize) << T;
      EXPECT_EQ(p.to_string().find("programmatic"), std::string::npos) << p.to_string();
    }
  }
}

TEST(RunPlan, MultistageThresholdsWithoutTheWarpSpecialized16TokenTile) {
  // sm_120 (RTX PRO 6000, 188 SMs, one block per SM) and sm_90 with warp_specialized off: the 8-token tile up to a
  // busiest expert of 15, the 16-token one up to 20.
  Fixture f;
  f.arch = 120;
  f.configs = resident_on(120, 188);
  EXPECT_EQ(f.plan(192).block_m, 8);   // busiest 13.3
  EXPECT_EQ(f.plan(256).block_m, 16);  // busiest 16.5
  EXPECT_EQ(f.plan(384).block_m, 32);  // busiest 22.4
  EXPECT_EQ(f.plan(192).gate_up.family, KernelFamily::kMultistage);
  EXPECT_FALSE(f.plan(512).gate_up.wgmma) << "mma.sync on sm_120";
  Fixture g = h200();
  g.options.warp_specialized = false;
  g.configs = resident_on(90, 132, false);
  EXPECT_EQ(g.plan(192).block_m, 8);
  EXPECT_EQ(g.plan(512).gate_up.family, KernelFamily::kMultistage);
  EXPECT_TRUE(g.plan(512).gate_up.wgmma) << "the multistage 32-token tile multiplies with wgmma on sm_90";
}

TEST(RunPlan, CallerOptionsAndTuningCacheTakePrecedenceInThatOrder) {
  Fixture f = h200();
  f.tuned[256] = TunedChoice{64, 1.0, 1};
  MoeRunPlan p = f.plan(200);  // bucket 256
  EXPECT_EQ(p.block_m, 64);
  EXPECT_NE(p.source.find("tuning cache"), std::string::npos) << p.source;
  p = f.plan(200, 16);
  EXPECT_EQ(p.block_m, 16);
  EXPECT_NE(p.source.find("caller"), std::string::npos);
  f.options.block_m = 32;
  EXPECT_EQ(f.plan(200).block_m, 32);
  EXPECT_EQ(f.plan(200, 8).block_m, 8);
  EXPECT_EQ(f.plan(3, 0, 4).down_k_splits, 4);
  // A forced block_m without a config here, and a split count the shape does not divide, are errors.
  MoeRunPlan q;
  EXPECT_EQ(make_run_plan(f.ctx(), 3, 24, 0, &q, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(make_run_plan(f.ctx(), 3, 0, 3, &q, nullptr).code(), StatusCode::kInvalidArgument);
  f.shape.intermediate = 256;  // two K tiles of 128 at block_m 32 (the options'): 4 splits do not divide them
  EXPECT_TRUE(make_run_plan(f.ctx(), 3, 0, 2, &q, nullptr).is_ok());
  EXPECT_EQ(make_run_plan(f.ctx(), 3, 0, 4, &q, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(make_run_plan(f.ctx(), 3, 8, 2, &q, nullptr).code(), StatusCode::kInvalidArgument) << "one K tile of 256";
}

// Shards: a tensor-parallel rank's I can be any multiple of 64 (its down GEMM takes the small-K tile where no
// primary tile divides K); an expert-parallel rank's heuristic counts tokens over the model's experts.
TEST(RunPlan, ShardsTakeSmallKTilesAndCountTokensOverTheModelsExperts) {
  Fixture f = h200();
  f.shape = MoeShape{128, 4096, 192, 8};  // Qwen3-235B-A22B at TP8: I = 1536 / 8
  for (int64_t T : {1, 8, 64, 512, 4096}) {
    const MoeRunPlan p = f.plan(T);
    EXPECT_EQ(f.shape.intermediate % p.down.block_k, 0) << p.to_string();
    EXPECT_EQ(p.down.block_k, 64) << p.to_string();
    EXPECT_EQ(2 * f.shape.intermediate % p.gate_up.block_n, 0) << p.to_string();
    EXPECT_EQ(p.down_k_splits, 1) << "3 K tiles of 64 do not split";
  }
  // 384 (TP4): the 64-token tiles' K of 128 divides it; the 8-token tile's 256 does not (small-K for down).
  f.shape = MoeShape{128, 4096, 384, 8};
  EXPECT_EQ(f.plan(4096).down.block_k, 128);
  EXPECT_EQ(f.plan(1).down.block_k, 64);
  EXPECT_EQ(f.plan(1).gate_up.block_k, 256);
  EXPECT_TRUE(f.plan(1).fused_routing) << "the small-K decode tiles route too";
  // GLM-5 at TP8 (I = 256) keeps the primary tiles; at EP8 (32 of 256 experts) the tile follows the model's
  // experts: T=192 has a busiest expert of 13.3 either way.
  f.shape = MoeShape{256, 6144, 256, 8};
  EXPECT_EQ(f.plan(1).down.block_k, 256);
  f.shape = MoeShape{32, 6144, 2048, 8, 256, 64};
  EXPECT_EQ(f.plan(192).block_m, 16);
  EXPECT_EQ(f.plan(128).block_m, 8);
  EXPECT_NEAR(expected_local_experts(f.shape, 1), 1.0, 1e-9) << "8 of 256 experts: one of this rank's 32";
  // An EP rank's shape rules: its experts inside the model's, top_k up to the model's experts.
  const MoeLayerOptions o;
  EXPECT_TRUE(check_shape(MoeShape{32, 6144, 2048, 8, 256, 224}, o).is_ok());
  EXPECT_FALSE(check_shape(MoeShape{32, 6144, 2048, 8, 256, 225}, o).is_ok());
  EXPECT_FALSE(check_shape(MoeShape{32, 6144, 2048, 8, 256, -1}, o).is_ok());
  EXPECT_TRUE(check_shape(MoeShape{4, 6144, 2048, 8, 256, 0}, o).is_ok()) << "fewer local experts than top_k";
  EXPECT_FALSE(check_shape(MoeShape{4, 6144, 2048, 8, 0, 0}, o).is_ok());
  EXPECT_FALSE(check_shape(MoeShape{256, 6144, 96, 8}, o).is_ok()) << "I must be a multiple of 64";
}

TEST(RunPlan, WorkspaceRowsCoverEveryPlanTheLayerMakes) {
  Fixture f = h200();
  for (int64_t T : {1, 2, 7, 33, 64, 65, 300}) {
    const int64_t rows = max_split_buffers(f.ctx(), T, 0, 0).partial_rows;
    for (int64_t t = 1; t <= T; ++t)
      for (int bm : {0, 8, 16, 32, 64}) {
        MoeRunPlan p;
        ASSERT_TRUE(make_run_plan(f.ctx(), t, bm, 0, &p, nullptr).is_ok());
        EXPECT_LE(t * f.shape.top_k * p.down_k_splits, rows) << "T=" << t << " bm " << bm;
      }
  }
  EXPECT_EQ(max_split_buffers(f.ctx(), 100, 8, 0).partial_rows, 100 * 8 * 8);
}

// The one shard rule: TP divides I into multiples of 64, EP divides E and numbers the ranks' first experts.
TEST(RunPlan, ShardShapeIsTheOneRule) {
  const MoeShape glm{256, 6144, 2048, 8};
  MoeShape s;
  ASSERT_TRUE(shard_shape(glm, 8, 1, 0, &s).is_ok());
  EXPECT_EQ(s.intermediate, 256);
  EXPECT_EQ(s.num_experts, 256);
  EXPECT_EQ(s.global_experts(), 256);
  ASSERT_TRUE(shard_shape(glm, 1, 8, 3, &s).is_ok());
  EXPECT_EQ(s.num_experts, 32);
  EXPECT_EQ(s.global_experts(), 256);
  EXPECT_EQ(s.first_expert, 96);
  EXPECT_EQ(s.intermediate, 2048);
  ASSERT_TRUE(shard_shape(glm, 2, 4, 1, &s).is_ok());  // both
  EXPECT_EQ(s.intermediate, 1024);
  EXPECT_EQ(s.first_expert, 64);
  const MoeShape before = s;
  EXPECT_EQ(shard_shape(glm, 3, 1, 0, &s).code(), StatusCode::kUnsupported);     // 2048 / 3
  EXPECT_EQ(shard_shape(glm, 64, 1, 0, &s).code(), StatusCode::kUnsupported);    // 32 columns
  EXPECT_EQ(shard_shape(glm, 1, 7, 0, &s).code(), StatusCode::kInvalidArgument);  // 256 / 7
  EXPECT_EQ(shard_shape(glm, 1, 8, 8, &s).code(), StatusCode::kInvalidArgument);  // rank out of range
  EXPECT_EQ(shard_shape(glm, 0, 1, 0, &s).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.intermediate, before.intermediate) << "a rejected call writes nothing";
  EXPECT_EQ(s.first_expert, before.first_expert);
  EXPECT_EQ(shard_shape(glm, 8, 1, 0, nullptr).code(), StatusCode::kInvalidArgument);
}

// The partial buffer by finalize mode: fp32 rows (deterministic), bf16 rows at half the bytes (deterministic-bf16),
// T fp32 rows (atomic); the other parts of the workspace do not depend on the mode. The names round-trip.
TEST(RunPlan, PartialBufferBytesFollowTheFinalizeMode) {
  const MoeShape s{256, 6144, 256, 8};
  const int64_t T = 512, rows = T * s.top_k;
  const WorkspaceLayout f32 = workspace_layout(s, FinalizeMode::kDeterministic, T, rows);
  const WorkspaceLayout b16 = workspace_layout(s, FinalizeMode::kDeterministicBf16, T, rows);
  const WorkspaceLayout atom = workspace_layout(s, FinalizeMode::kAtomic, T, rows);
  EXPECT_EQ(f32.gu_split - f32.partial, rows * s.hidden * 4);  // (already a multiple of the alignment)
  EXPECT_EQ(b16.gu_split - b16.partial, rows * s.hidden * 2);
  EXPECT_EQ(atom.gu_split - atom.partial, T * s.hidden * 4);
  EXPECT_EQ(f32.partial, b16.partial);
  EXPECT_EQ(f32.total - b16.total, rows * s.hidden * 2);
  for (FinalizeMode m : kFinalizeModes) {
    FinalizeMode back = m == FinalizeMode::kAtomic ? FinalizeMode::kDeterministic : FinalizeMode::kAtomic;
    EXPECT_TRUE(finalize_mode_from_name(finalize_mode_name(m), &back));
    EXPECT_EQ(back, m);
  }
  FinalizeMode untouched = FinalizeMode::kAtomic;
  EXPECT_FALSE(finalize_mode_from_name("bf16", &untouched));
  EXPECT_FALSE(finalize_mode_from_name("", &untouched));
  EXPECT_EQ(untouched, FinalizeMode::kAtomic);
  EXPECT_TRUE(finalize_is_deterministic(FinalizeMode::kDeterministicBf16));
  EXPECT_FALSE(finalize_is_deterministic(FinalizeMode::kAtomic));
}

// gate_up's K splits: where its items would leave most persistent blocks idle (a TP8 rank: 4 N tiles per expert; an
// EP rank at T=1: one expert), never where the unsharded layer has enough items; only on multistage configs; forced
// counts checked; the workspace's split buffer covers every plan.
TEST(RunPlan, GateUpSplitsFillTheBlocksOfShardDecodeSteps) {
  Fixture f = h200();
  for (int64_t T : {1, 8, 64, 512}) EXPECT_EQ(f.plan(T).gate_up_k_splits, 1) << "unsharded GLM-5: " << f.plan(T).to_string();
  f.shape = MoeShape{256, 6144, 256, 8};  // TP8
  EXPECT_EQ(f.plan(1).gate_up_k_splits, 8) << "32 items on 264 blocks -> 256";
  EXPECT_NE(f.plan(1).to_string().find("gate_up K in 8 splits"), std::string::npos) << f.plan(1).to_string();
  EXPECT_EQ(f.plan(512).gate_up_k_splits, 1) << "T > 64 never splits";
  EXPECT_EQ(f.plan(8).gate_up_k_splits, 1) << "228 items on 264 blocks: more than half a round";
  EXPECT_GT(f.plan(4).gate_up_k_splits, 1) << "about 120 items on 264 blocks";
  f.shape = MoeShape{32, 6144, 2048, 8, 256, 0};  // EP8 at T=1: one local expert, 32 N tiles
  EXPECT_EQ(f.plan(1).gate_up_k_splits, 8);
  MoeRunPlan q;
  EXPECT_TRUE(make_run_plan(f.ctx(), 3, 0, 0, &q, nullptr, 4).is_ok());
  EXPECT_EQ(q.gate_up_k_splits, 4);
  EXPECT_EQ(make_run_plan(f.ctx(), 3, 0, 0, &q, nullptr, 3).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(make_run_plan(f.ctx(), 512, 32, 0, &q, nullptr, 2).code(), StatusCode::kInvalidArgument)
      << "warp-specialized gate_up";
  EXPECT_EQ(make_run_plan(f.ctx(), 3, 32, 0, &q, nullptr, 2).code(), StatusCode::kInvalidArgument)
      << "the multistage 32-token tile has no split-K kernels";
  f.shape = MoeShape{64, 512, 256, 8};  // 2 K tiles of 256: 4 splits do not divide them
  EXPECT_EQ(make_run_plan(f.ctx(), 3, 8, 0, &q, nullptr, 4).code(), StatusCode::kInvalidArgument);
  f.shape = MoeShape{256, 6144, 256, 8};
  for (int64_t T : {1, 5, 64, 100}) {
    const int64_t floats = max_split_buffers(f.ctx(), T, 0, 0).gate_up_floats;
    for (int64_t t = 1; t <= T; ++t)
      for (int bm : {0, 8, 16, 32, 64}) {
        MoeRunPlan p;
        ASSERT_TRUE(make_run_plan(f.ctx(), t, bm, 0, &p, nullptr).is_ok());
        if (p.gate_up_k_splits > 1) {
          EXPECT_LE(p.gate_up_k_splits * t * 8 * 512, floats) << "T=" << t << " bm " << bm;
        }
      }
  }
  EXPECT_EQ(max_split_buffers(f.ctx(), 100, 0, 8).gate_up_floats, 8 * 100 * 8 * 512);
  f.shape = MoeShape{256, 6144, 2048, 8};
  EXPECT_EQ(max_split_buffers(f.ctx(), 64, 0, 0).gate_up_floats, 0) << "the unsharded layer never splits gate_up";
}

// gate_up's tail kernel: a decode step of the 8-token tile after the routing kernel, with 1 to 3 rounds of work items
// expected, runs its last partial round's tiles in kGateUpTailPieces K pieces; the workspace holds their sums.
TEST(RunPlan, GateUpTailTakesTheLastRoundOfShardDecodeSteps) {
  Fixture f = h200();
  f.shape = MoeShape{256, 6144, 256, 8};  // TP8
  const MoeRunPlan p64 = f.plan(64);
  EXPECT_EQ(p64.gate_up_tail_pieces, kGateUpTailPieces) << "about 888 items on 396 blocks: " << p64.to_string();
  EXPECT_EQ(p64.gate_up_k_splits, 1);
  EXPECT_NE(p64.to_string().find("last partial round of tiles in a second kernel, K in 4 pieces"), std::string::npos)
      << p64.to_string();
  EXPECT_EQ(f.plan(16).gate_up_tail_pieces, kGateUpTailPieces) << "about 412 items on 264 blocks";
  EXPECT_EQ(f.plan(8).gate_up_tail_pieces, 0) << "228 items on 264 blocks: no whole round (and routing inside)";
  EXPECT_FALSE(f.plan(12).fused_routing);
  EXPECT_EQ(f.plan(12).gate_up_tail_pieces, 0) << "the routing kernel, but about 312 items on 396 blocks: no whole round";
  EXPECT_EQ(f.plan(128).gate_up_tail_pieces, 0) << "T > kMaxSplitTokens";
  EXPECT_EQ(f.plan(64, 16).gate_up_tail_pieces, 0) << "the 16-token tile has no tail kernel";
  f.shape = MoeShape{32, 6144, 2048, 8, 256, 0};  // EP8
  EXPECT_EQ(f.plan(64).gate_up_tail_pieces, kGateUpTailPieces);
  f.shape = MoeShape{256, 6144, 2048, 8};  // unsharded: thousands of items at T=8 and 64
  EXPECT_EQ(f.plan(8).gate_up_tail_pieces, 0);
  EXPECT_EQ(f.plan(64).gate_up_tail_pieces, 0);
  f.shape = MoeShape{256, 6144, 256, 8};
  f.options.gate_up_tail = false;
  EXPECT_EQ(f.plan(64).gate_up_tail_pieces, 0) << "MoeLayerOptions::gate_up_tail off";
  f.options.gate_up_tail = true;
  Fixture g;  // sm_120 (RTX PRO 6000): not built there
  g.shape = f.shape;
  g.arch = 120;
  g.sms = 188;
  g.configs = resident_on(120, 188);
  EXPECT_EQ(g.plan(64).gate_up_tail_pieces, 0);
  // The workspace: the pieces' partial sums of every plan up to the tokens asked for.
  for (const MoeShape& s : {MoeShape{256, 6144, 256, 8}, MoeShape{32, 6144, 2048, 8, 256, 0}, MoeShape{256, 6144, 2048, 8}}) {
    f.shape = s;
    const int64_t floats = max_split_buffers(f.ctx(), 64, 0, 0).gate_up_floats;
    for (int64_t t = 1; t <= 64; ++t)
      for (int bm : {0, 8, 16}) {
        MoeRunPlan p;
        ASSERT_TRUE(make_run_plan(f.ctx(), t, bm, 0, &p, nullptr).is_ok());
        // The split kernel the call launches finds its counters after k_splits x split_stride floats of sums
        // (kernels/moe_gemm_epilogue.cuh), k_splits being the tail kernel's pieces or gate_up's splits.
        const int launched = p.gate_up_tail_pieces > 0 ? p.gate_up_tail_pieces : p.gate_up_k_splits;
        if (launched == 1) continue;
        const int64_t sums = int64_t{launched} * t * s.top_k * 2 * s.intermediate;
        EXPECT_LE(sums, floats) << "T=" << t << " bm " << bm << ": " << p.to_string();
        const WorkspaceLayout L = call_workspace_layout(s, FinalizeMode::kDeterministic, p);
        EXPECT_EQ(L.gu_counters - L.gu_split, sums * 4) << "T=" << t << " bm " << bm << ": " << p.to_string();
        EXPECT_GT(L.gu_counter_bytes, 0);
      }
  }
}

// The cluster decode kernel: a TP shard's step past the direct path with I = 256 takes it on the first 8-token config
// that keeps a cluster of 8 blocks per pair resident (30 on the deep config, 45 on the 3-block one), the 3-block one
// only where the tiled plan leaves gate_up's K whole: GLM-5's TP8 at T = 3 (deep) and 5 (3-block), not 4 (the tiled
// plan splits gate_up, and 32 clusters are more than the deep config's 30) nor 6 (48 clusters); one cluster per possible
// chunk; both GEMM plans that config, gate_up's K in its two halves. Not: more pairs, other forced gate_up splits or
// another block_m, I != 256, the atomic or bf16 finalize, sm_120, the option off.
TEST(RunPlan, ClusterDecodeTakesTensorParallelDecodeSteps) {
  Fixture f = h200();
  f.options.cluster_decode = true;
  f.options.direct_decode = true;
  f.shape = MoeShape{256, 6144, 256, 8};  // GLM-5 TP8
  for (int64_t T = 1; T <= 2; ++T) {
    EXPECT_TRUE(f.plan(T).direct_decode);
    EXPECT_FALSE(f.plan(T).cluster_decode);
  }
  for (int64_t T : {3, 5}) {
    const MoeRunPlan p = f.plan(T);
    SCOPED_TRACE(p.to_string());
    EXPECT_TRUE(p.cluster_decode);
    EXPECT_EQ(p.cluster_blocks, 8);
    EXPECT_EQ(p.clusters, T * 8);
    EXPECT_EQ(p.block_m, 8);
    EXPECT_EQ(p.gate_up.to_string(), p.down.to_string());
    EXPECT_EQ(p.gate_up.stages, catalogue::config_on(T == 3 ? 0 : 1, 90).stages);
    EXPECT_EQ(p.gate_up_k_splits, 2);
    EXPECT_EQ(p.down_k_splits, 1);
    EXPECT_NE(p.to_string().find("gate_up and down in one kernel: "), std::string::npos);
  }
  EXPECT_FALSE(f.plan(4).cluster_decode) << f.plan(4).to_string();
  EXPECT_GT(f.plan(4).gate_up_k_splits, 1) << "the tiled plan's split";
  EXPECT_FALSE(f.plan(6).cluster_decode) << "48 clusters of 8 blocks: more than the 45 resident";
  EXPECT_TRUE(f.plan(3, 8, 1).cluster_decode) << "block_m 8 and one down split forced";
  EXPECT_FALSE(f.plan(3, 16).cluster_decode);
  MoeRunPlan q;
  ASSERT_TRUE(make_run_plan(f.ctx(), 3, 0, 0, &q, nullptr, 2).is_ok());
  EXPECT_TRUE(q.cluster_decode) << "gate_up K in its two halves forced";
  ASSERT_TRUE(make_run_plan(f.ctx(), 5, 0, 0, &q, nullptr, 2).is_ok());
  EXPECT_FALSE(q.cluster_decode) << "two splits forced at T=5: the tiled plan splits, so not the 3-block config";
  ASSERT_TRUE(make_run_plan(f.ctx(), 3, 0, 0, &q, nullptr, 4).is_ok());
  EXPECT_FALSE(q.cluster_decode) << "gate_up K in 4 splits forced";
  f.shape = MoeShape{256, 7168, 256, 8};  // DeepSeek-V3 / Kimi K2 TP8: 56 N tiles of down, 7 a block
  EXPECT_TRUE(f.plan(3).cluster_decode);
  f.shape = MoeShape{32, 6144, 256, 8, 256, 64};  // an EP rank of a TP8-like I: ids over 256 experts
  f.options.direct_decode = false;                 // (its few local experts would take the direct path)
  EXPECT_TRUE(f.plan(3).cluster_decode) << f.plan(3).to_string();
  EXPECT_EQ(f.plan(3).gate_up.grid, 24 * 8) << "the plan prints the launch's blocks";
  f.options.direct_decode = true;
  for (const MoeShape& s : {MoeShape{256, 6144, 2048, 8}, MoeShape{32, 6144, 2048, 8, 256, 0}, MoeShape{128, 4096, 192, 8},
                            MoeShape{128, 4096, 512, 8}}) {
    f.shape = s;
    EXPECT_FALSE(f.plan(3).cluster_decode) << "I = " << s.intermediate;
  }
  f.shape = MoeShape{256, 6144, 256, 8};
  for (FinalizeMode m : {FinalizeMode::kAtomic, FinalizeMode::kDeterministicBf16}) {
    f.options.finalize = m;
    EXPECT_FALSE(f.plan(3).cluster_decode) << finalize_mode_name(m);
  }
  f.options.finalize = FinalizeMode::kDeterministic;
  f.options.cluster_decode = false;
  EXPECT_FALSE(f.plan(3).cluster_decode);
  Fixture rtx;
  rtx.options.cluster_decode = true;
  rtx.arch = 120;
  rtx.configs = resident_on(120, 188);
  rtx.sms = 188;
  rtx.shape = MoeShape{256, 6144, 256, 8};
  EXPECT_FALSE(rtx.plan(3).cluster_decode) << "sm_120";
}

// Down and the finalize as one kernel after the tiled gate_up (moe_direct_down_ring_kernel): on sm_90 with
// direct_decode, past the direct path and the cluster kernel, up to 32 pairs (GLM-5 TP8 at T = 4; T = 6 and 8 ran
// slower on it), I <= 256 (a chunk's K one batch), a deterministic finalize, and all H / 16 blocks resident at once
// (three 76,112 B blocks an H200 SM: 396 slots for GLM-5 TP8's 384). Down's K in one split, the gate_up plan as the
// tiled one's (forced block_m and gate_up splits kept). Not: a forced or tuned down split, more pairs, I = 512, 768,
// 1536 or 2048 at any T (the full Qwen3 layers too), DeepSeek-V3's TP8 (448 blocks), the atomic finalize, sm_120, an
// unknown SM count, the option off.
TEST(RunPlan, DirectDownRingTakesTensorParallelStepsPastTheDirectPath) {
  Fixture f = h200();
  f.options.cluster_decode = true;
  f.options.direct_decode = true;
  f.shape = MoeShape{256, 6144, 256, 8};  // GLM-5 TP8
  {  // Three blocks an H200 SM (its shared memory per SM, with the runtime's reservation per block), four not: so
     // the 384 blocks of GLM-5 TP8 are resident at once on its 132 SMs (396 slots).
    const ArchInfo* sm90 = nullptr;
    ASSERT_TRUE(find_arch("90", &sm90).is_ok());
    const int64_t block = direct_down_ring_smem(32, 256).total + sm90->reserved_smem_per_block;
    EXPECT_LE(3 * block, sm90->smem_per_sm);
    EXPECT_GT(4 * block, sm90->smem_per_sm);
  }
  for (int64_t T = 1; T <= 2; ++T) EXPECT_FALSE(f.plan(T).direct_down) << "the direct path";
  for (int64_t T : {3, 5}) EXPECT_FALSE(f.plan(T).direct_down) << "the cluster kernel";
  for (int64_t T : {4}) {
    const MoeRunPlan p = f.plan(T);
    SCOPED_TRACE(p.to_string());
    EXPECT_TRUE(p.direct_down);
    EXPECT_FALSE(p.direct_decode);
    EXPECT_FALSE(p.cluster_decode);
    EXPECT_EQ(p.direct_down_blocks, 6144 / 16);
    EXPECT_EQ(p.direct_down_smem_bytes, direct_down_ring_smem(T * 8, 256).total);
    EXPECT_EQ(p.down_k_splits, 1);
    EXPECT_NE(p.to_string().find("down and the finalize in one kernel: 384 blocks"), std::string::npos);
    EXPECT_EQ(p.to_string().find("down K in"), std::string::npos) << "no tiled down kernel is printed";
    // No partial sums in the workspace: less than the tiled plan of the same block_m needs.
    Fixture off = f;
    off.options.direct_decode = false;
    const MoeRunPlan tiled = off.plan(T);
    EXPECT_FALSE(tiled.direct_down);
    EXPECT_EQ(tiled.block_m, p.block_m);
    EXPECT_EQ(tiled.gate_up_k_splits, p.gate_up_k_splits);
    EXPECT_EQ(tiled.gate_up.to_string(), p.gate_up.to_string());
    EXPECT_LT(call_workspace_layout(f.shape, f.options.finalize, p).total,
              call_workspace_layout(f.shape, f.options.finalize, tiled).total);
  }
  EXPECT_TRUE(f.plan(4, 8).direct_down) << "block_m forced";
  EXPECT_TRUE(f.plan(4, 16).direct_down) << "block_m 16 forced";
  EXPECT_FALSE(f.plan(4, 0, 1).direct_down) << "down K splits forced";
  for (int64_t T : {6, 7, 8}) EXPECT_FALSE(f.plan(T).direct_down) << T * 8 << " pairs";
  Fixture tuned = f;
  int split_tiles = 0;  // tuned block_ms whose down tile takes two K splits (a K stage of 128)
  for (int bm : {16, 32, 64, 128}) {
    tuned.tuned[tokens_bucket(4)] = TunedChoice{bm, 50.0, 2};
    const MoeRunPlan t = tuned.plan(4);
    if (t.down_k_splits != 2) continue;
    ++split_tiles;
    EXPECT_FALSE(t.direct_down) << "a tuned down split: " << t.to_string();
  }
  EXPECT_GT(split_tiles, 0);
  tuned.tuned[tokens_bucket(4)] = TunedChoice{16, 50.0, 1};
  EXPECT_TRUE(tuned.plan(4).direct_down) << "a tuned block_m, down unsplit";
  f.options.cluster_decode = false;
  EXPECT_TRUE(f.plan(3).direct_down) << "the cluster kernel off";
  EXPECT_FALSE(f.plan(5).direct_down) << "40 pairs";
  f.options.cluster_decode = true;
  f.shape = MoeShape{256, 6144, 256, 4};  // top-4: 32 pairs at T = 8
  EXPECT_TRUE(f.plan(8).direct_down) << f.plan(8).to_string();
  f.shape = MoeShape{32, 6144, 256, 8, 256, 64};  // an EP rank of a TP8-like I: ids over 256 experts
  EXPECT_TRUE(f.plan(4).direct_down) << f.plan(4).to_string();
  for (const MoeShape& s : {MoeShape{256, 6144, 2048, 8}, MoeShape{32, 6144, 2048, 8, 256, 0}, MoeShape{256, 7168, 256, 8},
                            MoeShape{256, 6144, 512, 8}, MoeShape{128, 2048, 768, 8}, MoeShape{128, 4096, 1536, 8}})
    for (int64_t T : {1, 2, 3, 4}) {
      f.shape = s;
      EXPECT_FALSE(f.plan(T).direct_down) << "T " << T << " E " << s.num_experts << " H " << s.hidden << " I "
                                          << s.intermediate;  // (I > 256: a chunk's K more than one batch)
    }
  f.shape = MoeShape{128, 4096, 192, 8};  // Qwen3-235B-A22B's TP8: a chunk's K 3 groups
  EXPECT_TRUE(f.plan(3).direct_down) << f.plan(3).to_string();
  f.shape = MoeShape{256, 6144, 256, 8};
  f.options.finalize = FinalizeMode::kAtomic;
  EXPECT_FALSE(f.plan(4).direct_down);
  f.options.finalize = FinalizeMode::kDeterministicBf16;
  EXPECT_TRUE(f.plan(4).direct_down) << "bf16 terms, as the partials";
  f.options.finalize = FinalizeMode::kDeterministic;
  f.options.direct_decode = false;
  EXPECT_FALSE(f.plan(4).direct_down);
  f.options.direct_decode = true;
  f.sms = 0;
  EXPECT_FALSE(f.plan(4).direct_down) << "residency not known";
  Fixture rtx;
  rtx.options.direct_decode = true;
  rtx.arch = 120;
  rtx.configs = resident_on(120, 188);
  rtx.sms = 188;
  rtx.shape = MoeShape{256, 6144, 256, 8};
  EXPECT_FALSE(rtx.plan(4).direct_down) << "sm_120";
  rtx.shape = MoeShape{64, 2048, 256, 8};  // (128 blocks: all resident on 188 SMs, but not measured there)
  EXPECT_FALSE(rtx.plan(4).direct_down) << "sm_120";
}

// The direct decode path: taken for at most kMaxDirectDecodePairs pairs when the caller forces nothing, a down warp's
// K groups stay within kDirectMaxDownGroupsPerWarp (kDirectMaxDownGroupsPerWarpSplit where the warps split the chunks'
// K) and both kernels' shared memory fits; its plan says what runs (no
// K splits, 8-row chunks) and its workspace holds no partial sums; forcing block_m or a split, or either option
// off, keeps the tiled kernels.
TEST(RunPlan, DirectDecodeTakesShortShardSteps) {
  Fixture f = h200();
  f.options.direct_decode = true;
  f.shape = MoeShape{256, 6144, 256, 8};  // TP8: 4 K groups per down chunk
  for (int64_t T : {1, 2}) {
    const MoeRunPlan p = f.plan(T);
    EXPECT_TRUE(p.direct_decode) << p.to_string();
    EXPECT_EQ(p.down_k_splits, 1);
    EXPECT_EQ(p.gate_up_k_splits, 1);
    EXPECT_EQ(p.block_m, kDirectChunkRows);
    // About 8 T chunks, + 1, at most the pairs and one wave: 3 blocks of 71,824 B an SM at T=1 (12 rows of 32
    // tiles), 2 of 84,128 B at T=2 (8 rows: each block takes two chunks).
    EXPECT_EQ(p.direct.gate_up_chunk_blocks, 8) << p.to_string();
    EXPECT_EQ(p.direct.gate_up_blocks, 8 * (2 * 256 / 16));
    EXPECT_EQ(p.direct.down_blocks, 6144 / 16);
    EXPECT_EQ(p.direct.gate_up_smem_bytes, direct_gate_up_smem(T, 6144).total);
    // T=1: 256 gate_up blocks (2 an SM, 71,824 B each) leave room for 3 down blocks of 23,264 B an SM, 396 >= 384:
    // down stages its weights. T=2: 256 gate_up blocks of 84,128 B leave room for 2 of 28,032 B, 264 < 384.
    EXPECT_EQ(p.direct.down_stages_weights, T == 1) << p.to_string();
    EXPECT_EQ(p.direct.down_smem_bytes, direct_down_smem(T * 8, 256, T == 1).total);
    EXPECT_EQ(p.direct.down_staged_rows, T * 8) << "every pair is this shard's: room for each row";
    EXPECT_NE(p.to_string().find("direct decode"), std::string::npos) << p.to_string();
    const WorkspaceLayout L = call_workspace_layout(f.shape, f.options.finalize, p);
    EXPECT_EQ(L.gu_split, L.partial) << "no partial rows";
    EXPECT_EQ(L.route_counts, L.gu_split) << "no gate_up split sums";
  }
  f.arch = 120;  // (the shared memory of an SM of the 100 KB parts; the sm_90 configs stand in for the tiled path)
  EXPECT_FALSE(f.plan(1).direct.down_stages_weights) << "one 71,824 B gate_up block an SM leaves room for one down block";
  // The register arithmetic: beside 2 gate_up blocks of 48 registers, 3 staged down blocks of 48 (396 >= 384); beside
  // 2 of 64 (blocks that loop over chunks), 2 (264 < 384), though shared memory would hold 4.
  EXPECT_TRUE(direct_down_stages_weights(256, 384, 70000, 20000, 132, 233472, 1024, 65536, 48, 48));
  EXPECT_FALSE(direct_down_stages_weights(256, 384, 70000, 20000, 132, 233472, 1024, 65536, 64, 48));
  EXPECT_TRUE(direct_down_stages_weights(256, 264, 70000, 20000, 132, 233472, 1024, 65536, 64, 48));
  EXPECT_FALSE(direct_down_stages_weights(256, 384, 70000, 20000, 0, 233472, 1024, 65536, 48, 48)) << "SMs not known";
  f.arch = 90;
  f.sms = 114;  // an H100 PCIe: 256 gate_up blocks need 3 an SM, which leave no room for staged down blocks
  EXPECT_FALSE(f.plan(1).direct.down_stages_weights);
  f.sms = 132;
  EXPECT_EQ(direct_down_groups_per_warp(24, 4), 12);
  EXPECT_FALSE(f.plan(3).direct_decode) << "about 23 chunks: 3 per warp, 12 K groups";
  EXPECT_FALSE(f.plan(5).direct_decode) << "40 pairs: past the warp routing's range";
  EXPECT_FALSE(f.plan(1, 8).direct_decode) << "block_m forced";
  EXPECT_FALSE(f.plan(1, 0, 1).direct_decode) << "down K splits forced";
  MoeRunPlan q;
  ASSERT_TRUE(make_run_plan(f.ctx(), 1, 0, 0, &q, nullptr, 8).is_ok());
  EXPECT_FALSE(q.direct_decode) << "gate_up K splits forced";
  EXPECT_EQ(q.gate_up_k_splits, 8);
  // DeepSeek-V3's TP8 shard (H = 7168): 448 down blocks. At T=2 (two batches a warp) they need a second wave of the
  // 396 slots: the tiled kernels. At T=1 (one batch) the path stays; an unknown SM count keeps it.
  f.shape = MoeShape{256, 7168, 256, 8};
  EXPECT_TRUE(f.plan(1).direct_decode);
  EXPECT_FALSE(f.plan(2).direct_decode) << f.plan(2).to_string();
  f.sms = 0;
  EXPECT_TRUE(f.plan(2).direct_decode);
  f.sms = 132;
  // EP8 (32 local experts, K = 2048): one or two chunks, whose K the warps split (8 or 4 ways).
  f.shape = MoeShape{32, 6144, 2048, 8, 256, 0};
  EXPECT_EQ(direct_down_groups_per_warp(1, 32), 4);
  EXPECT_EQ(direct_down_groups_per_warp(2, 32), 8);
  EXPECT_TRUE(f.plan(1).direct_decode);
  EXPECT_EQ(f.plan(1).direct.gate_up_chunk_blocks, 1) << "one local chunk expected (+ 1), but 256 tiles fill a wave";
  EXPECT_EQ(f.plan(2).direct.gate_up_chunk_blocks, 1) << "two local chunks expected: each block streams both";
  f.sms = 0;
  EXPECT_EQ(f.plan(1).direct.gate_up_chunk_blocks, 2) << "SMs not known: one local chunk expected, + 1";
  f.sms = 132;
  EXPECT_FALSE(f.plan(1).direct.down_stages_weights) << "8 activation rows of K = 2048: one staged down block an SM";
  EXPECT_TRUE(f.plan(2).direct_decode);
  EXPECT_EQ(f.plan(2).direct.down_staged_rows, 16) << "16 pairs' rows of 4,112 B fit beside 3 blocks an SM";
  // T=3: three local chunks expected, two warps each, 16 K groups a warp (the split limit). Every pair's row would
  // take 98,688 B; room for 17 keeps 3 down blocks an SM (384 on 396 slots), more than the 8 that twice the 3 rows
  // uniform routing gives (and a chunk's worth) ask for. A call with more reads them from L2. T=4: gate_up's blocks
  // would stage 4 token rows of H = 6144 beside their weights, past the direct kernels' 96 KB.
  EXPECT_EQ(direct_down_groups_per_warp(3, 32), 16);
  const MoeRunPlan p3 = f.plan(3);
  EXPECT_TRUE(p3.direct_decode) << p3.to_string();
  EXPECT_FALSE(p3.direct.down_stages_weights);
  EXPECT_EQ(p3.direct.down_staged_rows, 17) << p3.to_string();
  EXPECT_EQ(p3.direct.down_smem_bytes, direct_down_smem(24, 2048, false, 17).total);
  EXPECT_LE(3 * (p3.direct.down_smem_bytes + 1024), 233472);
  EXPECT_NE(p3.to_string().find("SwiGLU rows staged up to 17"), std::string::npos) << p3.to_string();
  EXPECT_GT(direct_gate_up_smem(4, 6144).total, kDirectMaxSmem);
  EXPECT_FALSE(f.plan(4).direct_decode);
  EXPECT_FALSE(f.plan(5).direct_decode) << "40 pairs: past the warp routing's range";
  f.shape = MoeShape{64, 6144, 2048, 8, 256, 0};  // EP4: two chunks at T=1 (4 warps each), four at T=2
  EXPECT_TRUE(f.plan(2).direct_decode);
  EXPECT_FALSE(f.plan(3).direct_decode) << "six chunks: a warp each, 32 K groups";
  // The unsharded layer: 8 chunks of 32 K groups, one per warp: the tiled kernels.
  f.shape = MoeShape{256, 6144, 2048, 8};
  EXPECT_FALSE(f.plan(1).direct_decode);
  f.shape = MoeShape{128, 4096, 1536 / 8, 8};  // Qwen3-235B-A22B TP8: I = 192, 3 K groups
  EXPECT_TRUE(f.plan(1).direct_decode);
  EXPECT_EQ(f.plan(1).direct.down_staged_rows, 8) << "a TP shard: every pair's row, always";
  f.shape = MoeShape{256, 6144, 256, 8};
  f.options.fuse_small_routing = false;
  EXPECT_FALSE(f.plan(1).direct_decode) << "the routing kernel asked for";
  f.options.fuse_small_routing = true;
  f.options.direct_decode = false;
  EXPECT_FALSE(f.plan(1).direct_decode);
  EXPECT_EQ(f.plan(1).gate_up_k_splits, 8) << "the tiled plan";
}

TEST(RunPlan, TokenAndShapeChecksUseCheckedArithmetic) {
  const MoeShape tiny{1, 256, 256, 1};
  EXPECT_TRUE(check_tokens(tiny, 0, 0).is_ok());
  EXPECT_FALSE(check_tokens(tiny, -1, 0).is_ok());
  EXPECT_TRUE(check_tokens(tiny, (int64_t{1} << 30) - 1, 0).is_ok());
  EXPECT_FALSE(check_tokens(tiny, int64_t{1} << 30, 0).is_ok()) << "T * k must be below 2^30";
  const MoeShape glm{256, 6144, 2048, 8};
  EXPECT_FALSE(check_tokens(glm, int64_t{1} << 61, 0).is_ok()) << "T * k wraps to 0 in int64 arithmetic";
  EXPECT_FALSE(check_tokens(glm, INT64_MAX, 0).is_ok());
  // The GEMMs' int32 work-item count: GLM-5 at 2^26 tokens has 2^26 chunks of 8 rows x 48 N tiles.
  EXPECT_FALSE(check_tokens(glm, int64_t{1} << 26, 0).is_ok());
  const MoeLayerOptions o;
  EXPECT_TRUE(check_shape(glm, o).is_ok());
  EXPECT_FALSE(check_shape(MoeShape{1, int64_t{1} << 55, 512, 1}, o).is_ok()) << "E * 2I * H wraps to 0";
  EXPECT_FALSE(check_shape(MoeShape{1, 256, INT64_MAX - 255, 1}, o).is_ok());
  EXPECT_FALSE(check_shape(MoeShape{1024, 65536, 65536, 8}, o).is_ok()) << "2^42 elements";
  MoeLayerOptions bad;
  bad.block_m = 12;
  const Status s = check_shape(glm, bad);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("8, 16, 32, 64"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace fp4moe::detail
