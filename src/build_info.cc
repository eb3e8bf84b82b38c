// build_info(): the facts CMake recorded about this build (include/fp4moe/build_info.h).
// SPDX-License-Identifier: Apache-2.0
#include "fp4moe/build_info.h"

#include "fp4moe/version.h"
#include "fp4moe_build_config.h"  // generated: FP4MOE_BUILD_CUDA, FP4MOE_BUILD_CUDA_TARGETS
#include "fp4moe_git_hash.h"      // generated at build time: FP4MOE_GIT_HASH

namespace fp4moe {

BuildInfo build_info() {
  return BuildInfo{FP4MOE_VERSION_STRING, FP4MOE_GIT_HASH, FP4MOE_BUILD_CUDA != 0, FP4MOE_BUILD_CUDA_TARGETS};
}

}  // namespace fp4moe
