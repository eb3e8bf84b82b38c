// The architecture table: per compute capability, the limits that decide which kernel configs fit and run.
// SPDX-License-Identifier: Apache-2.0
//
// The one definition of these facts: the kernels' static_asserts, the planner, the tuner, the CUTLASS model and
// the CLI read this table. Source: CUDA C++ Programming Guide, "Technical Specifications per Compute
// Capability" (shared memory per SM, the opt-in maximum per block, registers, resident threads and blocks per
// SM) and cudaDevAttrReservedSharedMemoryPerBlock (1 KB of every block's shared memory is the runtime's since
// sm_80).
#pragma once

#include <cstdint>

namespace fp4moe {

struct ArchInfo {
  int cc = 0;                            // compute capability, major * 10 + minor: 80, 86, 89, 90, 100, ...
  const char* name = "";                 // "sm_90"
  int64_t smem_per_sm = 0;               // shared memory per SM, bytes
  int64_t smem_per_block = 0;            // opt-in maximum per block, bytes (cudaDevAttrMaxSharedMemoryPerBlockOptin)
  int64_t regs_per_sm = 0;               // 32-bit registers
  int max_threads_per_sm = 0;
  int max_blocks_per_sm = 0;
  const char* example = "";              // GPUs of this arch
  int64_t reserved_smem_per_block = 1024;  // the runtime's share of each block's shared memory
};

inline constexpr ArchInfo kArchTable[] = {
    {80, "sm_80", 167936, 166912, 65536, 2048, 32, "A100"},
    {86, "sm_86", 102400, 101376, 65536, 1536, 16, "RTX 3090, A40"},
    {89, "sm_89", 102400, 101376, 65536, 1536, 24, "L40S, RTX 4090"},
    {90, "sm_90", 233472, 232448, 65536, 2048, 32, "H100, H200"},
    {100, "sm_100", 233472, 232448, 65536, 2048, 32, "B200"},
    {103, "sm_103", 233472, 232448, 65536, 2048, 32, "B300"},
    {120, "sm_120", 102400, 101376, 65536, 1536, 32, "RTX 5090, RTX PRO 6000"},
    {121, "sm_121", 102400, 101376, 65536, 1536, 32, "GB10 (DGX Spark)"},
};

// The row of compute capability `cc`; a row of zeros (cc 0) for an arch the table does not know.
constexpr ArchInfo arch_info(int cc) {
  for (const ArchInfo& a : kArchTable)
    if (a.cc == cc) return a;
  return ArchInfo{};
}

// The kernel family an arch runs: sm_121 runs the configs planned for sm_120 (same limits).
constexpr int kernel_arch_family(int cc) { return cc == 121 ? 120 : cc; }

}  // namespace fp4moe
