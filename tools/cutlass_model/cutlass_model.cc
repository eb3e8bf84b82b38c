// CUTLASS shared-memory model: builder stage counts (sm_90, sm_100, sm_120) and the sm_120 NVFP4 MoE
// kernel's SharedStorage, restated from the headers of the pinned FlashInfer wheels (see tools/cutlass_model/cutlass_model.h).
// SPDX-License-Identifier: Apache-2.0
#include "cutlass_model.h"

#include <utility>

#include "fp4moe/arch.h"
#include "fp4moe/planner.h"

namespace fp4moe {
namespace {

// ---- small helpers --------------------------------------------------------------------------------------

int64_t round_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

// 102400 -> "102,400"
std::string commas(int64_t v) { return with_commas(v); }

// ---- sizes of CUTLASS building blocks ---------------------------------------------------------------------
// An mbarrier is 8 bytes; a CUTLASS pipeline keeps a "full" and an "empty" barrier per stage.
constexpr int64_t kBarrierBytes = 8;
constexpr int64_t pipeline_bytes(int64_t stages) { return 2 * kBarrierBytes * stages; }
// A TMA descriptor (CUtensorMap) is 128 bytes and must be 128-byte aligned.
constexpr int64_t kTmaDescriptorBytes = 128;
// A CLC (cluster launch control) or grouped-scheduler response is four 32-bit words.
constexpr int64_t kSchedulerResponseBytes = 16;
// The ordered barrier between mainloop and epilogue producer loads: one stage, two groups.
constexpr int64_t kLoadOrderBarrierBytes = 2 * kBarrierBytes;

// CUTLASS's capacities (cutlass/arch/arch.h, sm90_common.inl) are the opt-in per-block limits of the arch table;
// the truth test (tests/cutlass_truth) checks them against the headers.
constexpr int64_t kSm90Capacity = arch_info(90).smem_per_block;
constexpr int64_t kSm100Capacity = arch_info(100).smem_per_block;
constexpr int64_t kSm120Capacity = arch_info(120).smem_per_block;

bool is_sm120_family(int arch) { return arch == 120 || arch == 121; }

// NVFP4 scale factors: one UE4M3 byte per 16 elements along K. CUTLASS's smem layout keeps them in
// blocks of 128 rows x 4 scales (512 B), so a tile's scale bytes are rows_in_whole_blocks * K / 16.
constexpr int64_t kScaleVector = 16;
constexpr int64_t kScaleRowBlock = 128;
constexpr int64_t scale_bytes(int64_t rows, int64_t k) { return rows * k / kScaleVector; }

// FP4 data: two elements per byte.
constexpr int64_t fp4_bytes(int64_t rows, int64_t k) { return rows * k / 2; }

// Tile extents in (0, 65536]: a real CTA tile is at most a few hundred; the bound keeps every product below in int64.
Status check_positive_tile(int m, int n, int k) {
  constexpr int kMaxExtent = 1 << 16;
  if (m <= 0 || n <= 0 || k <= 0 || m > kMaxExtent || n > kMaxExtent || k > kMaxExtent) {
    return invalid_argument("tile " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) +
                            ": every extent must be in [1, 65536]");
  }
  return Status::ok();
}

// A carve-out in [0, capacity]; a larger one leaves CUTLASS's builder a negative stage count, which does not compile.
Status check_carveout(const std::string& what, int64_t carveout, int64_t capacity) {
  if (carveout < 0) return invalid_argument(what + "carve-out must not be negative");
  if (carveout > capacity)
    return unsupported(what + "a carve-out of " + commas(carveout) + " B exceeds the " + commas(capacity) +
                       " B capacity: CUTLASS's stage count would be negative (the builder does not compile it)");
  return Status::ok();
}

Status check_version(CutlassVersion v) {
  if (v != CutlassVersion::k4_2_1 && v != CutlassVersion::k4_5_0) {
    return invalid_argument("unknown CutlassVersion value " + std::to_string(static_cast<int>(v)));
  }
  return Status::ok();
}

std::string tile_name(int m, int n, int k) {
  return std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
}

// Tile rules of the sm_120 block-scaled builder (shared by the MoE model).
Status check_sm120_tile(int m, int n, int k) {
  FP4MOE_RETURN_IF_ERROR(check_positive_tile(m, n, k));
  const std::string t = "sm_120 block-scaled tile " + tile_name(m, n, k) + ": ";
  if (k % kScaleVector != 0) {
    return invalid_argument(t + "K must be a multiple of 16 (one NVFP4 scale per 16 elements)");
  }
  // The cooperative tiled MMA is 4 x 2 warps of m16n8k64, permuted to 64..128 x 32 x 64.
  if (m % 64 != 0 || n % 32 != 0 || k % 64 != 0) {
    return invalid_argument(t + "not a multiple of the MMA tile (M by 64, N by 32, K by 64)");
  }
  // The SFA smem layout counts whole 128-row blocks: M = 64 would hold no scales at all.
  if (m % kScaleRowBlock != 0) {
    return unsupported(t + "M must be a multiple of 128 (the scale-factor layout's row block)");
  }
  // N in (128, ...) that is not a multiple of 128 would drop a partial SFB block; not modelled.
  if (n > kScaleRowBlock && n % kScaleRowBlock != 0) {
    return unsupported(t + "N above 128 must be a multiple of 128 (the scale-factor layout's row block)");
  }
  return Status::ok();
}

}  // namespace

// ---- versions -------------------------------------------------------------------------------------------

const char* cutlass_version_name(CutlassVersion v) {
  switch (v) {
    case CutlassVersion::k4_2_1: return "4.2.1";
    case CutlassVersion::k4_5_0: return "4.5.0";
  }
  return "unknown";
}

const char* cutlass_flashinfer_release(CutlassVersion v) {
  switch (v) {
    case CutlassVersion::k4_2_1: return "0.6.3";
    case CutlassVersion::k4_5_0: return "0.7.4";
  }
  return "unknown";
}

std::vector<CutlassVersion> cutlass_versions() { return {CutlassVersion::k4_2_1, CutlassVersion::k4_5_0}; }

Status parse_cutlass_version(const std::string& text, CutlassVersion* out) {
  if (out == nullptr) return invalid_argument("parse_cutlass_version: out is null");
  if (text.empty() || text == "latest") {
    *out = kLatestCutlassVersion;
    return Status::ok();
  }
  for (CutlassVersion v : cutlass_versions()) {
    const std::string full = cutlass_version_name(v);
    const std::string short_name = full.substr(0, full.rfind('.'));
    if (text == full || text == short_name || text == std::string("flashinfer-") + cutlass_flashinfer_release(v)) {
      *out = v;
      return Status::ok();
    }
  }
  std::string known;
  for (CutlassVersion v : cutlass_versions()) {
    known += std::string(known.empty() ? "" : ", ") + cutlass_version_name(v) + " (flashinfer-" +
             cutlass_flashinfer_release(v) + ")";
  }
  return Status(StatusCode::kNotFound, "unknown CUTLASS version '" + text + "'; modelled: " + known + ", latest");
}

Status cutlass_smem_capacity(int arch, int64_t* out) {
  if (out == nullptr) return invalid_argument("cutlass_smem_capacity: out is null");
  switch (arch) {
    case 90: *out = kSm90Capacity; return Status::ok();
    case 100: case 103: *out = kSm100Capacity; return Status::ok();
    case 120: case 121: *out = kSm120Capacity; return Status::ok();
    default: break;
  }
  return invalid_argument("unknown architecture sm_" + std::to_string(arch) +
                          " (CUTLASS capacities are modelled for 90, 100, 103, 120, 121)");
}

// ---- sm_90 builder ------------------------------------------------------------------------------------------
// sm90_gmma_builder.inl, GMMA_TMA_WS_SS builder + compute_stage_count_or_override(StageCountAutoCarveout).
// Identical in 4.2.1 and 4.5.0 (only the template parameter order changed).

Status cutlass_sm90_stage_count(CutlassVersion v, const CutlassSm90GemmShape& s, CutlassSm90StageCount* out) {
  if (out == nullptr) return invalid_argument("cutlass_sm90_stage_count: out is null");
  FP4MOE_RETURN_IF_ERROR(check_version(v));
  FP4MOE_RETURN_IF_ERROR(check_positive_tile(s.tile_m, s.tile_n, s.tile_k));
  const std::string t = "sm_90 tile " + tile_name(s.tile_m, s.tile_n, s.tile_k) + ": ";
  for (int bits : {s.a_bits, s.b_bits}) {
    if (bits != 8 && bits != 16 && bits != 32) {
      return invalid_argument(t + "element width " + std::to_string(bits) + " bits; expected 8, 16 or 32");
    }
  }
  if (s.a_bits != s.b_bits) {
    return unsupported(t + "A and B of different widths use the mixed-input (RS) builder, not modelled");
  }
  // A warpgroup MMA is 64 rows; N steps of 8 up to 256; K is 32 bytes per instruction.
  if (s.tile_m % 64 != 0 || s.tile_n % 8 != 0 || (int64_t{s.tile_k} * s.a_bits) % 256 != 0) {
    return invalid_argument(t + "not a multiple of the GMMA shape (M by 64, N by 8, K by 32 bytes)");
  }
  FP4MOE_RETURN_IF_ERROR(check_carveout(t, s.carveout_bytes, kSm90Capacity));

  CutlassSm90StageCount r;
  r.capacity = kSm90Capacity;
  // Grouped kernels keep the A and B descriptors in smem (they are rewritten per group) ...
  r.tensormap_bytes = s.grouped ? 2 * kTmaDescriptorBytes : 0;
  // ... and feed the persistent group scheduler through an 8-stage pipeline.
  r.scheduler_pipeline_bytes = s.grouped ? pipeline_bytes(8) : 0;
  r.reduced_capacity = r.capacity - r.tensormap_bytes - r.scheduler_pipeline_bytes;
  // The stage-count function works in 128-byte units: capacity rounded down, carve-out up.
  r.usable_capacity = r.reduced_capacity / 128 * 128;
  r.carveout_rounded = round_up(s.carveout_bytes, 128);
  r.a_bytes = int64_t{s.tile_m} * s.tile_k * s.a_bits / 8;
  r.b_bytes = int64_t{s.tile_n} * s.tile_k * s.b_bits / 8;
  r.tiles_rounded = round_up(r.a_bytes + r.b_bytes, 128);
  // One stage of the TMA pipeline: its full and empty barrier.
  r.pipeline_bytes = pipeline_bytes(1);
  r.stage_bytes = r.tiles_rounded + r.pipeline_bytes;
  // C++ integer division (truncation toward zero), as in the header.
  r.stages = static_cast<int>((r.usable_capacity - r.carveout_rounded) / r.stage_bytes);
  if (r.stages < 0)
    return unsupported(t + "the carve-out (" + commas(r.carveout_rounded) + " B rounded) leaves less than nothing of the " +
                       commas(r.usable_capacity) + " B: CUTLASS's stage count would be negative");
  *out = r;
  return Status::ok();
}

std::string CutlassSm90StageCount::describe() const {
  std::string s = "sm_90 builder: " + std::to_string(stages) + " stages = (" + commas(usable_capacity) +
                  " capacity";
  if (tensormap_bytes + scheduler_pipeline_bytes > 0) {
    s += " (" + commas(capacity) + " - " + commas(tensormap_bytes) + " tensor maps - " +
         commas(scheduler_pipeline_bytes) + " scheduler pipeline, rounded down to 128)";
  }
  s += " - " + commas(carveout_rounded) + " carve-out) / " + commas(stage_bytes) + " per stage (A " +
       commas(a_bytes) + " + B " + commas(b_bytes) + " rounded to 128, + " + commas(pipeline_bytes) + " barriers)";
  return s;
}

// ---- block-scaled builders ------------------------------------------------------------------------------------
// sm120_blockscaled_mma_builder.inl, sm100_blockscaled_umma_builder.inl, sm100_pipeline_carveout.inl and
// sm100_compute_stage_count_or_override_blockscaled.

Status cutlass_blockscaled_stage_count(CutlassVersion v, const CutlassBlockScaledShape& s,
                                       CutlassBlockScaledStageCount* out) {
  if (out == nullptr) return invalid_argument("cutlass_blockscaled_stage_count: out is null");
  FP4MOE_RETURN_IF_ERROR(check_version(v));
  const bool v45 = v == CutlassVersion::k4_5_0;
  const bool sm120 = is_sm120_family(s.arch);
  if (!sm120 && s.arch != 100) {
    if (s.arch == 90) return unsupported("sm_90 has no block-scaled FP4 MMA");
    if (s.arch == 103) return unsupported("sm_103 has its own block-scaled builder, not modelled");
    return invalid_argument("unknown architecture sm_" + std::to_string(s.arch) +
                            " for the block-scaled builder (expected 100, 120 or 121)");
  }
  FP4MOE_RETURN_IF_ERROR(check_carveout("sm_" + std::to_string(s.arch) + " block-scaled builder: ", s.carveout_bytes,
                                       sm120 ? kSm120Capacity : kSm100Capacity));

  CutlassBlockScaledStageCount r;
  r.carveout_bytes = s.carveout_bytes;
  const int64_t m = s.tile_m, n = s.tile_n, k = s.tile_k;

  if (sm120) {
    if (s.two_sm) return invalid_argument("two_sm is an sm_100 option; sm_120 has no 2-SM MMA");
    FP4MOE_RETURN_IF_ERROR(check_sm120_tile(s.tile_m, s.tile_n, s.tile_k));
    r.capacity = kSm120Capacity;
    if (v45) {
      if (s.grouped) {
        // Grouped: the group scheduler's 8-stage pipeline, the two descriptors the builder assumes
        // (the kernel really keeps seven: the builder undercounts), and the 3-stage pipeline that
        // tells the loads a rewritten descriptor is ready.
        r.scheduler_pipeline_bytes = pipeline_bytes(8);
        r.tensormap_bytes = 2 * kTmaDescriptorBytes;
        r.tensormap_ready_pipeline_bytes = pipeline_bytes(3);
      } else {
        // Dense: the 3-stage CLC fetch pipeline and its three responses.
        r.scheduler_pipeline_bytes = pipeline_bytes(3);
        r.clc_response_bytes = 3 * kSchedulerResponseBytes;
      }
    }
    // 4.2.1 subtracts nothing: the whole 101,376 B is offered to the stages.
    r.a_bytes = fp4_bytes(m, k);
    r.b_bytes = fp4_bytes(n, k);
    r.sfa_bytes = scale_bytes(m / kScaleRowBlock * kScaleRowBlock, k);
    if (v45) {
      // 4.5.0 pads SFB to at least one 128-row block (what TMA really loads for N < 128).
      r.sfb_bytes = scale_bytes(n < kScaleRowBlock ? kScaleRowBlock : n, k);
    } else {
      // 4.2.1 counts whole 128-row blocks only: nothing for N < 128.
      r.sfb_bytes = scale_bytes(n / kScaleRowBlock * kScaleRowBlock, k);
      r.sfb_undercounted = n % kScaleRowBlock != 0;
    }
  } else {
    // sm_100: 1-SM block-scaled UMMA is M = 128; 2-SM is M = 256 (128 rows per SM).
    FP4MOE_RETURN_IF_ERROR(check_positive_tile(s.tile_m, s.tile_n, s.tile_k));
    const std::string t = "sm_100 block-scaled tile " + tile_name(s.tile_m, s.tile_n, s.tile_k) + ": ";
    if (k % kScaleVector != 0) {
      return invalid_argument(t + "K must be a multiple of 16 (one NVFP4 scale per 16 elements)");
    }
    if (k % 64 != 0) return invalid_argument(t + "K must be a multiple of the UMMA K (64 FP4 elements)");
    if (m != (s.two_sm ? 256 : 128)) {
      return unsupported(t + (s.two_sm ? "2-SM block-scaled UMMA needs M = 256" : "1-SM block-scaled UMMA needs M = 128"));
    }
    if (n % 64 != 0 || n > 256) return unsupported(t + "N must be 64, 128, 192 or 256 (the modelled UMMA N)");
    const int64_t sms = s.two_sm ? 2 : 1;
    r.capacity = kSm100Capacity;
    // Grouped kernels use an 8-stage scheduler, dense ones 2.
    const int64_t sched_stages = s.grouped ? 8 : 2;
    // 4.5.0 ptr-array kernels run two CLC streams (one for the descriptor updater, one for the rest).
    const int64_t clc_streams = (v45 && s.grouped) ? 2 : 1;
    // One accumulator buffer in TMEM when N = 256 fills it, two otherwise.
    r.accumulator_pipeline_bytes = pipeline_bytes(n == 256 ? 1 : 2);
    r.scheduler_pipeline_bytes = pipeline_bytes(sched_stages) * clc_streams;
    r.load_order_barrier_bytes = kLoadOrderBarrierBytes;
    r.clc_response_bytes = sched_stages * kSchedulerResponseBytes * clc_streams;
    r.clc_throttle_pipeline_bytes = pipeline_bytes(sched_stages);
    r.tmem_dealloc_bytes = kBarrierBytes;
    r.tmem_base_ptr_bytes = sched_stages * 4;
    // Descriptors for A, SFA, B, SFB: 4.2.1 counts one set, 4.5.0 five sets.
    r.tensormap_bytes = s.grouped ? kTmaDescriptorBytes * 4 * (v45 ? 5 : 1) : 0;
    r.tensormap_ready_pipeline_bytes = (v45 && s.grouped) ? pipeline_bytes(sched_stages) : 0;
    // Per SM: a 2-SM MMA splits A's rows and B's columns between the pair.
    r.a_bytes = fp4_bytes(m / sms, k);
    r.b_bytes = fp4_bytes(n / sms, k);
    // Scales per SM: SFA for this SM's 128 rows; SFB for all N, padded to whole 128-row blocks
    // (N = 192 moves scales as if N were 256).
    r.sfa_bytes = scale_bytes(m / sms / kScaleRowBlock * kScaleRowBlock, k);
    r.sfb_bytes = scale_bytes(round_up(n, kScaleRowBlock), k);
  }
  r.kernel_carveout = r.scheduler_pipeline_bytes + r.clc_response_bytes + r.tensormap_bytes +
                      r.tensormap_ready_pipeline_bytes + r.accumulator_pipeline_bytes + r.load_order_barrier_bytes +
                      r.clc_throttle_pipeline_bytes + r.tmem_dealloc_bytes + r.tmem_base_ptr_bytes;
  r.reduced_capacity = r.capacity - r.kernel_carveout;
  // One stage's full + empty barrier: 16 B, which 4.5.0 rounds up to 128.
  r.pipeline_bytes = v45 ? round_up(pipeline_bytes(1), 128) : pipeline_bytes(1);
  r.stage_bytes = r.a_bytes + r.b_bytes + r.sfa_bytes + r.sfb_bytes + r.pipeline_bytes;
  r.stages = static_cast<int>((r.reduced_capacity - r.carveout_bytes) / r.stage_bytes);
  if (r.stages < 0)
    return unsupported("the carve-out (" + commas(r.carveout_bytes) + " B) exceeds the builder's " +
                       commas(r.reduced_capacity) + " B: CUTLASS's stage count would be negative");
  *out = r;
  return Status::ok();
}

std::string CutlassBlockScaledStageCount::describe() const {
  std::string s = "builder: " + std::to_string(stages) + " stages = (" + commas(reduced_capacity) + " capacity";
  if (kernel_carveout > 0) s += " (" + commas(capacity) + " - " + commas(kernel_carveout) + " kernel barriers and tensor maps)";
  s += " - " + commas(carveout_bytes) + " carve-out) / " + commas(stage_bytes) + " per stage (A " + commas(a_bytes) +
       " + B " + commas(b_bytes) + " + SFA " + commas(sfa_bytes) + " + SFB " + commas(sfb_bytes) + " + barriers " +
       commas(pipeline_bytes) + ")";
  if (sfb_undercounted) s += "; SFB undercounted (CUTLASS 4.2.1 counts whole 128-row blocks only)";
  return s;
}

// ---- sm_120 MoE grouped GEMM -------------------------------------------------------------------------------

const char* moe_epilogue_fusion_name(MoeEpilogueFusion f) {
  switch (f) {
    case MoeEpilogueFusion::kNone: return "NONE";
    case MoeEpilogueFusion::kFinalize: return "FINALIZE";
  }
  return "unknown";
}

const char* moe_output_type_name(MoeOutputType t) {
  switch (t) {
    case MoeOutputType::kBf16: return "bf16";
    case MoeOutputType::kFp16: return "fp16";
  }
  return "unknown";
}

std::string CutlassSm120MoeTactic::name() const {
  return tile_name(tile_m, tile_n, tile_k) + " " + moe_epilogue_fusion_name(epilogue) + " swap_ab=" +
         (swap_ab ? "1" : "0") + " " + moe_output_type_name(output);
}

namespace {

Status check_moe_tactic(CutlassVersion v, const CutlassSm120MoeTactic& t) {
  FP4MOE_RETURN_IF_ERROR(check_version(v));
  if (t.epilogue != MoeEpilogueFusion::kNone && t.epilogue != MoeEpilogueFusion::kFinalize) {
    return invalid_argument("unknown MoeEpilogueFusion value " + std::to_string(static_cast<int>(t.epilogue)));
  }
  if (t.output != MoeOutputType::kBf16 && t.output != MoeOutputType::kFp16) {
    return invalid_argument("unknown MoeOutputType value " + std::to_string(static_cast<int>(t.output)));
  }
  return check_sm120_tile(t.tile_m, t.tile_n, t.tile_k);
}

// The epilogue works on 64 x 32 subtiles of the CTA tile (sm_120's automatic epilogue tile).
constexpr int64_t kEpiTileM = 64, kEpiTileN = 32;
// bf16 and fp16 outputs (and the C source the launcher gives it, of the same type) are 2 bytes.
constexpr int64_t kOutputBytes = 2;
// The cooperative kernel has two consumer warp groups, each with its own D descriptor.
constexpr int64_t kEpilogueWarpGroups = 2;
// The grouped kernel's scheduler runs 8 stages ahead (pipeline and response ring).
constexpr int64_t kSchedulerStages = 8;
// Descriptors the mainloop keeps in smem: A, B, SFA, SFB.
constexpr int64_t kMainloopTensorMaps = 4;

}  // namespace

Status cutlass_sm120_moe_epilogue(CutlassVersion v, const CutlassSm120MoeTactic& t, CutlassSm120MoeEpilogue* out) {
  if (out == nullptr) return invalid_argument("cutlass_sm120_moe_epilogue: out is null");
  FP4MOE_RETURN_IF_ERROR(check_moe_tactic(v, t));
  const bool finalize = t.epilogue == MoeEpilogueFusion::kFinalize;
  CutlassSm120MoeEpilogue e;
  // Up to two output subtiles in flight.
  const int64_t epi_tiles = (t.tile_m / kEpiTileM) * (t.tile_n / kEpiTileN);
  e.stages_d = static_cast<int>(epi_tiles < 2 ? epi_tiles : 2);
  // NONE: C and D are both 16-bit, so D is staged in C's buffers, which then need one stage more than
  // D. FINALIZE passes no D type (it scatters with reductions), so no reuse and C gets D's stage count.
  e.reuse_smem_c = !finalize;
  e.stages_c = e.reuse_smem_c ? (e.stages_d + 1 > 2 ? e.stages_d + 1 : 2) : e.stages_d;
  // The staging buffers' swizzle decides their alignment: a row-major 64 x 32 subtile has 64-byte rows
  // (64 B swizzle, 512 B aligned); the column-major one of swap_ab has 128-byte columns (128 B, 1024).
  e.alignment = t.swap_ab ? 1024 : 512;
  const int64_t subtile = kEpiTileM * kEpiTileN * kOutputBytes;
  // NONE: one union of C and D buffers, StagesC deep. FINALIZE: C buffers plus separate D-sized buffers
  // (the fusion's reduction scratch) of StagesD each.
  e.collective = finalize ? subtile * e.stages_c + subtile * e.stages_d : subtile * e.stages_c;
  if (finalize) {
    // A row broadcast of the tile's N columns: the bias (output type) without swap_ab, the fp32 router
    // scales with swap_ab (then the tokens are the columns).
    e.fusion = round_up(int64_t{t.tile_n} * (t.swap_ab ? 4 : kOutputBytes), 16);
  } else {
    e.fusion = 1;  // the default fusion's storage is an empty struct: sizeof 1
  }
  e.tensors = round_up(e.collective + e.fusion, e.alignment);
  // Descriptors for C and one D per consumer warp group.
  e.tensormaps = (1 + kEpilogueWarpGroups) * kTmaDescriptorBytes;
  e.pipeline = pipeline_bytes(e.stages_c);
  e.total = round_up(e.tensors + e.tensormaps + e.pipeline, e.alignment);
  *out = e;
  return Status::ok();
}

Status cutlass_sm120_moe_smem(CutlassVersion v, const CutlassSm120MoeTactic& t, int stages, CutlassSm120MoeSmem* out) {
  if (out == nullptr) return invalid_argument("cutlass_sm120_moe_smem: out is null");
  FP4MOE_RETURN_IF_ERROR(check_moe_tactic(v, t));
  if (stages < 2) {
    return invalid_argument("sm_120 MoE " + t.name() + ": " + std::to_string(stages) +
                            " stages; the mainloop needs at least 2");
  }
  CutlassSm120MoeEpilogue e;
  FP4MOE_RETURN_IF_ERROR(cutlass_sm120_moe_epilogue(v, t, &e));
  const bool v45 = v == CutlassVersion::k4_5_0;
  const int64_t m = t.tile_m, n = t.tile_n, k = t.tile_k, st = stages;
  CutlassSm120MoeSmem r;
  r.stages = stages;
  // Mainloop tensors. A and B are 1024-aligned (the 128-byte swizzle repeats every 1024 bytes).
  r.a_offset = 0;
  r.a_bytes = st * fp4_bytes(m, k);
  r.b_offset = round_up(r.a_offset + r.a_bytes, 1024);
  r.b_bytes = st * fp4_bytes(n, k);
  // Scale arrays are 16-aligned.
  r.sfa_offset = round_up(r.b_offset + r.b_bytes, 16);
  r.sfa_bytes = st * scale_bytes(m, k);
  r.sfb_offset = round_up(r.sfa_offset + r.sfa_bytes, 16);
  if (v45) {
    // SFB always holds at least one 128-row block per stage (smaller N views part of it).
    r.sfb_bytes = st * scale_bytes(n < kScaleRowBlock ? kScaleRowBlock : n, k);
  } else if (n < kScaleRowBlock) {
    // 4.2.1, N < 128: the SFB layout has zero 128-row blocks; its array is a single 16-byte unit
    // whatever the stage count (one stage's scales are N * K / 16 bytes).
    r.sfb_bytes = 16;
  } else {
    r.sfb_bytes = st * scale_bytes(n, k);
  }
  // The mainloop's tensor struct is 1024-aligned, so its size rounds up to 1024.
  r.mainloop_bytes = round_up(r.sfb_offset + r.sfb_bytes, 1024);
  r.mainloop_padding = r.mainloop_bytes - (r.a_bytes + r.b_bytes + r.sfa_bytes + r.sfb_bytes);
  // Epilogue tensors follow (their alignment, at most 1024, is met by mainloop_bytes).
  r.epilogue_offset = r.mainloop_bytes;
  r.epilogue_bytes = e.tensors;
  r.epilogue_collective = e.collective;
  r.epilogue_fusion = e.fusion;
  r.epilogue_padding = e.tensors - e.collective - e.fusion;
  r.tensors_bytes = round_up(r.epilogue_offset + r.epilogue_bytes, 1024);
  r.tensors_padding = r.tensors_bytes - (r.epilogue_offset + r.epilogue_bytes);
  // Pipelines (16-aligned): group scheduler, mainloop (one stage each), epilogue C loads, load order.
  r.pipelines_offset = r.tensors_bytes;
  r.pipeline_scheduler = pipeline_bytes(kSchedulerStages);
  r.pipeline_mainloop = pipeline_bytes(st);
  r.pipeline_epi_load = pipeline_bytes(e.stages_c);
  r.pipeline_load_order = kLoadOrderBarrierBytes;
  r.pipelines_bytes = r.pipeline_scheduler + r.pipeline_mainloop + r.pipeline_epi_load + r.pipeline_load_order;
  // The scheduler's response ring, one entry per scheduler stage.
  r.scheduler_response_offset = r.pipelines_offset + r.pipelines_bytes;
  r.scheduler_response_bytes = kSchedulerStages * kSchedulerResponseBytes;
  // Tensor maps: 128-aligned; four for the mainloop, then C and two D for the epilogue.
  const int64_t after_response = r.scheduler_response_offset + r.scheduler_response_bytes;
  r.tensormaps_offset = round_up(after_response, 128);
  r.tensormaps_padding = r.tensormaps_offset - after_response;
  r.tensormaps_mainloop_offset = r.tensormaps_offset;
  r.tensormaps_mainloop = kMainloopTensorMaps * kTmaDescriptorBytes;
  r.tensormaps_epilogue_offset = r.tensormaps_mainloop_offset + r.tensormaps_mainloop;
  r.tensormaps_epilogue = e.tensormaps;
  r.tensormaps_bytes = r.tensormaps_mainloop + r.tensormaps_epilogue;
  // The whole struct is 1024-aligned (it contains the 1024-aligned A and B), so sizeof rounds up.
  const int64_t end = r.tensormaps_offset + r.tensormaps_bytes;
  r.total = round_up(end, 1024);
  r.final_padding = r.total - end;
  *out = r;
  return Status::ok();
}

int64_t CutlassSm120MoeSmem::tensors_alignment_padding() const {
  return mainloop_padding + epilogue_padding + tensors_padding;
}

int64_t CutlassSm120MoeSmem::alignment_padding() const {
  return tensors_alignment_padding() + tensormaps_padding + final_padding;
}

std::string CutlassSm120MoeSmem::describe() const {
  std::string s = std::to_string(stages) + " stages: " + commas(total) + " B = " + commas(tensors_bytes) +
                  " tiles (A " + commas(a_bytes) + " + B " + commas(b_bytes) + " + SFA " + commas(sfa_bytes) +
                  " + SFB " + commas(sfb_bytes) + " + epilogue " + commas(epilogue_collective) + " C/D staging + " +
                  commas(epilogue_fusion) + " fusion";
  const int64_t pad = tensors_alignment_padding();
  if (pad > 0) s += ", incl. " + commas(pad) + " B alignment padding";
  s += ") + " + commas(pipelines_bytes) + " pipeline barriers + " + commas(scheduler_response_bytes) +
       " scheduler responses + " + commas(tensormaps_bytes) + " tensor maps (" +
       std::to_string(tensormaps_bytes / kTmaDescriptorBytes) + " x 128)";
  const int64_t tail = tensormaps_padding + final_padding;
  if (tail > 0) s += " + " + commas(tail) + " B alignment padding";
  return s;
}

std::string CutlassSm120MoePlan::verdict() const {
  if (!builder_compiles) {
    return "does not compile: the builder computes " + std::to_string(builder.stages) + " stages (< 2)";
  }
  if (fits) return "fits (slack " + commas(slack) + " B)";
  return "over by " + commas(over_by) + " B";
}

std::string CutlassSm120MoePlan::describe() const {
  std::string s = "sm_120 MoE " + tactic.name() + " (CUTLASS " + cutlass_version_name(version) + ", flashinfer " +
                  cutlass_flashinfer_release(version) + "): ";
  if (!builder_compiles) {
    s += verdict() + "; " + builder.describe();
  } else {
    s += "builder picks " + std::to_string(builder.stages) + " stages (" + commas(builder.stage_bytes) +
         " B per stage, capacity " + commas(builder.reduced_capacity) + " - carve-out " + commas(epilogue.total) +
         "); needs " + commas(smem.total) + " B: " + commas(smem.tensors_bytes) + " tiles";
    const int64_t pad = smem.tensors_alignment_padding();
    if (pad > 0) s += " (incl. " + commas(pad) + " B alignment padding)";
    s += " + " + commas(smem.pipelines_bytes) + " pipeline barriers + " + commas(smem.scheduler_response_bytes) +
         " scheduler responses + " + commas(smem.tensormaps_bytes) + " tensor maps";
    const int64_t tail = smem.tensormaps_padding + smem.final_padding;
    if (tail > 0) s += " + " + commas(tail) + " B alignment padding";
    s += "; limit " + commas(limit) + ": " + verdict();
  }
  if (largest_fitting_stages >= 2) {
    const std::string at = std::to_string(largest_fitting_stages) + " stages (" + commas(largest_fitting_bytes) + " B)";
    if (!builder_compiles || !fits) {
      s += "; use " + at;
    } else if (largest_fitting_stages > builder.stages) {
      s += "; up to " + at + " fit";  // the builder's undercount can also leave a stage unused
    }
  } else {
    s += "; no stage count >= 2 fits";
  }
  if (builder.sfb_undercounted) {
    s += "; note: CUTLASS 4.2.1 sizes SFB for N < 128 as zero 128-row blocks (the builder counts 0 B per "
         "stage, the kernel keeps one 16 B array)";
  }
  return s;
}

Status cutlass_sm120_moe_plan(CutlassVersion v, const CutlassSm120MoeTactic& t, CutlassSm120MoePlan* out) {
  if (out == nullptr) return invalid_argument("cutlass_sm120_moe_plan: out is null");
  FP4MOE_RETURN_IF_ERROR(check_moe_tactic(v, t));
  CutlassSm120MoePlan p;
  p.version = v;
  p.tactic = t;
  p.limit = kSm120Capacity;
  FP4MOE_RETURN_IF_ERROR(cutlass_sm120_moe_epilogue(v, t, &p.epilogue));
  // The launcher passes sizeof(CollectiveEpilogue::SharedStorage) as the carve-out.
  CutlassBlockScaledShape b;
  b.arch = 120;
  b.tile_m = t.tile_m;
  b.tile_n = t.tile_n;
  b.tile_k = t.tile_k;
  b.grouped = true;
  b.carveout_bytes = p.epilogue.total;
  FP4MOE_RETURN_IF_ERROR(cutlass_blockscaled_stage_count(v, b, &p.builder));
  p.builder_compiles = p.builder.stages >= 2;
  if (p.builder_compiles) {
    FP4MOE_RETURN_IF_ERROR(cutlass_sm120_moe_smem(v, t, p.builder.stages, &p.smem));
    p.fits = p.smem.total <= p.limit;
    p.over_by = p.fits ? 0 : p.smem.total - p.limit;
    p.slack = p.fits ? p.limit - p.smem.total : 0;
  }
  // SharedStorage grows with every stage, so walk up from 2 while the next one still fits.
  CutlassSm120MoeSmem at;
  FP4MOE_RETURN_IF_ERROR(cutlass_sm120_moe_smem(v, t, 2, &at));
  if (at.total <= p.limit) {
    int s = 2;
    int64_t bytes = at.total;
    constexpr int kMaxStages = 64;  // far beyond what 101,376 B can hold for any valid tile
    while (s < kMaxStages) {
      CutlassSm120MoeSmem next;
      FP4MOE_RETURN_IF_ERROR(cutlass_sm120_moe_smem(v, t, s + 1, &next));
      if (next.total > p.limit) break;
      ++s;
      bytes = next.total;
    }
    p.largest_fitting_stages = s;
    p.largest_fitting_bytes = bytes;
  }
  *out = p;
  return Status::ok();
}

std::vector<CutlassSm120MoeTactic> cutlass_sm120_moe_tactics(CutlassVersion v, MoeOutputType output) {
  // get_candidate_configs_sm120 for grouped FP4 GEMMs; TensorRT-LLM's K is in bytes, twice that in FP4.
  struct Tile {
    int m, n, k;
  };
  // flashinfer 0.6.3: CtaShape128x128x128B, 128x128x64B, 128x256x64B, 256x128x64B.
  static constexpr Tile kTiles421[] = {{128, 128, 256}, {128, 128, 128}, {128, 256, 128}, {256, 128, 128}};
  // flashinfer 0.7.4: its ten SM120 tiles minus the two without a grouped dispatch case
  // (128x128x256B, 256x128x128B), in its order.
  static constexpr Tile kTiles450[] = {{128, 128, 256}, {128, 128, 128}, {256, 128, 128}, {128, 256, 128},
                                       {128, 32, 256},  {128, 32, 128},  {128, 64, 256},  {128, 64, 128}};
  const Tile* tiles = nullptr;
  size_t count = 0;
  switch (v) {
    case CutlassVersion::k4_2_1: tiles = kTiles421; count = sizeof(kTiles421) / sizeof(Tile); break;
    case CutlassVersion::k4_5_0: tiles = kTiles450; count = sizeof(kTiles450) / sizeof(Tile); break;
  }
  // The MoE runner duplicates the list with FINALIZE, then duplicates everything with swap_ab.
  std::vector<CutlassSm120MoeTactic> out;
  for (bool swap : {false, true}) {
    for (MoeEpilogueFusion f : {MoeEpilogueFusion::kNone, MoeEpilogueFusion::kFinalize}) {
      for (size_t i = 0; i < count; ++i) {
        const Tile& t = tiles[i];
        CutlassSm120MoeTactic c;
        c.tile_m = t.m;
        c.tile_n = t.n;
        c.tile_k = t.k;
        c.epilogue = f;
        c.swap_ab = swap;
        c.output = output;
        out.push_back(c);
      }
    }
  }
  return out;
}

Status cutlass_sm120_moe_plans(CutlassVersion v, MoeOutputType output, std::vector<CutlassSm120MoePlan>* out) {
  if (out == nullptr) return invalid_argument("cutlass_sm120_moe_plans: out is null");
  FP4MOE_RETURN_IF_ERROR(check_version(v));
  std::vector<CutlassSm120MoePlan> plans;
  for (const CutlassSm120MoeTactic& t : cutlass_sm120_moe_tactics(v, output)) {
    CutlassSm120MoePlan p;
    FP4MOE_RETURN_IF_ERROR(cutlass_sm120_moe_plan(v, t, &p));
    plans.push_back(p);
  }
  *out = std::move(plans);
  return Status::ok();
}

}  // namespace fp4moe
