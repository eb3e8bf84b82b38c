// Plans GLM-5's kernels on sm_120 through the installed fp4moe and prints the first plan's verdict.
// SPDX-License-Identifier: Apache-2.0
#include <cstdio>
#include <vector>

#include "fp4moe/planner.h"
#include "fp4moe/version.h"

int main() {
  const fp4moe::ModelPreset* m = nullptr;
  const fp4moe::ArchInfo* a = nullptr;
  std::vector<fp4moe::KernelPlan> plans;
  if (!fp4moe::find_model("glm5", &m).is_ok() || !fp4moe::find_arch("sm_120", &a).is_ok() ||
      !fp4moe::plan_kernels(m->shape, *a, std::nullopt, std::nullopt, &plans).is_ok() || plans.empty())
    return 1;
  std::printf("fp4moe %s: %zu plans on %s, first %s\n", FP4MOE_VERSION_STRING, plans.size(), a->name,
              plans[0].fits ? "fits" : "does not fit");
  return plans[0].fits ? 0 : 1;
}
