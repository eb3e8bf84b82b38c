// What this build of fp4moe is: version, source revision, and which CUDA targets its kernels were compiled for.
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>

namespace fp4moe {

struct BuildInfo {
  const char* version;       // "0.3.0"
  const char* git_hash;      // short hash of the source tree at build time, "unknown" outside a git checkout
  bool cuda;                 // built with the CUDA kernels (FP4MOE_CUDA)
  const char* cuda_targets;  // FP4MOE_CUDA_ARCHS as built, e.g. "90a;120a"; "" without CUDA
};
BuildInfo build_info();
// One line of it, as `fp4moe --version` and the Python package print it:
// "fp4moe 0.3.0 (git 1234abcd5678, CUDA on, kernels for sm_90a sm_120f)".
std::string build_text();

}  // namespace fp4moe
