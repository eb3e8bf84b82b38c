// Live GPU properties for the CLI (see live_device.h).
// SPDX-License-Identifier: Apache-2.0
#include "live_device.h"

#if FP4MOE_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace fp4moe::cli {

LiveDevice query_live_device() {
  LiveDevice d;
#if FP4MOE_HAVE_CUDA
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    cudaGetLastError();
    return d;
  }
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) return d;
  d.present = true;
  d.name = p.name;
  d.cc = p.major * 10 + p.minor;
  d.sms = p.multiProcessorCount;
  d.smem_per_block = static_cast<int64_t>(p.sharedMemPerBlockOptin);
  d.smem_per_sm = static_cast<int64_t>(p.sharedMemPerMultiprocessor);
#endif
  return d;
}

}  // namespace fp4moe::cli
