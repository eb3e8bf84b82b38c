// build_info(): the facts CMake recorded about this build (include/fp4moe/build_info.h).
// SPDX-License-Identifier: Apache-2.0
#include "fp4moe/build_info.h"

#include "fp4moe/planner.h"  // built_cuda_targets
#include "fp4moe/version.h"
#include "fp4moe_build_config.h"  // generated: FP4MOE_BUILD_CUDA, FP4MOE_BUILD_CUDA_TARGETS
#include "fp4moe_git_hash.h"      // generated at build time: FP4MOE_GIT_HASH

namespace fp4moe {

BuildInfo build_info() {
  return BuildInfo{FP4MOE_VERSION_STRING, FP4MOE_GIT_HASH, FP4MOE_BUILD_CUDA != 0, FP4MOE_BUILD_CUDA_TARGETS};
}

std::string build_text() {
  const BuildInfo b = build_info();
  std::string targets;
  for (const auto& t : built_cuda_targets()) targets += " sm_" + t;
  return std::string("fp4moe ") + b.version + " (git " + b.git_hash + ", CUDA " +
         (b.cuda ? "on, kernels for" + targets : std::string("off, no kernels")) + ")";
}

}  // namespace fp4moe
