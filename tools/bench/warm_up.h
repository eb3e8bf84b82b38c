// How long a benchmark warms the GPU up before it times: a count of calls and a least busy time (host-only, tested).
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <algorithm>

namespace fp4moe::bench {

// The least time the calls being measured keep the GPU at work before the first config of each T that `fp4moe bench`
// and `fp4moe tune` time. After the host has set a case up, with the GPU idle, a count of short calls (16 forward
// passes of 70 us) did not cover the first config: the tuner read the full layer's T=1 heuristic 12% slow on an H100
// and cached another tile for it (docs/perf/history.md, session 35). 25 ms is what triton's do_bench warms up for.
// Once per T, not per timing: the tuner's time budget would pay it for every config, and the graph of back-to-back
// passes warmed that long runs into the power cap (the full layer's T=8 chain 2.8% slower on that H100), a sustained
// rate the tables do not report.
inline constexpr double kMinWarmUpMs = 25.0;

// Warms up by calling run(0), run(1), ...: `count` calls, then further batches of `count` (doubling) until
// elapsed_ms() (the host time since before the first call) reaches min_ms, each checked after wait() (which blocks
// until the calls so far have finished: the time counted runs until the GPU has done them, the calls enqueued back to
// back, so it is GPU-busy time but for the launch gaps). Returns the number of calls made, a multiple of
// max(count, 1): a caller that rotates `count` buffers by the call index starts its timed calls at buffer 0 again.
template <class Run, class Wait, class ElapsedMs>
int warm_up(Run&& run, Wait&& wait, ElapsedMs&& elapsed_ms, int count, double min_ms) {
  const int unit = std::max(count, 1);
  int n = 0;
  for (; n < count; ++n) run(n);
  wait();
  for (int batch = unit; elapsed_ms() < min_ms;) {
    for (int j = 0; j < batch; ++j) run(n++);
    wait();
    if (batch < (1 << 20)) batch *= 2;  // (stays a multiple of unit)
  }
  return n;
}

}  // namespace fp4moe::bench
