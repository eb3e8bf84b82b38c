// Unit tests of the config `fp4moe bench` times after its block_m sweep: the layer's own plan or the sweep's fastest.
// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "fp4moe/planner.h"
#include "src/moe/run_plan.h"
#include "tests/unit/run_plan_fixture.h"
#include "tools/bench/timed_config.h"

namespace fp4moe::bench {
namespace {

// A sweep of TP8 T=512 as an H100 gave it (session 34, call 1): the pick (bm32) is not the fastest (bm64).
const SweepTimes kSweep = {{{8, 0}, 502.0}, {{16, 0}, 346.0}, {{32, 0}, 331.0}, {{64, 0}, 327.0}, {{128, 0}, 381.0}};

MoeRunPlan tiled(int bm, int splits, const char* source) {
  MoeRunPlan p;
  p.num_tokens = 512;
  p.block_m = bm;
  p.down_k_splits = splits;
  p.fused_routing = false;
  p.source = source;
  return p;
}

TEST(BenchTimedConfig, PlansDifferingOnlyInSourceAreTheSamePlan) {
  EXPECT_TRUE(same_plan(tiled(32, 1, "block_m from the heuristic"), tiled(32, 1, "block_m from the caller")));
  EXPECT_FALSE(same_plan(tiled(32, 1, "x"), tiled(32, 2, "x")));
  EXPECT_FALSE(same_plan(tiled(32, 1, "x"), tiled(64, 1, "x")));
  MoeRunPlan down_and_finalize = tiled(8, 1, "x");
  down_and_finalize.direct_down = true;
  down_and_finalize.direct_down_blocks = 384;
  EXPECT_FALSE(same_plan(down_and_finalize, tiled(8, 1, "x")));
}

TEST(BenchTimedConfig, OwnPlanKeysKeepOnlyForcedEntriesThatReproduceThePlan) {
  // The heuristic's plan: forcing its block_m gives the same plan, with the splits left to the layer or forced.
  const MoeRunPlan heuristic = tiled(32, 1, "block_m from the heuristic");
  const auto same = own_plan_keys(heuristic, [](int bm, int sp) { return tiled(bm, sp == 0 ? 1 : sp, "caller"); });
  ASSERT_EQ(same.size(), 3u);
  EXPECT_EQ(same[0], SweepKey(32, 0));
  EXPECT_EQ(same[1], SweepKey(32, 1));
  EXPECT_EQ(same[2], SweepKey(kOwnPlanBlockM, 0));
  // A tuning cache's plan (bm32 in 2 splits): a forced block_m reads no cache and takes the heuristic's 1 split, so
  // only the forced count and the unforced pass run it.
  const MoeRunPlan cached = tiled(32, 2, "block_m and down K splits from the tuning cache");
  const auto keys = own_plan_keys(cached, [](int bm, int sp) { return tiled(bm, sp == 0 ? 1 : sp, "caller"); });
  ASSERT_EQ(keys.size(), 2u);
  EXPECT_EQ(keys[0], SweepKey(32, 2));
  EXPECT_EQ(keys[1], SweepKey(kOwnPlanBlockM, 0));
  // The direct decode path has no forced entry: only the unforced pass.
  MoeRunPlan direct = tiled(8, 1, "heuristic");
  direct.direct_decode = true;
  const auto dk = own_plan_keys(direct, [](int bm, int sp) { return tiled(bm, sp == 0 ? 1 : sp, "caller"); });
  ASSERT_EQ(dk.size(), 1u);
  EXPECT_EQ(dk[0], SweepKey(kOwnPlanBlockM, 0));
}

// The planner itself (an H200's resident configs, the GLM-5 layer at T=512): without a tuning cache a forced block_m
// runs the layer's own plan; with a cache entry of another down split count it does not, and only the forced count
// and the unforced pass stand for the pick.
TEST(BenchTimedConfig, OwnPlanKeysOnThePlannerWithAndWithoutATuningCache) {
  detail::plan_test::Fixture f = detail::plan_test::h200();
  f.options = MoeLayerOptions{};
  auto plan_at = [&](int bm, int sp) { return f.plan(512, bm, sp); };
  const MoeRunPlan heuristic = plan_at(0, 0);
  ASSERT_EQ(heuristic.down_k_splits, 1) << heuristic.to_string();
  auto keys = own_plan_keys(heuristic, plan_at);
  ASSERT_FALSE(keys.empty());
  EXPECT_EQ(keys.front(), SweepKey(heuristic.block_m, 0));
  // A tuning cache entry for T=512's bucket: the same block_m, down K in 2 splits.
  f.tuned[512] = TunedChoice{heuristic.block_m, 1.0, 2};
  const MoeRunPlan cached = plan_at(0, 0);
  ASSERT_EQ(cached.down_k_splits, 2) << cached.to_string();
  EXPECT_FALSE(same_plan(plan_at(cached.block_m, 0), cached)) << "a forced block_m reads no cache";
  keys = own_plan_keys(cached, plan_at);
  ASSERT_EQ(keys.size(), 2u);
  EXPECT_EQ(keys[0], SweepKey(cached.block_m, 2));
  EXPECT_EQ(keys[1], SweepKey(kOwnPlanBlockM, 0));
}

// The TP8 shard at T=4 on an H200: the layer's own plan runs down and the finalize as one kernel, which a forced split
// count turns off, so only the forced block_m with the splits left to the layer and the unforced pass run it.
TEST(BenchTimedConfig, OwnPlanKeysOfADirectDownPlanOnThePlanner) {
  detail::plan_test::Fixture f = detail::plan_test::h200();
  f.options = MoeLayerOptions{};
  f.shape = MoeShape{256, 6144, 256, 8};
  auto plan_at = [&](int bm, int sp) { return f.plan(4, bm, sp); };
  const MoeRunPlan own = plan_at(0, 0);
  ASSERT_TRUE(own.direct_down) << own.to_string();
  EXPECT_FALSE(plan_at(own.block_m, 1).direct_down);
  const auto keys = own_plan_keys(own, plan_at);
  ASSERT_EQ(keys.size(), 2u);
  EXPECT_EQ(keys[0], SweepKey(own.block_m, 0));
  EXPECT_EQ(keys[1], SweepKey(kOwnPlanBlockM, 0));
}

TEST(BenchTimedConfig, SweepKeysAddTheUnforcedPassWhereNoForcedEntryRunsThePick) {
  const std::vector<int> bms = {8, 16, 32};
  const std::vector<SweepKey> pick = {{16, 0}, {16, 1}, {kOwnPlanBlockM, 0}};
  // The default sweep (splits left to the layer) has the pick: no extra pass.
  auto k = sweep_keys(bms, {0}, pick, false, false);
  ASSERT_EQ(k.size(), 3u);
  EXPECT_EQ(k.front(), SweepKey(8, 0));
  // A forced split list with the pick's count: the same.
  k = sweep_keys(bms, {1, 2, 4}, pick, false, false);
  ASSERT_EQ(k.size(), 9u);
  EXPECT_EQ(k.front(), SweepKey(8, 1));
  // One without it (a cache's 2 splits, say, whose forced entry is not the pick; or a direct down): the unforced pass
  // first, timed with its splits left to the layer.
  k = sweep_keys(bms, {2, 4}, pick, false, false);
  ASSERT_EQ(k.size(), 7u);
  EXPECT_EQ(k.front(), SweepKey(kOwnPlanBlockM, 0));
  // The direct decode path: always the unforced pass, but never where block_ms were asked for.
  k = sweep_keys(bms, {0}, {{kOwnPlanBlockM, 0}}, true, false);
  EXPECT_EQ(k.front(), SweepKey(kOwnPlanBlockM, 0));
  EXPECT_EQ(k.size(), 4u);
  EXPECT_EQ(sweep_keys(bms, {0}, {{kOwnPlanBlockM, 0}}, true, true).size(), 3u);
  EXPECT_EQ(sweep_keys({64}, {0}, pick, false, true).size(), 1u);
}

TEST(BenchTimedConfig, PickIsTimedWhereSweptAndNotFastest) {
  const TimedConfig t = timed_config(kSweep, TimeAt::kLayerPick, {{32, 0}, {32, 1}, {kOwnPlanBlockM, 0}});
  EXPECT_EQ(t.block_m, 32);
  EXPECT_EQ(t.down_k_splits, 0);
  EXPECT_DOUBLE_EQ(t.us, 331.0);
  EXPECT_TRUE(t.at_pick);
}

TEST(BenchTimedConfig, FastestWhenAskedFor) {
  const TimedConfig t = timed_config(kSweep, TimeAt::kFastest, {{32, 0}, {kOwnPlanBlockM, 0}});
  EXPECT_EQ(t.block_m, 64);
  EXPECT_DOUBLE_EQ(t.us, 327.0);
  EXPECT_FALSE(t.at_pick);
}

TEST(BenchTimedConfig, FastestWhenThePickWasNotSwept) {
  const SweepTimes only = {{{64, 0}, 327.0}, {{128, 0}, 381.0}};  // --block-m 64 128 where the layer picks 32
  const TimedConfig t = timed_config(only, TimeAt::kLayerPick, {{32, 0}, {32, 1}, {kOwnPlanBlockM, 0}});
  EXPECT_EQ(t.block_m, 64);
  EXPECT_FALSE(t.at_pick);
  // A direct pick that was not swept (a forced --block-m list) falls back too, though bm8 was swept.
  const SweepTimes tiled_only = {{{8, 0}, 25.0}, {{16, 0}, 19.0}};
  const TimedConfig d = timed_config(tiled_only, TimeAt::kLayerPick, {{kOwnPlanBlockM, 0}});
  EXPECT_EQ(d.block_m, 16);
  EXPECT_FALSE(d.at_pick);
}

TEST(BenchTimedConfig, UnforcedPassWhereNoForcedEntryRunsThePick) {
  // A tuning cache's plan that no forced entry reproduces: the pass with nothing forced is the pick, even where a
  // forced entry at the same block_m is faster.
  const SweepTimes s = {{{kOwnPlanBlockM, 0}, 300.0}, {{32, 0}, 290.0}, {{64, 0}, 295.0}};
  const TimedConfig t = timed_config(s, TimeAt::kLayerPick, {{kOwnPlanBlockM, 0}});
  EXPECT_EQ(t.block_m, kOwnPlanBlockM);
  EXPECT_DOUBLE_EQ(t.us, 300.0);
  EXPECT_TRUE(t.at_pick);
  EXPECT_EQ(fastest_config(s).block_m, 32);
}

TEST(BenchTimedConfig, ForcedSplitsFindThePicksOwnCount) {
  // A sweep of forced down K splits only (--down-k-splits 1 2 4): the pick is its block_m at the layer's own count.
  const SweepTimes s = {{{32, 1}, 300.0}, {{32, 2}, 290.0}, {{64, 1}, 310.0}, {{64, 2}, 280.0}};
  const TimedConfig t = timed_config(s, TimeAt::kLayerPick, {{32, 2}, {kOwnPlanBlockM, 0}});
  EXPECT_EQ(t.block_m, 32);
  EXPECT_EQ(t.down_k_splits, 2);
  EXPECT_DOUBLE_EQ(t.us, 290.0);
  EXPECT_TRUE(t.at_pick);
  // The pick's own count not among the forced ones: the fastest.
  const TimedConfig f = timed_config(s, TimeAt::kLayerPick, {{32, 4}, {kOwnPlanBlockM, 0}});
  EXPECT_EQ(f.block_m, 64);
  EXPECT_EQ(f.down_k_splits, 2);
  EXPECT_FALSE(f.at_pick);
}

TEST(BenchTimedConfig, TiesGoToTheFirstKeyAndEmptySweepsGiveNothing) {
  const SweepTimes tie = {{{16, 0}, 288.0}, {{32, 0}, 288.0}};
  EXPECT_EQ(fastest_config(tie).block_m, 16);
  const TimedConfig none = timed_config({}, TimeAt::kLayerPick, {{32, 0}, {kOwnPlanBlockM, 0}});
  EXPECT_FALSE(none.at_pick);
  EXPECT_DOUBLE_EQ(none.us, 0.0);
}

}  // namespace
}  // namespace fp4moe::bench
