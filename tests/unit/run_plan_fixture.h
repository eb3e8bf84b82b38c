// Test-only: the configs a GPU keeps resident and a planner context over them, for unit tests of the layer's plan.
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <vector>

#include "fp4moe/planner.h"
#include "src/moe/run_plan.h"

namespace fp4moe::detail::plan_test {

// The configs a GPU of family `cc` with `sms` SMs keeps resident: every catalogue config of the arch at its planned
// blocks per SM (what cudaOccupancyMaxActiveBlocksPerMultiprocessor reports for them on the H200).
inline std::vector<ResidentConfig> resident_on(int cc, int sms, bool warp_specialized = true) {
  std::vector<ResidentConfig> v;
  for (size_t i = 0; i < catalogue::kNumTiles; ++i) {
    if (!catalogue::tile_on(i, cc)) continue;
    const catalogue::ShippedConfig c = catalogue::config_on(i, cc);
    if (!warp_specialized && c.tile.family == KernelFamily::kWarpSpecialized) continue;
    // (clusters of 8 of the cluster decode kernel: what the H200 reports for the two 8-token configs, 30 and 45; a
    // cluster stays inside a GPC)
    const int clusters = c.tile.cluster_decode && cc == 90 ? (c.blocks_per_sm == 2 ? 30 : 45) * sms / 132 : 0;
    v.push_back(ResidentConfig{c, c.blocks_per_sm * sms, clusters});
  }
  return v;
}

// The tiled path's decisions (direct decode and the cluster decode kernel off; RunPlan.DirectDecode* and
// RunPlan.ClusterDecode* test them).
struct Fixture {
  MoeShape shape{256, 6144, 2048, 8};  // GLM-5
  MoeLayerOptions options = [] {
    MoeLayerOptions o;
    o.direct_decode = false;
    o.cluster_decode = false;
    return o;
  }();
  std::vector<ResidentConfig> configs;
  std::map<int64_t, TunedChoice> tuned;
  int arch = 90;
  int sms = 0;
  PlanContext ctx() const { return PlanContext{&shape, &options, arch, &configs, &tuned, sms, DirectKernelRegs{}}; }
  MoeRunPlan plan(int64_t T, int bm = 0, int splits = 0) const {
    MoeRunPlan p;
    const Status s = make_run_plan(ctx(), T, bm, splits, &p, nullptr);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    return p;
  }
};

inline Fixture h200() {
  Fixture f;
  f.configs = resident_on(90, 132);
  f.sms = 132;
  return f;
}

}  // namespace fp4moe::detail::plan_test
