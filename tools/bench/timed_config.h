// The config `fp4moe bench` times its table, graphs and variants at: the layer's own pick or the sweep's fastest.
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <algorithm>
#include <map>
#include <utility>

namespace fp4moe::bench {

// The block_m key of the direct decode path in a sweep (a forward pass with block_m 0 and nothing forced, which the
// layer runs on that path where it fits).
inline constexpr int kDirectBlockM = 0;

enum class TimeAt { kLayerPick, kFastest };

// A sweep's entry: (block_m or kDirectBlockM, down K splits with 0 = the layer's choice) -> us.
using SweepTimes = std::map<std::pair<int, int>, double>;

struct TimedConfig {
  int block_m = 0, down_k_splits = 0;
  double us = 0;
  bool at_pick = false;  // the layer's own pick (false: the fastest, asked for or the pick not swept)
};

// The sweep's fastest entry (the first of equal times in key order); a default TimedConfig for an empty sweep.
inline TimedConfig fastest_config(const SweepTimes& sweep) {
  TimedConfig best;
  bool any = false;
  for (const auto& [cfg, us] : sweep)
    if (!any || us < best.us) {
      best = {cfg.first, cfg.second, us, false};
      any = true;
    }
  return best;
}

// The config timed after the sweep. The pick (pick_direct: the direct decode path, else pick_block_m with the layer's
// own pick_splits down K splits) is the sweep's entry with the splits left to the layer (0), or else forced to the
// layer's own count (a sweep of forced counts only, --down-k-splits); where the sweep has neither, or `at` asks for
// it, the fastest entry.
inline TimedConfig timed_config(const SweepTimes& sweep, TimeAt at, bool pick_direct, int pick_block_m, int pick_splits) {
  if (at == TimeAt::kLayerPick) {
    const int bm = pick_direct ? kDirectBlockM : pick_block_m;
    for (int sp : {0, std::max(1, pick_splits)}) {
      const auto it = sweep.find({bm, sp});
      if (it != sweep.end()) return {bm, sp, it->second, true};
    }
  }
  return fastest_config(sweep);
}

}  // namespace fp4moe::bench
