// The grouped-GEMM kernel configs compiled into fp4moe (per architecture), for the layer, planner and tests.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/moe_gemm.cuh"

namespace fp4moe::detail {

using GemmKernelFn = void (*)(const kernels::MoeGemmParams);

struct MoeKernelSet {
  int block_m, block_n, block_k, stages, arch, threads;
  int64_t smem_bytes;
  GemmKernelFn gate_up, down_store, down_atomic;
};

// Every shipped config; `arch` is the compute-capability family it was planned for (90 or 120).
const std::vector<MoeKernelSet>& moe_kernel_sets();

}  // namespace fp4moe::detail
