// Unit tests of the config `fp4moe bench` times after its block_m sweep: the layer's own pick or the sweep's fastest.
// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include "tools/bench/timed_config.h"

namespace fp4moe::bench {
namespace {

// A sweep of TP8 T=512 as an H100 gave it (session 34, call 1): the pick (bm32) is not the fastest (bm64).
const SweepTimes kSweep = {{{8, 0}, 502.0}, {{16, 0}, 346.0}, {{32, 0}, 331.0}, {{64, 0}, 327.0}, {{128, 0}, 381.0}};

TEST(BenchTimedConfig, PickIsTimedWhereSweptAndNotFastest) {
  const TimedConfig t = timed_config(kSweep, TimeAt::kLayerPick, false, 32, 1);
  EXPECT_EQ(t.block_m, 32);
  EXPECT_EQ(t.down_k_splits, 0);
  EXPECT_DOUBLE_EQ(t.us, 331.0);
  EXPECT_TRUE(t.at_pick);
}

TEST(BenchTimedConfig, FastestWhenAskedFor) {
  const TimedConfig t = timed_config(kSweep, TimeAt::kFastest, false, 32, 1);
  EXPECT_EQ(t.block_m, 64);
  EXPECT_DOUBLE_EQ(t.us, 327.0);
  EXPECT_FALSE(t.at_pick);
}

TEST(BenchTimedConfig, FastestWhenThePickWasNotSwept) {
  const SweepTimes only = {{{64, 0}, 327.0}, {{128, 0}, 381.0}};  // --block-m 64 128 where the layer picks 32
  const TimedConfig t = timed_config(only, TimeAt::kLayerPick, false, 32, 1);
  EXPECT_EQ(t.block_m, 64);
  EXPECT_FALSE(t.at_pick);
}

TEST(BenchTimedConfig, DirectPathPick) {
  // The direct decode path's key is kDirectBlockM; the layer's block_m for such a plan is not what is timed.
  const SweepTimes s = {{{kDirectBlockM, 0}, 16.0}, {{8, 0}, 25.0}, {{16, 0}, 15.0}};
  const TimedConfig t = timed_config(s, TimeAt::kLayerPick, true, 16, 1);
  EXPECT_EQ(t.block_m, kDirectBlockM);
  EXPECT_DOUBLE_EQ(t.us, 16.0);
  EXPECT_TRUE(t.at_pick);
  EXPECT_EQ(fastest_config(s).block_m, 16);
}

TEST(BenchTimedConfig, ForcedSplitsFindThePicksOwnCount) {
  // A sweep of forced down K splits only (--down-k-splits 1 2 4): the pick is its block_m at the layer's own count.
  const SweepTimes s = {{{32, 1}, 300.0}, {{32, 2}, 290.0}, {{64, 1}, 310.0}, {{64, 2}, 280.0}};
  const TimedConfig t = timed_config(s, TimeAt::kLayerPick, false, 32, 2);
  EXPECT_EQ(t.block_m, 32);
  EXPECT_EQ(t.down_k_splits, 2);
  EXPECT_DOUBLE_EQ(t.us, 290.0);
  EXPECT_TRUE(t.at_pick);
  const TimedConfig f = fastest_config(s);
  EXPECT_EQ(f.block_m, 64);
  EXPECT_EQ(f.down_k_splits, 2);
}

TEST(BenchTimedConfig, TiesGoToTheFirstKeyAndEmptySweepsGiveNothing) {
  const SweepTimes tie = {{{16, 0}, 288.0}, {{32, 0}, 288.0}};
  EXPECT_EQ(fastest_config(tie).block_m, 16);
  const TimedConfig none = timed_config({}, TimeAt::kLayerPick, false, 32, 1);
  EXPECT_FALSE(none.at_pick);
  EXPECT_DOUBLE_EQ(none.us, 0.0);
}

}  // namespace
}  // namespace fp4moe::bench
