// The MoE layer's per-call decision, host-only: which resident kernel config, block size, down-GEMM K splits and
// routing path a forward pass of T tokens runs (the heuristic and the tuning cache's choices), and the checks of
// shapes and token counts. The layer (src/moe/layer.cu) supplies the configs it found resident at init.
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "fp4moe/moe.h"
#include "fp4moe/tuning.h"
#include "kernels/moe_decode_direct_layout.h"
#include "kernels/moe_gemm_catalogue.h"
#include "src/moe/workspace.h"

namespace fp4moe::detail {

// A catalogue config that this GPU can keep resident, as the layer found it at init.
struct ResidentConfig {
  catalogue::ShippedConfig config;
  int grid = 0;  // persistent blocks: resident blocks per SM (occupancy) x SMs
  // The config's cluster decode kernel (catalogue cluster_decode): clusters of this layer's size (cluster_decode_blocks)
  // resident at once (cudaOccupancyMaxActiveClusters: clusters stay inside a GPC, so fewer than grid / size); 0: none.
  int clusters = 0;
};

// The heuristic's tile thresholds: the busiest expert's expected tokens (mean + 3 sd of a Poisson count) up to
// which the 8-, 16- and 32-token tiles are chosen; above `to64`, the 64-token one. They depend on whether the
// 16-token tile is warp-specialized (sm_90) or multistage (sm_120, or sm_90 with warp_specialized off). From
// single-config sweeps on the H200 (docs/perf/moe-decode.md, "How the layer picks a tile").
struct BlockMThresholds {
  double to8, to16, to32;
};
// sm_90's were fitted when the 32- and 64-token tiles multiplied whole tiles, and not refitted since their items
// round the rows up to 16 (thirty-third session; on an H100 the 64-token tile then matched the 32-token one at T=512).
inline constexpr BlockMThresholds kThresholdsWarpSpecialized16{12.0, 24.0, 40.0};
inline constexpr BlockMThresholds kThresholdsMultistage16{15.0, 20.0, 40.0};
// Above 64 tokens, sm_90's 128-token tile against the 64-token one, by the chunks each expert's tokens make: one
// chunk of the 64-token tile costs 1; one full chunk of the 128-token tile kPrefillChunkCost (it converts the
// weights once for twice the tokens, but its MMAs and copies per token are those of two), a chunk whose rows round up
// to at most 64 tokens (moe_gemm_ws_item_tokens: its wgmma multiplies 16, 32, 48 or 64; one cost for them)
// kPrefillHalfChunkCost, and one of 80, 96 or 112 tokens in proportion between the two. The heuristic takes the
// 128-token tile where the expected cost over Poisson-like expert loads is below kPrefillMargin of the 64-token
// tile's. The two costs were fitted to the H200's GLM-5 layer at T = 2048..16384 with the widths 16, 32, 64 and 128;
// the ones between are interpolated, and the choice they give at T = 1024..3072 was measured on an H100
// (docs/perf/prefill.md has both). The 64-token tile's partial chunks also round their rows up to 16 since the
// thirty-third session; a chunk of it still costs 1 here (not refitted: in that session's one sweep at T=2048, on an
// H100, the 64-token tile was no faster than before and the 128-token one still the faster).
inline constexpr double kPrefillChunkCost = 1.68, kPrefillHalfChunkCost = 1.25, kPrefillMargin = 0.97;
constexpr double prefill_chunk128_cost(int rows) {
  const int n = moe_gemm_ws_item_tokens(rows, 128);
  return n <= 64 ? kPrefillHalfChunkCost
                 : kPrefillHalfChunkCost + (kPrefillChunkCost - kPrefillHalfChunkCost) * (n - 64) / 64.0;
}
static_assert(prefill_chunk128_cost(128) == kPrefillChunkCost, "a full chunk costs kPrefillChunkCost exactly");
// The expected per-expert chunk costs of the 64- and 128-token tiles at `mean` tokens per expert (a normal with
// variance `mean`, as Poisson loads), in the units above.
struct PrefillChunkCosts {
  double tile64, tile128;
};
PrefillChunkCosts prefill_chunk_costs(double mean);
// gate_up calls of at most this many pairs take the deep (2-block) config of sm_90's 8-token tile whatever the
// expected round fill (its items stream the whole K = H: the unsharded GLM-5 gate_up at T=8 was 4.5% slower on the
// 3-block config, whose rounds are expected 7% less full).
inline constexpr int64_t kGateUpDeepPipelineMaxPairs = 64;
// Calls of at most this many pairs take the deep config for both GEMMs (measured when only that config routed the
// pairs itself; above, down at TP8 T=8 was faster on the 3-block one: docs/perf/shards.md).
inline constexpr int64_t kDeepPipelineMaxPairs = 32;
// A block_m that also has warp-specialized configs (sm_90's 16-token tile) takes its multistage configs, which route
// the pairs themselves, only up to this many pairs (the range where that was measured faster; bm8, which has no
// warp-specialized tile, routes up to kMaxFusedRoutingPairs).
inline constexpr int64_t kFusedOverWarpSpecializedMaxPairs = 32;
// Above this many tokens the heuristic never splits the down GEMM's or gate_up's K, nor runs gate_up's tail kernel
// (the items are many; each split adds partial sums).
inline constexpr int64_t kMaxSplitTokens = 64;
// K pieces per tile of gate_up's last, partial round (MoeLayerOptions::gate_up_tail): 4 was faster than 2 and 8 on
// GLM-5's TP8 and EP8 shards at T = 16..64 (docs/perf/shards.md, "gate_up's last round as K pieces").
inline constexpr int kGateUpTailPieces = 4;
// ... where gate_up's expected work items fill at least one and fewer than this many rounds of its persistent blocks
// (with more the last round is a small part of the phase: the unsharded layer's T=8 and T=64 were level with it).
inline constexpr double kGateUpTailMaxRounds = 3.0;
// The heuristic splits the down GEMM's K in two when that fills the persistent blocks' rounds at least this much
// better (GLM-5 at T=1 on 132 SMs: 384 items in 2 rounds of 264 = 73% full, split 768 in 3 rounds = 97%).
inline constexpr double kSplitFillGain = 0.1;

struct PlanContext {
  const MoeShape* shape = nullptr;
  const MoeLayerOptions* options = nullptr;
  int arch = 0;  // kernel family of the device (90, 120)
  const std::vector<ResidentConfig>* configs = nullptr;
  const std::map<int64_t, TunedChoice>* tuned = nullptr;  // tokens bucket -> choice
  int sms = 0;  // the device's SMs (0: not known: no direct-path residency rules)
  DirectKernelRegs direct_regs;  // the direct kernels' registers (the layer reads them from its kernels)
};

// A GEMM's N and K: gate_up (2I, H) and down (H, I).
struct GemmDims {
  int64_t n = 0, k = 0;
};
GemmDims gate_up_dims(const MoeShape& s);
GemmDims down_dims(const MoeShape& s);

// The resident config of `family` and `block_m` for one GEMM (gate_up or down): among those whose tile divides it, a
// primary tile over a small-K one. Among multistage ones, where two are built (sm_90's 8-token tile at 2 and 3 blocks
// per SM): up to kDeepPipelineMaxPairs pairs the deeper pipeline (2 blocks), for gate_up up to
// kGateUpDeepPipelineMaxPairs; above, the one with more warps (3 blocks) unless the other's
// persistent rounds are expected kSplitFillGain fuller for this GEMM's work items (a TP or EP shard's gate_up at
// T=16 or 128 and EP8's down at T=5: few work items; docs/perf/shards.md). split_k: only configs with split-K gate_up
// kernels (the decode tiles: split_k in the catalogue). -1 when none.
int pick_config(const PlanContext& c, KernelFamily family, int block_m, int64_t pairs, GemmDims g, bool gate_up,
                bool split_k = false);

// The configs of block_m for both GEMMs of a call with `pairs` pairs: the warp-specialized ones where resident,
// unless the call is few enough pairs for multistage configs of both GEMMs to route them themselves; with
// gate_up_split_k (a caller's gate_up K split) gate_up's config with split-K kernels where the block_m has one. false
// when a GEMM has no config of that block_m.
struct GemmChoice {
  int gate_up = -1, down = -1;
  bool fused_routing = false;
};
bool choose_configs(const PlanContext& c, int block_m, int64_t pairs, GemmChoice* out, bool gate_up_split_k = false);

// The heuristic's block_m for T tokens: the smallest block_m at or above the thresholds' choice that has configs
// for both GEMMs (the busiest expert counts tokens over the model's experts: num_global_experts).
int heuristic_block_m(const PlanContext& c, int64_t num_tokens);
// The heuristic's down-GEMM K splits for T tokens on down config `index`: 2 where that fills the rounds better
// and the config's K tiles divide in two, else 1.
int heuristic_down_k_splits(const PlanContext& c, int64_t num_tokens, int index);
// Experts of this layer that T tokens of uniform routing reach, on average (EP: of its num_experts local ones).
double expected_local_experts(const MoeShape& s, int64_t num_tokens);

// Whether a call of T tokens takes the direct decode path -- at most kMaxDirectDecodePairs pairs, the chunks uniform
// routing reaches give a down warp at most kDirectMaxDownGroupsPerWarp K groups (kDirectMaxDownGroupsPerWarpSplit where
// they are fewer than the warps, which then split each chunk's K), both kernels' shared memory within kDirectMaxSmem,
// grids within int32 -- and its plan (out may be null): down stages its weights in shared memory where
// direct_down_stages_weights says so for c.sms SMs of c.arch's shared memory, and room for every pair's SwiGLU row
// where that fits (on an expert-parallel rank at least for twice the rows uniform routing gives it, the rest then from
// L2). make_run_plan takes it where the options allow (direct_decode and fuse_small_routing) and the caller forces
// nothing.
bool direct_decode_plan(const PlanContext& c, int64_t num_tokens, MoeDirectPlan* out);

// Whether a call of T tokens that does not take the direct path runs down and the finalize as one kernel after the
// tiled gate_up (kernels/moe_decode_direct.cuh, moe_direct_down_ring_kernel) -- sm_90, a deterministic finalize, at most
// kDirectDownRingMaxPairs pairs (the kernel routes them itself), I <= kDirectDownBatch x 64 (a chunk's K one batch),
// its shared memory within kDirectMaxSmem, and all of its
// H / 16 blocks resident at once on c.sms SMs (not planned where the SM count is not known) -- and its grid and shared
// memory (out pointers may be null). make_run_plan takes it where the options allow (direct_decode and
// fuse_small_routing) and neither the caller nor the tuning cache asks for down's K in splits (block_m and gate_up's
// splits may be forced: gate_up runs as planned).
bool direct_down_ring_plan(const PlanContext& c, int64_t num_tokens, int* blocks, int64_t* smem_bytes);

// The cluster decode kernel's blocks per cluster for a shape (kClusterDecodeKHalves per gate_up N tile of
// `block_n` rows), or 0 where the kernel does not apply to it: I equal to the tile's K stage `block_k`, at most
// kMaxClusterDecodeBlocks blocks (the portable cluster size) dividing H's N tiles, each K half of gate_up at least the
// copies' lead (`stages` - 1 stages).
inline constexpr int64_t kMaxClusterDecodeBlocks = 8;
inline constexpr int kClusterDecodeKHalves = 2;
int cluster_decode_blocks(const MoeShape& s, int block_n, int block_k, int stages);

// Whether a call of T tokens runs gate_up and down as the cluster decode kernel (kernels/moe_cluster_decode_sm90.cuh),
// on which config and with how many clusters -- sm_90, the deterministic fp32 finalize, routing inside the kernels,
// block_m's first config built as the cluster kernel (catalogue cluster_decode) that applies to the shape
// (cluster_decode_blocks) and keeps one cluster per possible chunk (a pair each) resident at once; a config after the
// block_m's first (more blocks per SM, a shallower pipeline) only where the tiled plan (`tiled_gate_up_splits`) would
// not split gate_up's K: where it would, the tiled kernels were faster (GLM-5's TP8 shard on the H200: the deep
// config's 30 resident clusters take T = 3; the 3-block config's 45 would take T = 4, 40.8 against 37.6 us per
// chained pass, and take T = 5, 42.9 against 45.3; docs/perf/shards.md). make_run_plan takes it where the option
// allows and the caller forces no K splits (or the same ones: gate_up's in two).
struct ClusterDecodeShape {
  int config = -1;  // into PlanContext::configs
  int clusters = 0, cluster_blocks = 0, resident = 0;
};
bool cluster_decode_plan(const PlanContext& c, int64_t num_tokens, int block_m, bool fused_routing,
                         int tiled_gate_up_splits, ClusterDecodeShape* out);

// The whole decision for one call (block_m and down_k_splits: 0 = the layer's choice). *choice: the configs.
Status make_run_plan(const PlanContext& c, int64_t num_tokens, int block_m, int down_k_splits, MoeRunPlan* out,
                     GemmChoice* choice, int gate_up_k_splits = 0);
// The heuristic's gate_up K splits for T tokens on gate_up config `index`: where its items fill less than half a
// round of the persistent blocks, the fewest of 1, 2, 4, 8 (dividing the config's K tiles) past which more would not
// fill the rounds kSplitFillGain better; 1 above kMaxSplitTokens or for a warp-specialized config (its epilogue
// has no split fixup).
int heuristic_gate_up_k_splits(const PlanContext& c, int64_t num_tokens, int index);
// gate_up's tail pieces for a plan (MoeRunPlan::gate_up_tail_pieces; MoeLayerOptions::gate_up_tail says where): 0 or
// kGateUpTailPieces.
int gate_up_tail_pieces(const PlanContext& c, const MoeRunPlan& p, int gate_up_index);
// gate_up's split-K partial sums of a call: splits x T x k x 2I fp32 values (0 without splits).
int64_t gate_up_split_floats(const MoeShape& s, int64_t num_tokens, int splits);
// Those of the call `p` plans: its gate_up K splits, or its tail kernel's pieces (the plan has one or the other).
int64_t gate_up_split_floats(const MoeShape& s, const MoeRunPlan& p);
// The workspace layout of the call `p` plans (its T, down and gate_up K splits).
WorkspaceLayout call_workspace_layout(const MoeShape& s, FinalizeMode mode, const MoeRunPlan& p);

// The largest split buffers any plan for T <= max_tokens can need, with the layer's own split choices or the
// forced counts (0: none forced): the deterministic finalize's partial rows (T * k * down splits) and gate_up's
// split-K partial sums (fp32 values: splits x T x k x 2I; 0 when no plan splits gate_up).
struct SplitBuffers {
  int64_t partial_rows, gate_up_floats;
};
SplitBuffers max_split_buffers(const PlanContext& c, int64_t max_tokens, int down_forced, int gate_up_forced);

// Shape and option rules of MoeLayer::can_implement, with checked arithmetic.
Status check_shape(const MoeShape& s, const MoeLayerOptions& o);
// Rules on the token count of a call: T >= 0, T * k below 2^30, the GEMMs' int32 work-item count.
Status check_tokens(const MoeShape& s, int64_t num_tokens, int down_k_splits);

}  // namespace fp4moe::detail
