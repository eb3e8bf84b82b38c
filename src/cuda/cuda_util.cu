// Internal CUDA helpers (src/cuda/cuda_util.h).
// SPDX-License-Identifier: Apache-2.0
#include "src/cuda/cuda_util.h"

namespace fp4moe::detail {

Status cuda_status(cudaError_t err, const char* what, const char* file, int line) {
  return Status(StatusCode::kCudaError, std::string(cudaGetErrorName(err)) + " (" + cudaGetErrorString(err) +
                                            ") from " + what + " at " + file + ":" + std::to_string(line));
}

Status check_device_pointer(const void* p, size_t bytes, const char* name) {
  if (p == nullptr) return invalid_argument(std::string(name) + " is null");
  if (!is_aligned(p, bytes))
    return misaligned(std::string(name) + " must be " + std::to_string(bytes) + "-byte aligned");
  return Status::ok();
}

}  // namespace fp4moe::detail
