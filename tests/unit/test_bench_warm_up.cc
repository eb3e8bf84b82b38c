// Unit tests of the benchmarks' warm-up: its call count, its least busy time, and the call indices it leaves.
// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <vector>

#include "tools/bench/warm_up.h"

namespace fp4moe::bench {
namespace {

// A GPU stand-in: each call takes `ms` of GPU time, which the host sees only after wait().
struct FakeGpu {
  explicit FakeGpu(double call_ms) : ms(call_ms) {}
  double ms;
  double queued = 0, finished = 0;
  std::vector<int> calls;
  int waits = 0;
  int run(int i) {
    calls.push_back(i);
    queued += ms;
    return i;
  }
  int warm(int count, double min_ms) {
    return warm_up([&](int i) { run(i); }, [&] { finished = queued, ++waits; }, [&] { return finished; }, count,
                   min_ms);
  }
};

TEST(BenchWarmUp, NoLeastTimeIsTheCountAndOneWait) {
  FakeGpu g(0.07);  // (every timing but a T's first: time_events' default)
  EXPECT_EQ(g.warm(16, 0.0), 16);
  EXPECT_EQ(g.waits, 1);
}

TEST(BenchWarmUp, LongCallsStopAtTheCount) {
  FakeGpu g(10.0);
  EXPECT_EQ(g.warm(3, 25.0), 3);  // 30 ms of calls already
  EXPECT_EQ(g.waits, 1);
}

TEST(BenchWarmUp, ShortCallsGoOnUntilTheLeastTimeInDoublingBatchesOfTheCount) {
  FakeGpu g(0.07);  // a T=1 forward pass of the full layer
  const int n = g.warm(16, kMinWarmUpMs);
  // 16, then batches of 16, 32, 64, 128, 256: 512 calls, 35.8 ms, the first total past 25 ms (256 were 17.9 ms).
  EXPECT_EQ(n, 512);
  EXPECT_GE(n * g.ms, kMinWarmUpMs);
  EXPECT_LT((n - 256) * g.ms, kMinWarmUpMs);
  EXPECT_EQ(n % 16, 0);
  ASSERT_EQ(g.calls.size(), static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) ASSERT_EQ(g.calls[static_cast<size_t>(i)], i);
}

TEST(BenchWarmUp, TimeIsReadOnlyAfterTheCallsHaveFinished) {
  // Were elapsed_ms() read before wait(), no time would have finished after the count and the next batch would
  // be counted one batch late: 2 + 2 + 4 + 8 calls here instead of 2 + 2 + 4.
  FakeGpu g(1.0);
  EXPECT_EQ(g.warm(2, 7.5), 8);
  EXPECT_EQ(g.waits, 3);
}

TEST(BenchWarmUp, NoCountStillWarmsUpForTheLeastTime) {
  FakeGpu g(4.0);
  EXPECT_EQ(g.warm(0, 10.0), 3);  // batches of 1, 2: 12 ms
  FakeGpu none(4.0);
  EXPECT_EQ(none.warm(0, 0.0), 0);
}

}  // namespace
}  // namespace fp4moe::bench
