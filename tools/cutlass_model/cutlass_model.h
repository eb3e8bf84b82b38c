// Model of CUTLASS's shared-memory arithmetic (builder stage counts, and the real SharedStorage of the
// TensorRT-LLM / FlashInfer sm_120 NVFP4 MoE grouped GEMM) by CUTLASS version, so the planner can say
// which CUTLASS tactics launch on a GPU and why the others fail.
//
// Everything here is plain integer arithmetic restated from the CUTLASS / TensorRT-LLM headers of the
// pinned FlashInfer wheels; tests/cutlass_truth/ compiles the real templates host-only and
// tests/unit/test_cutlass_truth.cc checks this model against every number they print.
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fp4moe/status.h"

namespace fp4moe {

// ---- CUTLASS versions ---------------------------------------------------------------------------------

// The CUTLASS releases modelled. They differ in the block-scaled builders (see cutlass_model.cc).
enum class CutlassVersion {
  k4_2_1,  // as shipped in flashinfer-python 0.6.3
  k4_5_0,  // as shipped in flashinfer-python 0.7.4
};
inline constexpr CutlassVersion kLatestCutlassVersion = CutlassVersion::k4_5_0;

const char* cutlass_version_name(CutlassVersion v);        // "4.2.1", "4.5.0"
const char* cutlass_flashinfer_release(CutlassVersion v);  // "0.6.3", "0.7.4"
// Every modelled version, oldest first.
std::vector<CutlassVersion> cutlass_versions();
// Accepts "4.2.1", "4.2", "4.5.0", "4.5", "flashinfer-0.6.3", "flashinfer-0.7.4", "latest" and "" (latest).
Status parse_cutlass_version(const std::string& text, CutlassVersion* out);

// Shared memory per block that CUTLASS's builders assume for an architecture (compute capability
// major * 10 + minor): 232,448 B on sm_90 / sm_100 / sm_103, 101,376 B on sm_120 / sm_121.
// These equal the devices' opt-in limit (cudaDevAttrMaxSharedMemoryPerBlockOptin).
Status cutlass_smem_capacity(int arch, int64_t* out);

// ---- sm_90 collective builder: dense TMA warp-specialized GEMM (GMMA, both operands from smem) ---------

struct CutlassSm90GemmShape {
  int tile_m = 128, tile_n = 128, tile_k = 64;  // CTA tile (TileShape_MNK), elements
  int a_bits = 16, b_bits = 16;  // bits per element in smem: 16 (bf16/fp16), 8 (fp8), 32 (fp32 -> tf32)
  bool grouped = false;          // ptr-array / grouped GEMM (pointer strides, KernelPtrArray... schedule)
  int64_t carveout_bytes = 0;    // N of StageCountAutoCarveout<N> (usually the epilogue's SharedStorage)
};

struct CutlassSm90StageCount {
  int64_t capacity = 0;                  // 232,448
  int64_t tensormap_bytes = 0;           // grouped: two TMA descriptors (A, B) kept in smem
  int64_t scheduler_pipeline_bytes = 0;  // grouped: the 8-stage scheduler pipeline's barriers
  int64_t reduced_capacity = 0;          // capacity minus the two above
  int64_t usable_capacity = 0;           // reduced_capacity rounded down to 128
  int64_t carveout_rounded = 0;          // carveout rounded up to 128
  int64_t a_bytes = 0, b_bytes = 0;      // one stage's A and B tiles
  int64_t tiles_rounded = 0;             // a + b rounded up to 128
  int64_t pipeline_bytes = 0;            // one stage's full + empty barrier (16)
  int64_t stage_bytes = 0;               // tiles_rounded + pipeline_bytes
  int stages = 0;                        // (usable - carveout_rounded) / stage_bytes, truncated as in C++
  std::string describe() const;
};

Status cutlass_sm90_stage_count(CutlassVersion v, const CutlassSm90GemmShape& shape, CutlassSm90StageCount* out);

// ---- block-scaled NVFP4 builders: sm_100 (UMMA) and sm_120 (warp MMA) ------------------------------------
// NVFP4 only: E2M1 data, UE4M3 scale per 16 elements along K, both operands K-major.

struct CutlassBlockScaledShape {
  int arch = 120;        // 100 (B200 / GB200 builder) or 120 / 121 (RTX 50x0, RTX PRO 6000, GB10 builder)
  int tile_m = 128, tile_n = 128, tile_k = 128;  // MmaTileShape in FP4 elements; sm_100 2-SM: the pair's M
  bool two_sm = false;   // sm_100 only: 2-SM MMA (M = 256 split over a 2-CTA cluster)
  bool grouped = true;   // ptr-array grouped GEMM (what MoE uses)
  int64_t carveout_bytes = 0;  // N of StageCountAutoCarveout<N>
};

struct CutlassBlockScaledStageCount {
  int64_t capacity = 0;  // the architecture's capacity
  // What the builder subtracts from the capacity before dividing; 0 where a version or kind has none.
  int64_t scheduler_pipeline_bytes = 0;        // tile-scheduler (or CLC fetch) pipeline barriers
  int64_t clc_response_bytes = 0;              // CLC (cluster launch control) responses
  int64_t tensormap_bytes = 0;                 // TMA descriptors kept in smem by grouped kernels
  int64_t tensormap_ready_pipeline_bytes = 0;  // barriers that publish updated descriptors
  int64_t accumulator_pipeline_bytes = 0;      // sm_100: TMEM accumulator pipeline
  int64_t load_order_barrier_bytes = 0;        // sm_100: mainloop / epilogue load order
  int64_t clc_throttle_pipeline_bytes = 0;     // sm_100: CLC throttle pipeline
  int64_t tmem_dealloc_bytes = 0;              // sm_100: TMEM deallocation barrier
  int64_t tmem_base_ptr_bytes = 0;             // sm_100: TMEM base addresses
  int64_t kernel_carveout = 0;                 // sum of the above
  int64_t reduced_capacity = 0;                // capacity - kernel_carveout
  // One stage as the builder counts it (per SM on sm_100).
  int64_t a_bytes = 0, b_bytes = 0, sfa_bytes = 0, sfb_bytes = 0;
  int64_t pipeline_bytes = 0;  // mainloop barriers of one stage (16, or 16 rounded up to 128)
  int64_t stage_bytes = 0;
  int64_t carveout_bytes = 0;
  int stages = 0;              // (reduced_capacity - carveout) / stage_bytes, truncated as in C++
  // CUTLASS 4.2.1 sm_120 only: for N not a multiple of 128 the builder counts SFB rows in whole
  // 128-row blocks, i.e. no SFB bytes at all for N < 128.
  bool sfb_undercounted = false;
  std::string describe() const;
};

Status cutlass_blockscaled_stage_count(CutlassVersion v, const CutlassBlockScaledShape& shape,
                                       CutlassBlockScaledStageCount* out);

// ---- sm_120 NVFP4 MoE grouped GEMM of TensorRT-LLM / FlashInfer ------------------------------------------
// W4A4: NVFP4 activations and weights, bf16 / fp16 output, cluster 1x1x1, cooperative ptr-array kernel
// (CUTLASS's sm90 array cooperative kernel with the sm_120 block-scaled mainloop and TMA epilogue).

enum class MoeEpilogueFusion {
  kNone,      // plain store of D (both GEMMs)
  kFinalize,  // down projection only: scale by the router weight and scatter-add into the token's row
};
enum class MoeOutputType { kBf16, kFp16 };
const char* moe_epilogue_fusion_name(MoeEpilogueFusion f);  // "NONE", "FINALIZE"
const char* moe_output_type_name(MoeOutputType t);          // "bf16", "fp16"

struct CutlassSm120MoeTactic {
  // MmaTileShape in FP4 elements: TensorRT-LLM's CtaShape128x256x64B is 128 x 256 x 128 here.
  int tile_m = 128, tile_n = 128, tile_k = 128;
  MoeEpilogueFusion epilogue = MoeEpilogueFusion::kNone;
  bool swap_ab = false;  // weights as the MMA's A (output stored transposed, column-major D)
  MoeOutputType output = MoeOutputType::kBf16;
  std::string name() const;  // e.g. "128x256x128 FINALIZE swap_ab=0 bf16"
};

// CollectiveEpilogue::SharedStorage: what the launcher passes to the builder as the carve-out.
struct CutlassSm120MoeEpilogue {
  int stages_c = 0, stages_d = 0;  // C (source) and D (output) staging buffers
  bool reuse_smem_c = false;       // D written into C's buffers (NONE) or separate buffers (FINALIZE)
  int64_t alignment = 0;           // 512 (row-major D: 64 B swizzle) or 1024 (column-major D: 128 B)
  int64_t collective = 0;          // C / D staging buffers
  int64_t fusion = 0;              // fusion callbacks' smem (FINALIZE: a row of bias or router scales)
  int64_t tensors = 0;             // collective + fusion rounded up to alignment
  int64_t tensormaps = 0;          // C and two D TMA descriptors
  int64_t pipeline = 0;            // C load pipeline barriers
  int64_t total = 0;               // sizeof(SharedStorage) = the builder's carve-out
};

// GemmKernel::SharedStorage at a given stage count: every member, offsets from its start.
struct CutlassSm120MoeSmem {
  int stages = 0;
  // tensors.mainloop: one buffer per stage for A, B (each 1024-aligned) and their scales (16-aligned)
  int64_t a_offset = 0, a_bytes = 0, b_offset = 0, b_bytes = 0;
  int64_t sfa_offset = 0, sfa_bytes = 0, sfb_offset = 0, sfb_bytes = 0;
  int64_t mainloop_bytes = 0;    // rounded up to 1024
  int64_t mainloop_padding = 0;  // mainloop_bytes - (a + b + sfa + sfb)
  // tensors.epilogue
  int64_t epilogue_offset = 0, epilogue_bytes = 0;
  int64_t epilogue_collective = 0, epilogue_fusion = 0, epilogue_padding = 0;
  int64_t tensors_bytes = 0;     // mainloop + epilogue rounded up to 1024
  int64_t tensors_padding = 0;   // that last rounding
  // pipelines
  int64_t pipelines_offset = 0, pipelines_bytes = 0;
  int64_t pipeline_scheduler = 0, pipeline_mainloop = 0, pipeline_epi_load = 0, pipeline_load_order = 0;
  int64_t scheduler_response_offset = 0, scheduler_response_bytes = 0;
  // tensormaps
  int64_t tensormaps_padding = 0;  // to the 128-byte alignment of the descriptors
  int64_t tensormaps_offset = 0, tensormaps_bytes = 0;
  int64_t tensormaps_mainloop_offset = 0, tensormaps_mainloop = 0;
  int64_t tensormaps_epilogue_offset = 0, tensormaps_epilogue = 0;
  int64_t final_padding = 0;  // sizeof rounds the struct up to its 1024-byte alignment
  int64_t total = 0;          // sizeof(SharedStorage): the dynamic smem the kernel requests
  // tensors_bytes - the tiles themselves: all alignment padding inside tensors
  int64_t tensors_alignment_padding() const;
  // every padding byte in the struct
  int64_t alignment_padding() const;
  std::string describe() const;  // "102,400 B = 100,352 tiles (A 24,576 + ...) + 224 pipeline barriers + ..."
};

struct CutlassSm120MoePlan {
  CutlassVersion version = kLatestCutlassVersion;
  CutlassSm120MoeTactic tactic;
  int64_t limit = 0;                  // 101,376: sm_120's opt-in shared memory per block
  CutlassSm120MoeEpilogue epilogue;   // the carve-out
  CutlassBlockScaledStageCount builder;
  bool builder_compiles = false;      // builder stages >= 2 (the mainloop static_asserts that)
  CutlassSm120MoeSmem smem;           // at the builder's stage count (when builder_compiles)
  bool fits = false;                  // smem.total <= limit: cudaFuncSetAttribute accepts it
  int64_t over_by = 0;                // smem.total - limit when it does not fit
  int64_t slack = 0;                  // limit - smem.total when it fits
  int largest_fitting_stages = 0;     // largest stage count >= 2 whose SharedStorage fits (0: none)
  int64_t largest_fitting_bytes = -1; // its sizeof(SharedStorage) (-1: none)
  std::string verdict() const;        // "fits (slack 3,072 B)" / "over by 1,024 B" / ...
  std::string describe() const;
};

Status cutlass_sm120_moe_epilogue(CutlassVersion v, const CutlassSm120MoeTactic& t, CutlassSm120MoeEpilogue* out);
// stages >= 2 (the mainloop needs two).
Status cutlass_sm120_moe_smem(CutlassVersion v, const CutlassSm120MoeTactic& t, int stages, CutlassSm120MoeSmem* out);
Status cutlass_sm120_moe_plan(CutlassVersion v, const CutlassSm120MoeTactic& t, CutlassSm120MoePlan* out);

// The sm_120 NVFP4 grouped-GEMM tactics the FlashInfer release of `v` tries, in its order: the tiles of
// get_candidate_configs_sm120 with epilogue NONE, the same with FINALIZE (down projection only), then
// all of those again with swap_ab.
std::vector<CutlassSm120MoeTactic> cutlass_sm120_moe_tactics(CutlassVersion v,
                                                             MoeOutputType output = MoeOutputType::kBf16);
Status cutlass_sm120_moe_plans(CutlassVersion v, MoeOutputType output, std::vector<CutlassSm120MoePlan>* out);

}  // namespace fp4moe
