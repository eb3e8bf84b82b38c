// The shared-memory planner: per-architecture budgets, named GPUs, model presets, and fp4moe's own kernel
// configs laid out byte by byte (from the same constexpr function the kernels use), before anything runs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fp4moe/moe.h"
#include "fp4moe/moe_gemm_config.h"
#include "fp4moe/status.h"

namespace fp4moe {

struct ArchInfo {
  int cc;                      // 80, 86, 89, 90, 100, 103, 120, 121
  const char* name;            // "sm_90"
  int64_t smem_per_sm;         // bytes
  int64_t smem_per_block;      // opt-in maximum per block, bytes
  int64_t regs_per_sm;         // 32-bit registers
  int max_threads_per_sm;
  int max_blocks_per_sm;
  const char* example;         // a GPU of this arch
};
const std::vector<ArchInfo>& arch_table();
// "sm_90", "sm90", "90", "sm_90a" -> the row; an error naming the known archs otherwise.
Status find_arch(const std::string& name, const ArchInfo** out);

struct GpuInfo {
  const char* name;    // "H200"
  int cc;
  int sms;
  double mem_bw_gbs;   // vendor datasheet
  double bf16_tflops;  // dense tensor peak, vendor datasheet (0 = not supported)
  double fp8_tflops;
  double fp4_tflops;
  const char* source;  // where the numbers come from
  bool measured = false;  // true for the live row built from cudaGetDeviceProperties
};
const std::vector<GpuInfo>& gpu_table();
Status find_gpu(const std::string& name, const GpuInfo** out);

struct ModelPreset {
  const char* key;     // "glm5"
  const char* name;    // "GLM-5 (744B-A40B)"
  MoeShape shape;
  int moe_layers;
};
const std::vector<ModelPreset>& model_presets();
Status find_model(const std::string& key, const ModelPreset** out);

// The plan of one kernel config (block_m x block_n x block_k) on one arch for one GEMM of a model.
struct KernelPlan {
  std::string gemm;                 // "gate_up" or "down"
  int block_m = 0, block_n = 0, block_k = 0;
  int stages = 0;                   // planned for the arch (moe_gemm_planned_stages)
  MoeGemmSmemLayout smem{};         // byte-by-byte layout at those stages
  int64_t limit = 0;                // opt-in shared memory per block on the arch
  int blocks_per_sm_smem = 0;       // resident blocks by shared memory (incl. the 1 KB runtime reservation)
  int blocks_per_sm_threads = 0;
  int blocks_per_sm = 0;            // the smaller of the above (registers: capped by __launch_bounds__)
  bool fits = false;                // smem.total <= limit, the shape divides the tile and the kernels can copy it
  bool buildable = true;            // the kernels' copy assignment serves the tile (moe_gemm_copy_problem)
  bool shipped = false;             // compiled into this library for this arch
  bool warp_specialized = false;    // a producer warpgroup + block_n / 64 consumer warpgroups, one block per SM
                                    // (kernels/moe_gemm_ws.cuh; smem.barriers holds its mbarriers)
  std::string reason;               // in words: why it fits or not
};

// block_m of every kernel config compiled into this library (the same list as kernel_block_ms(), which
// needs the CUDA library; a test keeps the two equal).
std::vector<int> shipped_block_ms();
// Whether the kernels take `splits` K ranges for the down GEMM of `shape` (MoeForwardArgs::down_k_splits, the
// tuning cache): 1, 2, 4 or 8, dividing its K tiles (intermediate / 256).
bool down_k_splits_supported(const MoeShape& shape, int64_t splits);

// Plans for every shipped block_m config (or one custom tile) of both GEMMs of `shape` on `arch`.
// A custom tile uses `stages` when given, else the largest count that fits.
Status plan_kernels(const MoeShape& shape, const ArchInfo& arch, std::optional<std::vector<int>> custom_tile,
                    std::optional<int> stages, std::vector<KernelPlan>* out);

// Bytes of the active experts' NVFP4 weights (incl. scales) for T tokens with uniform routing (expected
// number of distinct experts), and the floor time at `bw_gbs`.
double expected_active_experts(const MoeShape& s, int64_t tokens);
double moe_weight_bytes(const MoeShape& s, double active_experts);

// "102,400" style thousands separators.
std::string with_commas(int64_t v);

}  // namespace fp4moe
