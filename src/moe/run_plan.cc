// The MoE layer's per-call decision and its input checks (src/moe/run_plan.h).
// SPDX-License-Identifier: Apache-2.0
#include "src/moe/run_plan.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "fp4moe/planner.h"

namespace fp4moe {

std::string MoeRunPlan::to_string() const {
  std::string s = "T=" + std::to_string(num_tokens) + " -> " + kernel_family_name(family) + " " +
                  std::to_string(block_m) + "x" + std::to_string(block_n) + "x" + std::to_string(block_k) + ", " +
                  std::to_string(stages) + " stages, " + with_commas(smem_bytes) + " B smem, " +
                  std::to_string(threads) + " threads, " + std::to_string(grid) + " persistent blocks, " +
                  (wgmma ? "wgmma" : "mma.sync") + ", down K in " + std::to_string(down_k_splits) + " split(s), " +
                  (fused_routing ? "routing inside the GEMMs, " : "routing kernel, ") +
                  (finalize == FinalizeMode::kDeterministic ? "deterministic" : "atomic") + " finalize" +
                  (programmatic_launch ? ", programmatic launch" : "");
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

int pick_config(const PlanContext& c, int block_m, int64_t pairs) {
  int best = -1, ws = -1;
  const auto& v = *c.configs;
  for (int i = 0; i < static_cast<int>(v.size()); ++i) {
    const auto& cfg = v[static_cast<size_t>(i)].config;
    if (cfg.tile.block_m != block_m) continue;
    if (cfg.tile.family == KernelFamily::kWarpSpecialized) {
      ws = i;
      continue;
    }
    const bool better = best < 0 || (pairs <= kDeepPipelineMaxPairs
                                         ? cfg.blocks_per_sm < v[static_cast<size_t>(best)].config.blocks_per_sm
                                         : cfg.blocks_per_sm > v[static_cast<size_t>(best)].config.blocks_per_sm);
    if (better) best = i;
  }
  if (ws >= 0 && !fuses_routing(c, best, pairs)) return ws;
  return best >= 0 ? best : ws;
}

bool fuses_routing(const PlanContext& c, int index, int64_t pairs) {
  return c.options->fuse_small_routing && pairs >= 1 && pairs <= kMaxFusedRoutingPairs && index >= 0 &&
         (*c.configs)[static_cast<size_t>(index)].config.tile.fused_routing;
}

int heuristic_block_m(const PlanContext& c, int64_t num_tokens) {
  // Each chunk dequantizes its expert's weights again and the dequantization is what limits the kernels, so a
  // chunk should hold nearly every expert's tokens, but no more: unused 8-token MMA tiles are skipped, yet a
  // larger tile has fewer resident warps.
  const MoeShape& s = *c.shape;
  const double mean = static_cast<double>(num_tokens) * static_cast<double>(s.top_k) / static_cast<double>(s.num_experts);
  const double busiest = mean + 3.0 * std::sqrt(mean);
  const int s16 = pick_config(c, 16, num_tokens * s.top_k);
  const bool ws16 = s16 >= 0 && (*c.configs)[static_cast<size_t>(s16)].config.tile.family == KernelFamily::kWarpSpecialized;
  const BlockMThresholds t = ws16 ? kThresholdsWarpSpecialized16 : kThresholdsMultistage16;
  const int want = busiest <= t.to8 ? 8 : busiest <= t.to16 ? 16 : busiest <= t.to32 ? 32 : 64;
  int best = 0;
  for (const auto& r : *c.configs) {
    const int m = r.config.tile.block_m;
    if (m >= want && (best == 0 || m < best)) best = m;
  }
  if (best == 0)
    for (const auto& r : *c.configs) best = std::max(best, r.config.tile.block_m);
  return best;
}

int heuristic_down_k_splits(const PlanContext& c, int64_t num_tokens, int index) {
  const MoeShape& s = *c.shape;
  if (num_tokens > kMaxSplitTokens || index < 0 || !down_k_splits_supported(s, 2)) return 1;
  // Items of the down GEMM: chunks (about the experts with a token under uniform routing, or pairs / block_m)
  // x N tiles x splits, walked by the persistent blocks in rounds.
  const ResidentConfig& r = (*c.configs)[static_cast<size_t>(index)];
  const double pairs = static_cast<double>(num_tokens) * static_cast<double>(s.top_k);
  const double chunks = std::max(expected_active_experts(s, num_tokens), pairs / r.config.tile.block_m);
  const double tiles = chunks * static_cast<double>(s.hidden / r.config.tile.block_n);
  auto fill = [&](int splits) {
    const double items = tiles * splits;
    return items / (std::ceil(items / r.grid) * r.grid);
  };
  return fill(2) >= fill(1) + kSplitFillGain ? 2 : 1;
}

Status make_run_plan(const PlanContext& c, int64_t num_tokens, int block_m, int down_k_splits, MoeRunPlan* out,
                     int* index) {
  const MoeShape& s = *c.shape;
  const MoeLayerOptions& o = *c.options;
  FP4MOE_RETURN_IF_ERROR(check_tokens(s, num_tokens, down_k_splits));
  if (down_k_splits != 0 && !down_k_splits_supported(s, down_k_splits))
    return invalid_argument("down_k_splits must be 0 (the layer's choice) or 1, 2, 4 or 8 dividing intermediate / 256 = " +
                            std::to_string(s.intermediate / 256) + ", got " + std::to_string(down_k_splits));
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
  const int i = pick_config(c, bm, pairs);
  if (i < 0)
    return invalid_argument("block_m " + std::to_string(bm) + " has no kernel config on this GPU (shipped block_ms: " + block_ms_text() + ")");
  int splits = down_k_splits;
  if (splits == 0) splits = tuned != nullptr ? tuned->down_k_splits : heuristic_down_k_splits(c, num_tokens, i);
  else source += ", down K splits from the caller";
  FP4MOE_RETURN_IF_ERROR(check_tokens(s, num_tokens, splits));
  const ResidentConfig& r = (*c.configs)[static_cast<size_t>(i)];
  MoeRunPlan p;
  p.num_tokens = num_tokens;
  p.family = r.config.tile.family;
  p.block_m = r.config.tile.block_m;
  p.block_n = r.config.tile.block_n;
  p.block_k = r.config.tile.block_k;
  p.stages = r.config.stages;
  p.threads = r.config.threads;
  p.smem_bytes = r.config.smem_bytes;
  p.grid = r.grid;
  p.wgmma = p.family == KernelFamily::kWarpSpecialized || moe_gemm_act_layout(r.config.cc, p.block_m) == MoeActLayout::kSwizzled128;
  p.down_k_splits = splits;
  p.fused_routing = fuses_routing(c, i, pairs);
  p.programmatic_launch = o.programmatic_launch && c.arch >= 90;
  p.finalize = o.finalize;
  p.source = source;
  *out = p;
  if (index) *index = i;
  return Status::ok();
}

int64_t max_partial_rows(const PlanContext& c, int64_t max_tokens, int forced_splits) {
  const MoeShape& s = *c.shape;
  int64_t rows = max_tokens * s.top_k * std::max(1, forced_splits);
  // The layer's own split choices: the heuristic's at small T on every resident config (a caller may force any
  // block_m), and every tuned bucket (bucket b serves T in (b/2, b]).
  for (int64_t t = 1; t <= std::min(max_tokens, kMaxSplitTokens); ++t)
    for (int i = 0; i < static_cast<int>(c.configs->size()); ++i)
      rows = std::max(rows, t * s.top_k * heuristic_down_k_splits(c, t, i));
  for (const auto& [bucket, choice] : *c.tuned)
    if (bucket / 2 < max_tokens) rows = std::max(rows, std::min(bucket, max_tokens) * s.top_k * choice.down_k_splits);
  return rows;
}

Status check_shape(const MoeShape& s, const MoeLayerOptions& o) {
  constexpr int64_t kMaxExperts = 1024;
  if (s.num_experts < 1 || s.num_experts > kMaxExperts)
    return invalid_argument("num_experts must be in [1, 1024], got " + std::to_string(s.num_experts));
  if (s.top_k < 1 || s.top_k > s.num_experts)
    return invalid_argument("top_k must be in [1, num_experts], got " + std::to_string(s.top_k) + " with " +
                            std::to_string(s.num_experts) + " experts");
  if (s.hidden <= 0 || s.hidden % 256 != 0)
    return unsupported("hidden must be a positive multiple of 256 (gate_up's K tile; down's N tile, 128 or 256), got " +
                       std::to_string(s.hidden));
  if (s.intermediate <= 0 || s.intermediate % 256 != 0)
    return unsupported("intermediate must be a positive multiple of 256 (down's K tile), got " +
                       std::to_string(s.intermediate));
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
