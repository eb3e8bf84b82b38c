// The shared-memory planner: per-architecture budgets, named GPUs, model presets, and fp4moe's own kernel
// configs laid out byte by byte (from the same constexpr functions the kernels use), before anything runs.
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fp4moe/arch.h"
#include "fp4moe/kernel_types.h"
#include "fp4moe/moe.h"
#include "fp4moe/status.h"

namespace fp4moe {

// The rows of kArchTable (fp4moe/arch.h), in its order.
const std::vector<ArchInfo>& arch_table();
// "sm_90", "sm90", "90", "sm_90a" -> the row; an error naming the known archs otherwise.
Status find_arch(const std::string& name, const ArchInfo** out);

// The CUDA targets this build compiled kernels for, as given to CMake (FP4MOE_CUDA_ARCHS: "90a", "120a", ...);
// empty in a build without CUDA.
std::vector<std::string> built_cuda_targets();
// Whether a cubin compiled for CUDA target `target` ("90a", "120f", "120") runs on compute capability `cc` with a
// kernel body there: "90a" (arch-specific) on 9.0 only, "120f" (family-specific) and "120" (plain SASS) on 12.0
// and later 12.x minors; and the kernels compiled into it must be the ones planned for cc (kernel_arch_family).
bool cuda_target_runs_on(const std::string& target, int cc);
// Whether this build has kernels that run on compute capability `cc`: a config family is planned for it and one
// of built_cuda_targets() runs there.
bool arch_has_kernels(int cc);

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
  std::vector<std::string> aliases;  // other names find_gpu accepts (the CUDA runtime's device names among them)
};
const std::vector<GpuInfo>& gpu_table();
// By name, ignoring case, spaces and punctuation, and a leading "NVIDIA" / "GeForce" (so cudaDeviceProp::name
// works): an exact name or alias, or a prefix that only one GPU has. Unknown and ambiguous names are errors that
// list the candidates; names with characters outside ASCII letters, digits and " ._-()/+" are rejected.
Status find_gpu(const std::string& name, const GpuInfo** out);

struct ModelPreset {
  const char* key;     // "glm5"
  const char* name;    // "GLM-5 (744B-A40B)"
  MoeShape shape;
  int moe_layers;
};
const std::vector<ModelPreset>& model_presets();
// By key or name, with find_gpu's rules ("qwen3" is ambiguous: qwen3-235b, qwen3-30b).
Status find_model(const std::string& key, const ModelPreset** out);

// The plan of one kernel config (block_m x block_n x block_k) on one arch for one GEMM of a model.
struct KernelPlan {
  std::string gemm;                 // "gate_up" or "down"
  KernelFamily family = KernelFamily::kMultistage;
  int block_m = 0, block_n = 0, block_k = 0;
  int stages = 0;                   // planned for the arch, or forced
  MoeGemmSmemLayout smem{};         // byte-by-byte layout at those stages
  int64_t limit = 0;                // opt-in shared memory per block on the arch
  int blocks_per_sm_smem = 0;       // resident blocks by shared memory (incl. the runtime's reservation)
  int blocks_per_sm_threads = 0;
  int blocks_per_sm = 0;            // the smaller of the above (registers: capped by __launch_bounds__)
  bool fits = false;                // smem.total <= limit, the shape divides the tile and the kernels can copy it
  bool buildable = true;            // the kernels' copy assignment serves the tile (moe_gemm_copy_problem)
  bool shipped = false;             // this exact config (tile and stages) is compiled into this build for the arch
  bool warp_specialized = false;    // family == kWarpSpecialized (smem.barriers holds its mbarriers)
  std::string reason;               // in words: why it fits or not
};

// block_m of every shipped config (the catalogue, kernels/moe_gemm_catalogue.h), in catalogue order.
std::vector<int> shipped_block_ms();
// The block_ms with a shipped tile on compute capability `cc` (sm_90 has the warp-specialized 128-token tile, the
// other archs stop at 64); empty for an arch fp4moe builds no kernels for.
std::vector<int> shipped_block_ms(int cc);
// Whether `splits` K ranges can serve the down GEMM of `shape` (MoeForwardArgs::down_k_splits, the tuning cache): 1,
// 2, 4 or 8 dividing intermediate / 64 (the smallest K tile). A call also needs them to divide the K tiles of the
// down config it runs (MoeLayer::plan says so).
bool down_k_splits_supported(const MoeShape& shape, int64_t splits);

// Plans for every shipped config (or one custom tile) of both GEMMs of `shape` on `arch`. A custom tile uses
// `stages` when given, else the largest count that fits. *out is written only when the call succeeds.
Status plan_kernels(const MoeShape& shape, const ArchInfo& arch, std::optional<std::vector<int>> custom_tile,
                    std::optional<int> stages, std::vector<KernelPlan>* out);

// The configs the layer runs for one GPU's `shape` on `arch` (a tensor- or expert-parallel shard, or a whole layer),
// one row per block_m that has configs for both GEMMs: each GEMM's family and N x K tile ("warp-specialized
// 256x128"), as the layer picks them for a call of many pairs. A shape the layer rejects is an error naming the
// rule; an empty list means no shipped config divides both GEMMs.
struct ShardTiles {
  int block_m = 0;
  std::string gate_up, down;
};
Status shard_kernel_tiles(const MoeShape& shape, const ArchInfo& arch, std::vector<ShardTiles>* out);

// Bytes of the active experts' NVFP4 weights (incl. scales) for T tokens with uniform routing (expected number of
// distinct experts of this layer: under expert parallelism, of its local ones, each token picking k of the model's
// num_global_experts), and the floor time at `bw_gbs`.
double expected_active_experts(const MoeShape& s, int64_t tokens);
double moe_weight_bytes(const MoeShape& s, double active_experts);

// Workspace bytes of one call of T tokens with the finalize `mode` whose plan splits the down GEMM's K in
// down_k_splits and gate_up's K not at all (MoeLayer::workspace_size gives a live layer's own figure, which also
// covers the split counts its plans may take). At large T it is mostly the partial sums: T k H fp32
// (kDeterministic), T k H bf16 (kDeterministicBf16), T H fp32 (kAtomic). 0 for a shape or T the layer rejects.
int64_t moe_workspace_bytes(const MoeShape& s, FinalizeMode mode, int64_t tokens, int down_k_splits = 1);

// "102,400" style thousands separators.
std::string with_commas(int64_t v);

}  // namespace fp4moe
