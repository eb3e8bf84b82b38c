// The MoE layer's per-call decision and its input checks (src/moe/run_plan.h).
// SPDX-License-Identifier: Apache-2.0
#include "src/moe/run_plan.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "fp4moe/planner.h"
#include "fp4moe/shard.h"
#include "kernels/moe_decode_direct_layout.h"

namespace fp4moe {

std::string shape_text(const MoeShape& s) {
  std::string e = std::to_string(s.num_experts);
  if (s.global_experts() != s.num_experts) e += "/" + std::to_string(s.global_experts());
  return "E=" + e + " H=" + std::to_string(s.hidden) + " I=" + std::to_string(s.intermediate) + " k=" +
         std::to_string(s.top_k);
}

std::string MoeGemmPlan::to_string() const {
  return std::string(kernel_family_name(family)) + " " + std::to_string(block_n) + "x" + std::to_string(block_k) + ", " +
         std::to_string(stages) + " stages, " + with_commas(smem_bytes) + " B smem, " + std::to_string(threads) +
         " threads, " + std::to_string(grid) + " blocks, " + (wgmma ? "wgmma" : "mma.sync");
}

std::string MoeDirectPlan::to_string() const {
  return "gate_up " + std::to_string(gate_up_blocks) + " blocks (K over " + std::to_string(threads / 32) + " warps, " +
         with_commas(gate_up_smem_bytes) + " B smem), down + finalize " + std::to_string(down_blocks) + " blocks (" +
         with_commas(down_smem_bytes) + " B smem, weights " + (down_stages_weights ? "staged" : "in registers") +
         ", SwiGLU rows staged up to " + std::to_string(down_staged_rows) + "), " +
         std::to_string(threads) + " threads, mma.sync";
}

std::string MoeRunPlan::to_string() const {
  if (direct_decode)
    return "T=" + std::to_string(num_tokens) + " -> direct decode: " + direct.to_string() +
           ", routing inside both kernels, finalize inside down (" +
           (finalize == FinalizeMode::kDeterministicBf16 ? "bf16" : "fp32") + " terms, fixed order)" +
           (programmatic_launch ? ", programmatic launch" : "") + " (at most " + std::to_string(kMaxDirectDecodePairs) +
           " pairs, nothing forced)";
  // (every field: sm_90's 8-token tile has two configs of one tile, which differ in stages and blocks only)
  const bool same = gate_up.to_string() == down.to_string();
  std::string s = "T=" + std::to_string(num_tokens) + " -> block_m " + std::to_string(block_m) + ", " +
                  (direct_down ? "gate_up " + gate_up.to_string()
                   : same      ? "both GEMMs " + gate_up.to_string()
                               : "gate_up " + gate_up.to_string() + "; down " + down.to_string()) +
                  (gate_up_k_splits > 1 ? "; gate_up K in " + std::to_string(gate_up_k_splits) + " splits" : std::string()) +
                  (gate_up_tail_pieces > 0 ? "; gate_up's last partial round of tiles in a second kernel, K in " +
                                                 std::to_string(gate_up_tail_pieces) + " pieces"
                                           : std::string()) +
                  (direct_down ? std::string(", ") : "; down K in " + std::to_string(down_k_splits) + " split(s), ") +
                  (fused_routing ? "routing inside the GEMMs, " : "routing kernel, ") +
                  finalize_mode_name(finalize) + " finalize" +
                  (programmatic_launch ? (programmatic_finalize ? ", programmatic launch"
                                                                : ", programmatic launch (the finalize plain)")
                                       : "");
  if (cluster_decode)
    s += "; gate_up and down in one kernel: " + std::to_string(clusters) + " clusters of " +
         std::to_string(cluster_blocks) + " blocks, of " + std::to_string(clusters_resident) +
         " resident at once (a cluster per pair, as many as the call can have expert chunks; each takes one, two blocks "
         "per gate_up N tile, a K half each, "
         "then 1/" + std::to_string(cluster_blocks) + " of down's N tiles each)";
  if (direct_down)
    s += "; down and the finalize in one kernel: " + std::to_string(direct_down_blocks) + " blocks of 16 columns (" +
         with_commas(direct_down_smem_bytes) + " B smem, " + std::to_string(kDirectThreads) +
         " threads, mma.sync; routing inside, " + std::to_string(kDirectDownRing) +
         " chunks' weights in flight a warp, no partial sums)";
  if (!source.empty()) s += " (" + source + ")";
  return s;
}

namespace detail {
namespace {

// a * b when it fits in int64 and neither is negative; nullopt-like false otherwise.
bool mul_ok(int64_t a, int64_t b, int64_t* out) {
  if (a < 0 || b < 0) return false;
  if (a != 0 && b > std::numeric_limits<int64_t>::max() / a) return false;
  *out = a * b;
  return true;
}

// "8, 16, 32, 64": the shipped block_ms, for messages.
std::string block_ms_text() {
  std::string t;
  for (int m : shipped_block_ms()) t += (t.empty() ? "" : ", ") + std::to_string(m);
  return t;
}

}  // namespace

GemmDims gate_up_dims(const MoeShape& s) { return GemmDims{2 * s.intermediate, s.hidden}; }
GemmDims down_dims(const MoeShape& s) { return GemmDims{s.hidden, s.intermediate}; }

namespace {

// A GEMM's expected work items per K split for T tokens on config r with N = n: its chunks (about the local experts
// a token reaches under uniform routing, or the local pairs / block_m) x its N tiles.
double expected_tiles(const PlanContext& c, int64_t num_tokens, const ResidentConfig& r, int64_t n) {
  const MoeShape& s = *c.shape;
  const double local_pairs = static_cast<double>(num_tokens) * static_cast<double>(s.top_k) *
                             static_cast<double>(s.num_experts) / static_cast<double>(s.global_experts());
  const double chunks = std::max(expected_local_experts(s, num_tokens), local_pairs / r.config.tile.block_m);
  return chunks * static_cast<double>(n / r.config.tile.block_n);
}

// How full the persistent blocks' rounds are for `items` work items: items / (rounds x grid).
double round_fill(double items, int grid) { return items / (std::ceil(items / grid) * grid); }

}  // namespace

int pick_config(const PlanContext& c, KernelFamily family, int block_m, int64_t pairs, GemmDims g, bool gate_up,
                bool split_k) {
  const auto& v = *c.configs;
  auto fits = [&](const catalogue::ShippedConfig& cfg, bool small_k) {
    return cfg.tile.family == family && cfg.tile.block_m == block_m && cfg.tile.small_k == small_k &&
           g.n % cfg.tile.block_n == 0 && g.k % cfg.tile.block_k == 0 && (!split_k || cfg.tile.split_k);
  };
  for (bool small_k : {false, true}) {  // a primary tile, else a small-K one
    int best = -1;
    for (int i = 0; i < static_cast<int>(v.size()); ++i) {
      const auto& cfg = v[static_cast<size_t>(i)].config;
      if (!fits(cfg, small_k)) continue;
      if (best < 0) {
        best = i;
        continue;
      }
      const ResidentConfig& b = v[static_cast<size_t>(best)];
      const ResidentConfig& r = v[static_cast<size_t>(i)];
      if (pairs <= kDeepPipelineMaxPairs || (gate_up && pairs <= kGateUpDeepPipelineMaxPairs)) {  // the deep config
        if (r.config.blocks_per_sm < b.config.blocks_per_sm) best = i;
        continue;
      }
      // More blocks per SM (more warps), unless the deeper config's persistent rounds are kSplitFillGain fuller.
      const int64_t tokens = pairs / c.shape->top_k;
      const bool r_deeper = r.config.blocks_per_sm < b.config.blocks_per_sm;
      const ResidentConfig& deep = r_deeper ? r : b;
      const ResidentConfig& wide = r_deeper ? b : r;
      const bool take_deep = round_fill(expected_tiles(c, tokens, deep, g.n), deep.grid) >
                             round_fill(expected_tiles(c, tokens, wide, g.n), wide.grid) + kSplitFillGain;
      if (take_deep == r_deeper) best = i;
    }
    if (best >= 0) return best;
  }
  return -1;
}

bool choose_configs(const PlanContext& c, int block_m, int64_t pairs, GemmChoice* out, bool gate_up_split_k) {
  const GemmDims dims[2] = {gate_up_dims(*c.shape), down_dims(*c.shape)};
  int multistage[2], ws[2];
  for (int g = 0; g < 2; ++g) {
    multistage[g] = pick_config(c, KernelFamily::kMultistage, block_m, pairs, dims[g], g == 0);
    ws[g] = pick_config(c, KernelFamily::kWarpSpecialized, block_m, pairs, dims[g], g == 0);
  }
  // Routing inside the GEMMs needs both GEMMs' kernels to do it (gate_up's block 0 writes the tables the finalize
  // reads; down routes the pairs itself before its programmatic wait). Where this block_m also has warp-specialized
  // configs (sm_90's 16-token tile), the multistage ones route only up to kFusedOverWarpSpecializedMaxPairs.
  const int64_t fuse_max = ws[0] >= 0 || ws[1] >= 0 ? kFusedOverWarpSpecializedMaxPairs : kMaxFusedRoutingPairs;
  const bool fuse = c.options->fuse_small_routing && pairs >= 1 && pairs <= fuse_max && multistage[0] >= 0 &&
                    multistage[1] >= 0 && (*c.configs)[static_cast<size_t>(multistage[0])].config.tile.fused_routing() &&
                    (*c.configs)[static_cast<size_t>(multistage[1])].config.tile.fused_routing();
  // A gate_up K split asked for by the caller needs a config with split-K kernels (a decode tile); where this
  // block_m has one, gate_up takes it (sm_90: the 8-token tile's 2-block config beside the 3-block one, the multistage
  // 16-token tile beside the warp-specialized one).
  const int split = gate_up_split_k ? pick_config(c, KernelFamily::kMultistage, block_m, pairs, dims[0], true, true) : -1;
  GemmChoice ch;
  ch.fused_routing = fuse;
  ch.gate_up = split >= 0 ? split : !fuse && ws[0] >= 0 ? ws[0] : multistage[0] >= 0 ? multistage[0] : ws[0];
  ch.down = !fuse && ws[1] >= 0 ? ws[1] : multistage[1] >= 0 ? multistage[1] : ws[1];
  if (ch.gate_up < 0 || ch.down < 0) return false;
  *out = ch;
  return true;
}

double expected_local_experts(const MoeShape& s, int64_t tokens) {
  // Each token picks k distinct experts uniformly out of the model's: one of this layer's stays idle with
  // probability (1 - k/E_global)^T.
  const double eg = static_cast<double>(s.global_experts());
  return static_cast<double>(s.num_experts) *
         (1.0 - std::pow(1.0 - static_cast<double>(s.top_k) / eg, static_cast<double>(tokens)));
}

PrefillChunkCosts prefill_chunk_costs(double mean) {
  PrefillChunkCosts e{0.0, 0.0};
  if (!(mean > 0.0)) return e;
  const double sd = std::sqrt(mean);
  const int64_t lo = std::max<int64_t>(1, static_cast<int64_t>(std::floor(mean - 5.0 * sd)));
  const int64_t hi = static_cast<int64_t>(std::ceil(mean + 5.0 * sd));
  double total = 0.0;
  for (int64_t n = lo; n <= hi; ++n) {
    const double z = (static_cast<double>(n) - mean) / sd, w = std::exp(-0.5 * z * z);
    const int64_t full = n / 128, rest = n % 128;
    e.tile64 += w * static_cast<double>((n + 63) / 64);
    e.tile128 += w * (static_cast<double>(full) * kPrefillChunkCost +
                      (rest == 0 ? 0.0 : prefill_chunk128_cost(static_cast<int>(rest))));
    total += w;
  }
  e.tile64 /= total;
  e.tile128 /= total;
  return e;
}

int heuristic_block_m(const PlanContext& c, int64_t num_tokens) {
  // Each chunk dequantizes its expert's weights again and the dequantization is what limits the kernels, so a
  // chunk should hold nearly every expert's tokens, but no more: unused 8-token MMA tiles are skipped, yet a
  // larger tile has fewer resident warps.
  const MoeShape& s = *c.shape;
  const int64_t pairs = num_tokens * s.top_k;
  const double mean = static_cast<double>(pairs) / static_cast<double>(s.global_experts());
  const double busiest = mean + 3.0 * std::sqrt(mean);
  const int ws16 = pick_config(c, KernelFamily::kWarpSpecialized, 16, pairs, gate_up_dims(s), true);
  const BlockMThresholds t = ws16 >= 0 ? kThresholdsWarpSpecialized16 : kThresholdsMultistage16;
  const int want = busiest <= t.to8 ? 8 : busiest <= t.to16 ? 16 : busiest <= t.to32 ? 32 : 64;
  int best = 0, largest = 0;
  GemmChoice ch;
  static const std::vector<int> kBlockMs = shipped_block_ms();  // each block_m once (several configs share one)
  for (const int m : kBlockMs) {
    if (!choose_configs(c, m, pairs, &ch)) continue;
    largest = std::max(largest, m);
    if (m >= want && (best == 0 || m < best)) best = m;
  }
  // The 128-token tile (sm_90, warp-specialized) where the expected chunk costs say it pays.
  if (best == 64 && choose_configs(c, 128, pairs, &ch)) {
    const PrefillChunkCosts e = prefill_chunk_costs(mean);
    if (e.tile128 < kPrefillMargin * e.tile64) best = 128;
  }
  return best != 0 ? best : largest;
}

int heuristic_down_k_splits(const PlanContext& c, int64_t num_tokens, int index) {
  const MoeShape& s = *c.shape;
  if (num_tokens > kMaxSplitTokens || index < 0) return 1;
  const ResidentConfig& r = (*c.configs)[static_cast<size_t>(index)];
  if ((s.intermediate / r.config.tile.block_k) % 2 != 0) return 1;  // (so I % 128 == 0: 2 splits are supported)
  const double tiles = expected_tiles(c, num_tokens, r, s.hidden);
  return round_fill(2 * tiles, r.grid) >= round_fill(tiles, r.grid) + kSplitFillGain ? 2 : 1;
}

int heuristic_gate_up_k_splits(const PlanContext& c, int64_t num_tokens, int index) {
  const MoeShape& s = *c.shape;
  if (num_tokens > kMaxSplitTokens || index < 0) return 1;
  const ResidentConfig& r = (*c.configs)[static_cast<size_t>(index)];
  if (!r.config.tile.split_k) return 1;  // (only the decode tiles have split-K gate_up kernels)
  const int64_t k_tiles = s.hidden / r.config.tile.block_k;
  const double tiles = expected_tiles(c, num_tokens, r, 2 * s.intermediate);
  // Only while the items fill less than half a round: with more, most blocks stream an item's whole K back to
  // back and the splits' partial sums and serial fixups cost more than the idle blocks (docs/perf/history.md:
  // GLM-5 TP8 at T=8, 228 items on 264 blocks, was slower in 8 splits than unsplit).
  if (2 * tiles >= r.grid) return 1;
  int best = 1;
  for (int q : {2, 4, 8})
    if (k_tiles % q == 0 && round_fill(q * tiles, r.grid) >= round_fill(best * tiles, r.grid) + kSplitFillGain) best = q;
  return best;
}

int gate_up_tail_pieces(const PlanContext& c, const MoeRunPlan& p, int gate_up_index) {
  const MoeShape& s = *c.shape;
  if (!c.options->gate_up_tail || p.num_tokens > kMaxSplitTokens || p.direct_decode || p.cluster_decode ||
      p.fused_routing || p.gate_up_k_splits != 1 || gate_up_index < 0)
    return 0;
  const ResidentConfig& r = (*c.configs)[static_cast<size_t>(gate_up_index)];
  if (!catalogue::builds_gate_up_tail(r.config.tile, r.config.cc) || (s.hidden / r.config.tile.block_k) % kGateUpTailPieces != 0)
    return 0;
  // A last round after at least one whole one (fewer items: the split-K heuristic's range, or one round of blocks
  // each streaming its tile's whole K), and few rounds.
  const double rounds = expected_tiles(c, p.num_tokens, r, 2 * s.intermediate) / r.grid;
  return rounds >= 1.0 && rounds < kGateUpTailMaxRounds ? kGateUpTailPieces : 0;
}

int64_t gate_up_split_floats(const MoeShape& s, int64_t num_tokens, int splits) {
  return splits > 1 ? splits * num_tokens * s.top_k * 2 * s.intermediate : 0;
}

int64_t gate_up_split_floats(const MoeShape& s, const MoeRunPlan& p) {
  return gate_up_split_floats(s, p.num_tokens, std::max(p.gate_up_k_splits, p.gate_up_tail_pieces));
}

WorkspaceLayout call_workspace_layout(const MoeShape& s, FinalizeMode mode, const MoeRunPlan& p) {
  // (the tables and the SwiGLU rows only: no partial buffer, whatever the finalize mode)
  if (p.direct_decode) return workspace_layout(s, FinalizeMode::kDeterministic, p.num_tokens, 0);
  if (p.direct_down)  // (gate_up's split buffers, no partial sums)
    return workspace_layout(s, FinalizeMode::kDeterministic, p.num_tokens, 0, gate_up_split_floats(s, p));
  return workspace_layout(s, mode, p.num_tokens, p.num_tokens * s.top_k * p.down_k_splits, gate_up_split_floats(s, p));
}

namespace {
// Blocks of the direct kernels with `smem` bytes of shared memory that one SM of `a` holds (with the runtime's
// reservation per block), at most the kernels' register bound kDirectMinBlocks.
int64_t direct_blocks_per_sm(const ArchInfo& a, int64_t smem) {
  return std::min<int64_t>(kDirectMinBlocks, a.smem_per_sm / (smem + a.reserved_smem_per_block));
}
}  // namespace

bool direct_decode_plan(const PlanContext& c, int64_t num_tokens, MoeDirectPlan* out) {
  const MoeShape& s = *c.shape;
  const int64_t pairs = num_tokens * s.top_k;
  if (pairs < 1 || pairs > kMaxDirectDecodePairs) return false;
  // The chunks T tokens of uniform routing reach (one per local expert with a token: T <= 8 rows each).
  const int64_t chunks = static_cast<int64_t>(std::ceil(expected_local_experts(s, num_tokens) - 1e-9));
  const int64_t groups_per_warp = direct_down_groups_per_warp(std::max<int64_t>(chunks, 1), s.intermediate / 64);
  if (groups_per_warp > (chunks < kDirectWarps ? kDirectMaxDownGroupsPerWarpSplit : kDirectMaxDownGroupsPerWarp))
    return false;
  // gate_up: a block per tile for each chunk uniform routing reaches, and one more (the blocks take the chunks in
  // turn: a step that reaches more is correct, a little slower), but no more block rows than one wave of resident
  // blocks holds: a block that takes a second chunk streams it on through its slots, where a block waiting for a
  // slot would start its routing and copies only when a first-wave block exits (EP8 at T=2: 768 blocks of 80 KB).
  const ArchInfo a = arch_info(c.arch);
  const int64_t tiles = 2 * s.intermediate / 16;
  const int64_t gu_smem = direct_gate_up_smem(num_tokens, s.hidden).total;
  int64_t chunk_blocks = std::min(pairs, std::max<int64_t>(chunks, 1) + 1);
  if (c.sms > 0)
    chunk_blocks = std::max<int64_t>(1, std::min(chunk_blocks, direct_blocks_per_sm(a, gu_smem) * c.sms / tiles));
  const int64_t gate_up_blocks = chunk_blocks * tiles, down_blocks = s.hidden / 16;
  if (gate_up_blocks >= (int64_t{1} << 31) || down_blocks >= (int64_t{1} << 31) || gu_smem > kDirectMaxSmem) return false;
  // Down with room for `rows` SwiGLU rows: whether it fits, and how (its weights staged or in registers).
  auto down_fits = [&](int64_t rows, bool* stage, int64_t* smem) {
    const int64_t staged_smem = direct_down_smem(pairs, s.intermediate, true, rows).total;
    *stage = rows == pairs && staged_smem <= kDirectMaxSmem &&  // (the staged kernel has no L2 path for the rows)
             direct_down_stages_weights(gate_up_blocks, down_blocks, gu_smem, staged_smem, c.sms, a.smem_per_sm,
                                        a.reserved_smem_per_block, a.regs_per_sm,
                                        direct_gate_up_loops(chunk_blocks, pairs) ? c.direct_regs.gate_up_loop
                                                                                  : c.direct_regs.gate_up,
                                        c.direct_regs.down_staged);
    *smem = *stage ? staged_smem : direct_down_smem(pairs, s.intermediate, false, rows).total;
    // A down warp with more than one batch of weights to stream pays a round trip per batch after its first; where
    // down's grid also takes a second wave of blocks, whose routing, weights and activations all come after the first
    // wave's, the tiled kernels are faster (DeepSeek-V3 TP8 at T=2: 448 down blocks on 396 slots, 36.7 against 31.7
    // us on the H200; docs/perf/shards.md). (Staged, every down block is resident by construction. Where the SM
    // count is not known, this is not checked.)
    if (c.sms > 0 && !*stage && groups_per_warp > kDirectDownBatch &&
        down_blocks > direct_blocks_per_sm(a, *smem) * c.sms)
      return false;
    return *smem <= kDirectMaxSmem;
  };
  // Room for every pair's row where that fits; else, on an expert-parallel rank, for fewer, but at least twice the
  // rows uniform routing gives it and a chunk's worth (GLM-5's EP8 rank at T=3: 24 pairs, 3 of them its own on
  // average, 17 rows of I = 2048 keep three down blocks an SM). A call with more reads them from L2.
  const double local_pairs = static_cast<double>(pairs) * static_cast<double>(s.num_experts) /
                             static_cast<double>(s.global_experts());
  const int64_t min_rows = std::min<int64_t>(
      pairs, std::max<int64_t>(kDirectChunkRows, static_cast<int64_t>(std::ceil(2.0 * local_pairs - 1e-9))));
  bool stage = false;
  int64_t dn_smem = 0, rows = pairs;
  while (rows >= min_rows && !down_fits(rows, &stage, &dn_smem)) --rows;
  if (rows < min_rows) return false;
  if (out != nullptr)
    *out = MoeDirectPlan{static_cast<int>(gate_up_blocks), static_cast<int>(down_blocks), kDirectThreads,
                         static_cast<int>(chunk_blocks), gu_smem, dn_smem, stage, static_cast<int>(rows)};
  return true;
}

bool direct_down_ring_plan(const PlanContext& c, int64_t num_tokens, int* blocks, int64_t* smem_bytes) {
  const MoeShape& s = *c.shape;
  const int64_t pairs = num_tokens * s.top_k;
  // sm_90 only (where it was measured); a chunk's K one batch (the kernel's one copy of weights a chunk: a TP shard's
  // I = 192 or 256; deeper K, as the direct path's, needs more batches a warp than it streams well).
  if (c.arch != 90 || pairs < 1 || pairs > kDirectDownRingMaxPairs || c.sms <= 0 ||
      s.intermediate > int64_t{kDirectDownBatch} * pack::kGroupK || !finalize_is_deterministic(c.options->finalize))
    return false;
  const ArchInfo a = arch_info(c.arch);
  const int64_t smem = direct_down_ring_smem(pairs, s.intermediate).total;
  if (smem > kDirectMaxSmem || a.smem_per_sm <= 0) return false;
  // Every block resident at once: none waits for a slot that the blocks of the first wave free only when they end.
  const int64_t down_blocks = s.hidden / 16;
  if (down_blocks > direct_blocks_per_sm(a, smem) * c.sms) return false;
  if (blocks != nullptr) *blocks = static_cast<int>(down_blocks);
  if (smem_bytes != nullptr) *smem_bytes = smem;
  return true;
}

namespace {
MoeGemmPlan gemm_plan(const ResidentConfig& r) {
  MoeGemmPlan g;
  g.family = r.config.tile.family;
  g.block_n = r.config.tile.block_n;
  g.block_k = r.config.tile.block_k;
  g.stages = r.config.stages;
  g.threads = r.config.threads;
  g.smem_bytes = r.config.smem_bytes;
  g.grid = r.grid;
  g.wgmma = g.family == KernelFamily::kWarpSpecialized ||
            moe_gemm_act_layout(r.config.cc, r.config.tile.block_m) == MoeActLayout::kSwizzled128;
  return g;
}
}  // namespace

Status make_run_plan(const PlanContext& c, int64_t num_tokens, int block_m, int down_k_splits, MoeRunPlan* out,
                     GemmChoice* choice, int gate_up_k_splits) {
  const MoeShape& s = *c.shape;
  const MoeLayerOptions& o = *c.options;
  FP4MOE_RETURN_IF_ERROR(check_tokens(s, num_tokens, down_k_splits));
  if (down_k_splits != 0 && !down_k_splits_supported(s, down_k_splits))
    return invalid_argument("down_k_splits must be 0 (the layer's choice) or 1, 2, 4 or 8 dividing intermediate / 64 = " +
                            std::to_string(s.intermediate / 64) + ", got " + std::to_string(down_k_splits));
  const int64_t pairs = num_tokens * s.top_k;
  // block_m: the caller's, the options', the tuning cache's for the tokens bucket, else the heuristic's.
  int bm = block_m;
  std::string source = "block_m from the caller";
  const TunedChoice* tuned = nullptr;
  if (bm == 0 && o.block_m != 0) {
    bm = o.block_m;
    source = "block_m from the layer options";
  }
  if (bm == 0) {
    if (const auto it = c.tuned->find(tokens_bucket(num_tokens)); it != c.tuned->end()) {
      tuned = &it->second;
      bm = tuned->block_m;
      source = "block_m and down K splits from the tuning cache";
    } else {
      bm = heuristic_block_m(c, num_tokens);
      source = "block_m from the heuristic";
    }
  }
  GemmChoice ch;
  if (!choose_configs(c, bm, pairs, &ch, gate_up_k_splits > 1))
    return invalid_argument("block_m " + std::to_string(bm) + " has no kernel config on this GPU for both GEMMs of this shape " +
                            "(shipped block_ms: " + block_ms_text() + ")");
  const ResidentConfig& down = (*c.configs)[static_cast<size_t>(ch.down)];
  int splits = down_k_splits;
  if (splits == 0) {
    splits = tuned != nullptr ? tuned->down_k_splits : heuristic_down_k_splits(c, num_tokens, ch.down);
    if ((s.intermediate / down.config.tile.block_k) % splits != 0) splits = 1;  // (a tuned count for another tile)
  } else {
    source += ", down K splits from the caller";
    if ((s.intermediate / down.config.tile.block_k) % splits != 0)
      return invalid_argument("down_k_splits " + std::to_string(splits) + " does not divide the down GEMM's " +
                              std::to_string(s.intermediate / down.config.tile.block_k) + " K tiles of " +
                              std::to_string(down.config.tile.block_k) + " at block_m " + std::to_string(bm));
  }
  int gu_splits = gate_up_k_splits;
  if (gu_splits == 0) {
    gu_splits = heuristic_gate_up_k_splits(c, num_tokens, ch.gate_up);
  } else {
    if (gu_splits != 1 && gu_splits != 2 && gu_splits != 4 && gu_splits != 8)
      return invalid_argument("gate_up_k_splits must be 0 (the layer's choice) or 1, 2, 4 or 8, got " +
                              std::to_string(gu_splits));
    const ResidentConfig& gate_up = (*c.configs)[static_cast<size_t>(ch.gate_up)];
    const int64_t k_tiles = s.hidden / gate_up.config.tile.block_k;
    if (gu_splits > 1 && !gate_up.config.tile.split_k)
      return invalid_argument("gate_up_k_splits " + std::to_string(gu_splits) + ": block_m " + std::to_string(bm) +
                              " runs gate_up on a " + kernel_family_name(gate_up.config.tile.family) +
                              " config without split-K kernels (the decode tiles, multistage at block_m 8 and 16, have them)");
    if (k_tiles % gu_splits != 0)
      return invalid_argument("gate_up_k_splits " + std::to_string(gu_splits) + " does not divide the gate_up GEMM's " +
                              std::to_string(k_tiles) + " K tiles of " + std::to_string(gate_up.config.tile.block_k));
    source += ", gate_up K splits from the caller";
  }
  FP4MOE_RETURN_IF_ERROR(check_tokens(s, num_tokens, std::max(splits, gu_splits)));
  MoeRunPlan p;
  p.num_tokens = num_tokens;
  p.block_m = bm;
  p.gate_up = gemm_plan((*c.configs)[static_cast<size_t>(ch.gate_up)]);
  p.down = gemm_plan(down);
  p.down_k_splits = splits;
  p.gate_up_k_splits = gu_splits;
  p.fused_routing = ch.fused_routing;
  p.programmatic_launch = o.programmatic_launch && c.arch >= 90;
  p.finalize = o.finalize;
  p.source = source;
  if (o.direct_decode && o.fuse_small_routing && block_m == 0 && o.block_m == 0 && down_k_splits == 0 && gate_up_k_splits == 0 &&
      direct_decode_plan(c, num_tokens, &p.direct)) {
    p.direct_decode = true;
    p.block_m = kDirectChunkRows;  // (the chunks it routes into; no K split buffers)
    p.down_k_splits = 1;
    p.gate_up_k_splits = 1;
    p.fused_routing = true;
  }
  if (!p.direct_decode && o.cluster_decode && down_k_splits <= 1 && p.down_k_splits == 1 &&
      (gate_up_k_splits == 0 || gate_up_k_splits == kClusterDecodeKHalves)) {
    ClusterDecodeShape cd;
    if (cluster_decode_plan(c, num_tokens, p.block_m, p.fused_routing, p.gate_up_k_splits, &cd)) {
      p.cluster_decode = true;
      p.clusters = cd.clusters;
      p.cluster_blocks = cd.cluster_blocks;
      p.clusters_resident = cd.resident;
      p.gate_up = p.down = gemm_plan((*c.configs)[static_cast<size_t>(cd.config)]);
      p.gate_up.grid = p.down.grid = cd.clusters * cd.cluster_blocks;  // (the launch, not the config's persistent grid)
      p.down_k_splits = 1;
      p.gate_up_k_splits = kClusterDecodeKHalves;
      ch.gate_up = ch.down = cd.config;
    }
  }
  // (gate_up's block_m and K splits stay as planned or forced: the kernel reads the SwiGLU rows in the permuted
  // order any of them writes. A forced or tuned down K split keeps the tiled down kernel.)
  if (!p.direct_decode && !p.cluster_decode && o.direct_decode && o.fuse_small_routing && down_k_splits == 0 &&
      (tuned == nullptr || p.down_k_splits == 1) &&
      direct_down_ring_plan(c, num_tokens, &p.direct_down_blocks, &p.direct_down_smem_bytes)) {
    p.direct_down = true;
    p.down_k_splits = 1;
  }
  p.gate_up_tail_pieces = gate_up_tail_pieces(c, p, ch.gate_up);
  // The finalize kernel's launch, once the path is known: plain only after a tiled prefill tile's down on a TP shard, on
  // sm_90's kernels (where it was measured; sm_120's keep the programmatic launch); paths without a finalize kernel
  // keep the field equal to programmatic_launch.
  const bool plain_finalize = c.arch == 90 && !p.direct_decode && !p.direct_down && p.block_m >= kPlainFinalizeMinBlockM &&
                              s.intermediate <= kPlainFinalizeMaxDownK && finalize_is_deterministic(o.finalize) &&
                              !o.programmatic_prefill_finalize;
  p.programmatic_finalize = p.programmatic_launch && !plain_finalize;
  *out = p;
  if (choice) *choice = ch;
  return Status::ok();
}

int cluster_decode_blocks(const MoeShape& s, int block_n, int block_k, int stages) {
  if (s.intermediate != block_k || (2 * s.intermediate) % block_n != 0) return 0;
  const int64_t blocks = kClusterDecodeKHalves * (2 * s.intermediate / block_n);
  if (blocks > kMaxClusterDecodeBlocks || s.hidden % (blocks * block_n) != 0) return 0;
  const int64_t k_tiles = s.hidden / block_k;
  if (k_tiles % kClusterDecodeKHalves != 0 || k_tiles / kClusterDecodeKHalves < stages - 1) return 0;
  return static_cast<int>(blocks);
}

bool cluster_decode_plan(const PlanContext& c, int64_t num_tokens, int block_m, bool fused_routing,
                         int tiled_gate_up_splits, ClusterDecodeShape* out) {
  const MoeShape& s = *c.shape;
  if (c.arch != 90 || c.options->finalize != FinalizeMode::kDeterministic || !fused_routing) return false;
  const int64_t clusters = num_tokens * s.top_k;  // one per possible chunk (each holds a pair)
  bool first = true;  // the block_m's first cluster config (the deepest pipeline)
  for (size_t i = 0; i < c.configs->size(); ++i) {
    const ResidentConfig& r = (*c.configs)[i];
    const catalogue::ShippedTile& t = r.config.tile;
    if (!t.cluster_decode || t.block_m != block_m || r.config.cc != 90) continue;
    const bool later = !first;
    first = false;
    if (clusters > r.clusters || (later && tiled_gate_up_splits > 1)) continue;
    const int blocks = cluster_decode_blocks(s, t.block_n, t.block_k, r.config.stages);
    if (blocks == 0) continue;
    if (out != nullptr) *out = ClusterDecodeShape{static_cast<int>(i), static_cast<int>(clusters), blocks, r.clusters};
    return true;
  }
  return false;
}

SplitBuffers max_split_buffers(const PlanContext& c, int64_t max_tokens, int down_forced, int gate_up_forced) {
  const MoeShape& s = *c.shape;
  SplitBuffers b{max_tokens * s.top_k * std::max(1, down_forced), gate_up_split_floats(s, max_tokens, gate_up_forced)};
  // The layer's own split choices: the heuristic's at small T for every block_m (a caller may force any; forced
  // counts hold at every T up to max_tokens, above), and every tuned bucket (bucket b serves T in (b/2, b]).
  std::vector<int> block_ms = shipped_block_ms();
  block_ms.push_back(0);
  for (int64_t t = 1; t <= std::min(max_tokens, kMaxSplitTokens); ++t)
    for (int bm : block_ms) {
      MoeRunPlan p;
      if (!make_run_plan(c, t, bm, 0, &p, nullptr).is_ok()) continue;
      b.partial_rows = std::max(b.partial_rows, t * s.top_k * p.down_k_splits);
      b.gate_up_floats = std::max(b.gate_up_floats, gate_up_split_floats(s, p));
    }
  for (const auto& [bucket, choice] : *c.tuned)
    if (bucket / 2 < max_tokens)
      b.partial_rows = std::max(b.partial_rows, std::min(bucket, max_tokens) * s.top_k * choice.down_k_splits);
  return b;
}

}  // namespace detail

Status shard_shape(const MoeShape& full, int64_t tp_size, int64_t ep_size, int64_t ep_rank, MoeShape* out) {
  if (out == nullptr) return invalid_argument("shard_shape: out is null");
  if (tp_size < 1 || ep_size < 1) return invalid_argument("tp and ep sizes must be at least 1");
  if (ep_rank < 0 || ep_rank >= ep_size)
    return invalid_argument("ep_rank must be in [0, ep_size), got rank " + std::to_string(ep_rank) + " of " +
                            std::to_string(ep_size));
  if (full.intermediate <= 0 || full.intermediate % tp_size != 0 || (full.intermediate / tp_size) % 64 != 0)
    return unsupported("tp " + std::to_string(tp_size) + ": I = " + std::to_string(full.intermediate) +
                       " does not split into shards of a multiple of 64 (the kernels' smallest K tile)");
  if (full.num_experts <= 0 || full.num_experts % ep_size != 0)
    return invalid_argument("ep " + std::to_string(ep_size) + ": E = " + std::to_string(full.num_experts) +
                            " experts do not split evenly");
  MoeShape s = full;
  s.intermediate = full.intermediate / tp_size;
  if (ep_size > 1) {
    s.num_experts = full.num_experts / ep_size;
    s.num_global_experts = full.num_experts;
    s.first_expert = ep_rank * s.num_experts;
  }
  *out = s;
  return Status::ok();
}

namespace detail {

Status check_shape(const MoeShape& s, const MoeLayerOptions& o) {
  constexpr int64_t kMaxExperts = 1024;
  if (s.num_experts < 1 || s.num_experts > kMaxExperts)
    return invalid_argument("num_experts must be in [1, 1024], got " + std::to_string(s.num_experts));
  // Expert parallelism: this layer's experts are [first_expert, first_expert + E) of num_global_experts.
  constexpr int64_t kMaxGlobalExperts = int64_t{1} << 20;
  if (s.num_global_experts < 0 || s.num_global_experts > kMaxGlobalExperts)
    return invalid_argument("num_global_experts must be 0 (= num_experts) or in [1, 2^20], got " +
                            std::to_string(s.num_global_experts));
  if (s.first_expert < 0 || s.first_expert > s.global_experts() - s.num_experts)
    return invalid_argument("the layer's experts [first_expert, first_expert + num_experts) = [" +
                            std::to_string(s.first_expert) + ", " + std::to_string(s.first_expert + s.num_experts) +
                            ") must lie in [0, num_global_experts = " + std::to_string(s.global_experts()) + ")");
  if (s.top_k < 1 || s.top_k > s.global_experts())
    return invalid_argument("top_k must be in [1, num_global_experts], got " + std::to_string(s.top_k) + " with " +
                            std::to_string(s.global_experts()) + " experts");
  if (s.hidden <= 0 || s.hidden % 256 != 0)
    return unsupported("hidden must be a positive multiple of 256 (gate_up's K tile; down's N tile, 128 or 256), got " +
                       std::to_string(s.hidden));
  if (s.intermediate <= 0 || s.intermediate % 64 != 0)
    return unsupported("intermediate must be a positive multiple of 64 (down's smallest K tile), got " +
                       std::to_string(s.intermediate));
  // The kernels index rows and columns in int32: H and 2I each at most 2^30 (the bound below allows more for E = 1).
  if (s.hidden > (int64_t{1} << 30) || s.intermediate > (int64_t{1} << 29))
    return invalid_argument("hidden must be at most 2^30 and intermediate at most 2^29, got " + std::to_string(s.hidden) +
                            " and " + std::to_string(s.intermediate));
  // E * 2I * H elements at most 2^40, computed without overflow.
  int64_t n = 0;
  if (!mul_ok(s.num_experts, 2 * std::min<int64_t>(s.intermediate, int64_t{1} << 41), &n) || !mul_ok(n, s.hidden, &n) ||
      n > (int64_t{1} << 40))
    return invalid_argument("expert weights larger than 2^40 elements are not supported");
  if (o.block_m != 0) {
    const auto ms = shipped_block_ms();
    if (std::find(ms.begin(), ms.end(), o.block_m) == ms.end())
      return invalid_argument("block_m " + std::to_string(o.block_m) + " is not a shipped config (" + block_ms_text() + ")");
  }
  return Status::ok();
}

Status check_tokens(const MoeShape& s, int64_t num_tokens, int down_k_splits) {
  if (num_tokens < 0) return invalid_argument("num_tokens must be >= 0, got " + std::to_string(num_tokens));
  int64_t pairs = 0;
  if (!mul_ok(num_tokens, s.top_k, &pairs) || pairs >= (int64_t{1} << 30))
    return invalid_argument("num_tokens * top_k must be below 2^30, got " + std::to_string(num_tokens) + " * " +
                            std::to_string(s.top_k));
  // The GEMMs count work items (chunks x N tiles x splits) in int32: bound them for the smallest chunk (8 rows).
  const int64_t chunks = pairs / 8 + std::min(s.num_experts, pairs) + 1;
  const int64_t tiles = std::max(2 * s.intermediate, s.hidden) / 128;
  int64_t items = 0;
  if (!mul_ok(chunks, tiles, &items) || !mul_ok(items, std::max(1, down_k_splits), &items) || items >= (int64_t{1} << 31))
    return invalid_argument("num_tokens " + std::to_string(num_tokens) +
                            " makes more than 2^31 GEMM work items for this shape; split the batch");
  return Status::ok();
}

}  // namespace detail
}  // namespace fp4moe
