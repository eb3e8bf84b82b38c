// The config `fp4moe bench` times its table, graphs and variants at: the layer's own pick or the sweep's fastest.
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <initializer_list>
#include <map>
#include <utility>
#include <vector>

#include "fp4moe/moe.h"

namespace fp4moe::bench {

// The block_m key of the sweep entry that forces nothing: a forward pass with block_m 0 and the down K splits 0, so
// the layer's own plan (the direct decode path, or its tuning cache's or the heuristic's block_m and splits).
inline constexpr int kOwnPlanBlockM = 0;

enum class TimeAt { kLayerPick, kFastest };
inline constexpr const char* kTimeAtNames[] = {"pick", "fastest"};  // (`fp4moe bench --time-at`, JSON and CSV)
inline constexpr const char* time_at_name(TimeAt a) { return kTimeAtNames[a == TimeAt::kLayerPick ? 0 : 1]; }

// A sweep's entry: (block_m or kOwnPlanBlockM, down K splits with 0 = the layer's choice) -> us.
using SweepKey = std::pair<int, int>;
using SweepTimes = std::map<SweepKey, double>;

struct TimedConfig {
  int block_m = 0, down_k_splits = 0;
  double us = 0;
  bool at_pick = false;  // the layer's own plan (false: the fastest, asked for or the pick not swept)
};

// Whether two plans run the same kernels the same way: equal in everything MoeRunPlan::to_string prints but where
// block_m and the splits came from (a forced block_m reads no tuning cache, so it can give another split count or
// take another down kernel than the layer's own plan at the same block_m).
inline bool same_plan(MoeRunPlan a, MoeRunPlan b) {
  a.source.clear();
  b.source.clear();
  return a.to_string() == b.to_string();
}

// The sweep keys that run the layer's own plan `own`, in the order to look for them in a sweep: the forced block_m
// with the splits left to the layer, then forced to the plan's count, where `plan_at(block_m, splits)` (the layer's
// plan with those forced) is the same plan; last the unforced entry, which always is.
template <class PlanAt>
std::vector<SweepKey> own_plan_keys(const MoeRunPlan& own, PlanAt&& plan_at) {
  std::vector<SweepKey> keys;
  if (!own.direct_decode)
    for (int sp : {0, own.down_k_splits})
      if (same_plan(plan_at(own.block_m, sp), own)) keys.push_back({own.block_m, sp});
  keys.push_back({kOwnPlanBlockM, 0});
  return keys;
}

// The entries a sweep times, in order: the pass with nothing forced first where no block_m was asked for
// (`block_ms_asked` false) and the layer's own plan is the direct decode path or none of the forced `pick_keys`
// (own_plan_keys) is among the entries; then every block_m of `block_ms` at every count of `split_list` (0: the
// layer's choice). The caller skips a forced split count that a block_m's down tile does not divide.
inline std::vector<SweepKey> sweep_keys(const std::vector<int>& block_ms, const std::vector<int>& split_list,
                                        const std::vector<SweepKey>& pick_keys, bool own_direct, bool block_ms_asked) {
  std::vector<SweepKey> keys;
  for (int bm : block_ms)
    for (int sp : split_list) keys.push_back({bm, sp});
  bool forced_pick_swept = false;
  for (const SweepKey& k : pick_keys)
    for (const SweepKey& e : keys) forced_pick_swept = forced_pick_swept || (k.first != kOwnPlanBlockM && k == e);
  if (!block_ms_asked && (own_direct || !forced_pick_swept)) keys.insert(keys.begin(), {kOwnPlanBlockM, 0});
  return keys;
}

// The sweep's fastest entry (the first of equal times in key order); a default TimedConfig for an empty sweep.
inline TimedConfig fastest_config(const SweepTimes& sweep) {
  TimedConfig best;
  bool any = false;
  for (const auto& [key, us] : sweep)
    if (!any || us < best.us) {
      best = {key.first, key.second, us, false};
      any = true;
    }
  return best;
}

// The config timed after the sweep: with kLayerPick the first of `pick_keys` (own_plan_keys) that the sweep has, else
// (or with kFastest) the fastest entry.
inline TimedConfig timed_config(const SweepTimes& sweep, TimeAt at, const std::vector<SweepKey>& pick_keys) {
  if (at == TimeAt::kLayerPick)
    for (const SweepKey& k : pick_keys)
      if (const auto it = sweep.find(k); it != sweep.end()) return {k.first, k.second, it->second, true};
  return fastest_config(sweep);
}

}  // namespace fp4moe::bench
