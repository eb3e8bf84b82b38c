// The NVFP4 MoE layer (W4A16): prepack once, then forward = routing -> gate_up (+SwiGLU) -> down (+finalize).
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fp4moe/kernel_types.h"
#include "fp4moe/status.h"

namespace fp4moe {

class TuningCache;  // fp4moe/tuning.h
namespace detail {
struct MoeLayerAccess;  // fp4moe/testing.h
}

// One GPU's MoE problem. Tensor parallelism (TP) shards I: a TP rank's layer is a shape with intermediate = I / tp
// (slice the weights with shard_tp_weights). Expert parallelism (EP) shards E: an EP rank's layer holds experts
// [first_expert, first_expert + num_experts) of num_global_experts; topk_ids stay global, pairs routed to other
// ranks' experts are skipped (not reported), and the output is this rank's partial sum for every token (zero
// where none of its experts was chosen), for the caller's reduce-scatter or all-reduce to complete.
struct MoeShape {
  int64_t num_experts = 0;   // E: the experts this layer holds, 1..1024
  int64_t hidden = 0;        // H: a multiple of 256 (gate_up's K tile; down's N tile, 128 or 256)
  int64_t intermediate = 0;  // I: a multiple of 64 (down's smallest K tile)
  int64_t top_k = 0;         // k: 1..num_global_experts
  int64_t num_global_experts = 0;  // EP: the model's experts (ids in topk_ids are in [0, this)); 0 = num_experts
  int64_t first_expert = 0;        // EP: global id of this layer's expert 0
  // The model's experts (num_global_experts, or num_experts where that is 0).
  int64_t global_experts() const { return num_global_experts > 0 ? num_global_experts : num_experts; }
};

// "E=32/256 H=6144 I=2048 k=8": the shape as the layer, the CLI and the tests print it (local / global experts under
// EP, E alone otherwise).
std::string shape_text(const MoeShape& s);

// Order of the two halves of w13 [E, 2I, H]. FlashInfer / TensorRT-LLM store up first; vLLM gate first.
enum class GateUpOrder { kGateFirst, kUpFirst };

// What the per-expert fp32 global scale means.
enum class GlobalScaleKind {
  kQuantize,    // fp4moe / docs/format.md: x = e2m1 * scale / gs  (gs = 448 * 6 / amax)
  kDequantize,  // ModelOpt `weight_scale_2`: x = e2m1 * scale * g  (g = amax / (448 * 6))
};

// How the down projection's k slots of a token are summed.
enum class FinalizeMode {
  kDeterministic,  // fp32 partial per (token, slot), then a fixed-order sum: bit-identical run to run for the
                   // same inputs, T and layer (block_m and down K splits, which a tuning cache may choose per
                   // tokens bucket, change the summation order; tuning_cache = "none" pins the heuristic)
  kAtomic,         // fp32 atomics into a [T, H] buffer: less traffic, summation order not fixed
  // As kDeterministic (fixed order, fp32 sum), but each (token, slot) partial is rounded to bf16 before the sum,
  // as serving stacks' MoE kernels keep their per-expert outputs: half the partial bytes written and re-read (T k H
  // x 2 B instead of 4), which is most of a tensor-parallel shard's down phase at large T. One more bf16 rounding
  // per term: |error| grows by at most 2^-8 x the sum of the terms' magnitudes.
  kDeterministicBf16,
};
// Every mode, in the order the CLI lists them.
inline constexpr FinalizeMode kFinalizeModes[] = {FinalizeMode::kDeterministic, FinalizeMode::kDeterministicBf16,
                                                   FinalizeMode::kAtomic};
// "deterministic", "atomic" or "deterministic-bf16": the name the CLI, the tuning cache and the plans use.
constexpr const char* finalize_mode_name(FinalizeMode m) {
  return m == FinalizeMode::kAtomic ? "atomic" : m == FinalizeMode::kDeterministicBf16 ? "deterministic-bf16" : "deterministic";
}
// The mode of a finalize_mode_name, or false (m untouched) for any other text.
inline bool finalize_mode_from_name(const std::string& name, FinalizeMode* m) {
  for (FinalizeMode x : kFinalizeModes)
    if (name == finalize_mode_name(x)) return *m = x, true;
  return false;
}
// Whether the mode sums the k slots in a fixed order (bit-identical reruns).
constexpr bool finalize_is_deterministic(FinalizeMode m) { return m != FinalizeMode::kAtomic; }

// Expert weights in the checkpoint (ModelOpt) layout, on the device.
struct Nvfp4ExpertWeights {
  const void* packed = nullptr;        // uint8 [E, N, K/2], element 2j in the low nibble
  const void* scales = nullptr;        // UE4M3 [E, N, K/16], linear
  const float* global_scale = nullptr;  // fp32 [E]
};

// Most (token, expert) pairs the GEMM kernels route themselves (MoeLayerOptions::fuse_small_routing).
inline constexpr int kMaxFusedRoutingPairs = 64;
// Most pairs of a call on the direct decode path (MoeLayerOptions::direct_decode).
inline constexpr int kMaxDirectDecodePairs = 32;

// From this block_m on (the prefill tiles), on a layer whose down GEMM has at most kPlainFinalizeMaxDownK of K (the
// intermediate size: a tensor-parallel shard's), sm_90's kernels launch the deterministic finalize plain after down
// rather than as its programmatic dependent (MoeLayerOptions::programmatic_prefill_finalize says why).
inline constexpr int kPlainFinalizeMinBlockM = 64;
inline constexpr int64_t kPlainFinalizeMaxDownK = 256;

struct MoeLayerOptions {
  GateUpOrder gate_up_order = GateUpOrder::kGateFirst;
  GlobalScaleKind global_scale_kind = GlobalScaleKind::kQuantize;
  FinalizeMode finalize = FinalizeMode::kDeterministic;
  int block_m = 0;  // 0: chosen per call (direct decode path, else tuning cache, else heuristic); else shipped_block_ms()
  // sm_90+: launch each kernel of a forward pass as a programmatic dependent of the one before, so it starts
  // while that one drains (the down GEMM streams its first weights before gate_up has finished); the first one too,
  // of whatever kernel the stream ran before the call (the router, the previous layer), which it waits for before
  // it reads or writes anything. Off: plain stream order (same results, bit for bit).
  bool programmatic_launch = true;
  // With programmatic_launch, sm_90's kernels: whether the deterministic finalize kernel after a prefill tile's down GEMM
  // (block_m >= 64) on a layer with I <= 256 (a TP shard: down's K is one or two tiles and its fp32 partials are the
  // largest part of the pass) is a programmatic dependent too. Off (the default): it launches plain, after down has
  // finished; the kernels before it stay programmatic. On the H200 that made the GLM-5 TP8 shard 0.7-2.8% faster at
  // T = 2048..16384 than every launch programmatic (docs/perf/prefill.md, "The finalize after a TP shard's prefill
  // tile launches plain"). Decode tiles (block_m <= 32), whose finalize starts behind down's tail, layers with a
  // longer down K (where it was level or mixed) and the sm_120 kernels (not measured) keep it programmatic either way.
  // Same results, bit for bit.
  bool programmatic_prefill_finalize = false;
  // At most kMaxFusedRoutingPairs (token, expert) pairs (a decode step of up to 64 / top_k tokens) with a
  // decode tile (block_m <= 16; on sm_90 at block_m 16 up to 32 pairs, above which its warp-specialized tile runs):
  // the GEMM kernels route the pairs themselves, one warp of each block into its shared memory, instead of a
  // routing kernel launched before them. Off: always the routing kernel (same tables and results, bit for bit).
  bool fuse_small_routing = true;
  // sm_90: the 16-, 32- and 64-token tiles run the warp-specialized kernels (KernelFamily::kWarpSpecialized),
  // except for a call of at most 32 pairs that the multistage kernels route themselves (fuse_small_routing).
  // Off: the multistage kernels for every tile. Other archs: no effect. Results agree within the tolerance (same
  // K order in every sum, another N tiling). docs/perf/moe-decode.md has the measurements.
  bool warp_specialized = true;
  // A call of at most kMaxDirectDecodePairs pairs for which the caller forces neither block_m nor K splits, whose
  // down GEMM is short for each warp (a TP or EP shard's decode step of one or two tokens: the plan says), runs the
  // direct decode path: two kernels (gate_up with its K split over a block's warps; down with the finalize folded
  // in), no routing kernel, no partial sums in the workspace, deterministic in every finalize mode (the terms are
  // rounded to bf16 in kDeterministicBf16, as its partials are). Needs fuse_small_routing (it routes inside its
  // kernels). Past it (and past the cluster kernel), on sm_90, a call of at most 32 pairs with a deterministic finalize
  // whose down GEMM has a short K (I <= 256: a TP8 shard's decode step of 3 or 4 tokens; the plan says) and no down K
  // split forced or tuned runs down and the finalize as one kernel after the tiled gate_up (MoeRunPlan::direct_down),
  // with the same output bit for bit as the tiled kernels with down's K in one split. Off: the tiled kernels at every T.
  bool direct_decode = true;
  // sm_90: a call that the 8-token decode tile's kernels would route themselves, past the direct path, with I equal to
  // that tile's K stage (256: a tensor-parallel shard such as GLM-5's TP8), the deterministic fp32 finalize, no other K
  // splits forced, and few enough pairs that a cluster per pair is resident at once (TP8 on an H200: 3 and 5 tokens),
  // runs gate_up and down as one kernel of thread-block clusters: a cluster per expert chunk, two blocks per gate_up N
  // tile (its K halves), the SwiGLU rows handed over at a cluster barrier, then each block a share of down's N tiles;
  // the finalize kernel after it. Same sums as the tiled kernels of that tile with gate_up's K in two splits, so the
  // same output bit for bit. Off: the tiled GEMM kernels.
  bool cluster_decode = true;
  // sm_90: a decode step of at most 64 tokens whose gate_up runs the 8-token tile's kernels after the routing kernel,
  // K whole, with one to three rounds of work items expected (T=16..64 on GLM-5's TP8 and EP8 shards; never its
  // unsharded layer): gate_up's last, partial round of tiles runs as a second kernel that splits each of those tiles'
  // K in pieces (MoeRunPlan::gate_up_tail_pieces), summed in K order before the SwiGLU as gate_up's K splits are, so
  // that the pieces spread over the SMs as the whole tiles' blocks leave them. Off: the round's tiles stream whole,
  // one block each. Results agree within the tolerance (the split tiles' sums in another order); each setting is
  // bit-identical run to run.
  bool gate_up_tail = true;
  // Tuning cache read at init: "" = the default location (tuning.h), "none" = do not read one.
  std::string tuning_cache = "";
  // The kernel family to run: 0 = the device's. 120: the configs planned for sm_120 (RTX 5090, RTX PRO 6000: their
  // tiles, 101,376 B layouts and mma.sync code) on an sm_90 device, one block per SM, where the build compiled them
  // for sm_90a too (FP4MOE_SM120_ON_SM90: the GPU test build) -- to test and time the sm_120 path on an H200.
  int kernel_arch = 0;
};

struct MoeForwardArgs {
  const void* hidden = nullptr;        // bf16 [T, H], 16-byte aligned
  int64_t num_tokens = 0;              // T (0 is a no-op)
  const int32_t* topk_ids = nullptr;   // [T, k] global expert ids; outside [0, E_global): skipped, reported by check()
  const float* topk_weights = nullptr;  // [T, k]; non-finite weights are skipped and reported
  void* output = nullptr;              // bf16 [T, H], 16-byte aligned
  int block_m = 0;                     // 0: the layer's choice for T (direct path, tuned or heuristic); else a shipped block_m
  // K ranges of the down GEMM (summed in a fixed order by the deterministic finalize): 0 = the layer's choice
  // (1, or 2 where few work items fill the GPU's last round poorly); else 1, 2, 4 or 8 dividing
  // intermediate / 256. The workspace must then hold T * k * splits fp32 rows of H: workspace_size(T, splits).
  int down_k_splits = 0;
  // K ranges of the gate_up GEMM (a decode step whose few work items leave SMs idle: a TP shard's N = 2I / tp, an
  // EP rank's one expert), summed in a fixed order before the SwiGLU by the block finishing a tile's last range:
  // 0 = the layer's choice (1, or 2, 4 or 8 where that fills the GPU's blocks better: T <= 64, the decode tiles
  // -- multistage, block_m 8 and 16 -- which have split-K kernels); else 1, 2, 4 or 8 dividing hidden / the
  // config's K tile, on a decode tile. Forced: workspace_size(T, 0, splits).
  int gate_up_k_splits = 0;
};

// The kernel config one GEMM of a forward pass runs.
struct MoeGemmPlan {
  KernelFamily family = KernelFamily::kMultistage;
  int block_n = 0, block_k = 0, stages = 0;
  int threads = 0;            // per block
  int64_t smem_bytes = 0;     // dynamic shared memory per block (the planner's layout)
  int grid = 0;               // persistent blocks: resident blocks per SM x SMs
  bool wgmma = false;         // the tensor-core instruction: wgmma (sm_90a) or mma.sync
  std::string to_string() const;  // "warp-specialized 256x128, 8 stages, 212,160 B smem, 640 threads, 132 blocks, wgmma"
};

// The direct decode path of a call (MoeLayerOptions::direct_decode): its two kernels' grids and shared memory.
struct MoeDirectPlan {
  int gate_up_blocks = 0, down_blocks = 0, threads = 0;
  // gate_up blocks per weight tile: the chunks uniform routing reaches + 1, at most the pairs (block row y takes the
  // chunk pair y leads and every gate_up_chunk_blocks-th of the chunks led by the pairs past the rows)
  int gate_up_chunk_blocks = 0;
  int64_t gate_up_smem_bytes = 0, down_smem_bytes = 0;
  // down's weights staged in shared memory by bulk copies (where that keeps all of its blocks resident beside
  // gate_up's), else loaded into registers
  bool down_stages_weights = false;
  // the SwiGLU rows down stages in shared memory (at most the pairs; fewer on an expert-parallel rank, sized by the
  // rows uniform routing gives it): a call whose routing gives the rank more reads them from L2
  int down_staged_rows = 0;
  std::string to_string() const;  // "gate_up 256 blocks (K over 8 warps, 67,728 B smem), down + finalize 384 blocks (...)"
};

// What one forward pass runs: decided once per call (run() and plan() make the same decision), printable.
// Both GEMMs share block_m (one chunk table); each has its config (a GEMM whose K a tile does not divide takes
// the small-K tile of that block_m). FP4MOE_PRINT_PLANS=1 prints each distinct plan a layer makes to stderr, once.
struct MoeRunPlan {
  int64_t num_tokens = 0;
  int block_m = 0;             // tokens per work chunk
  MoeGemmPlan gate_up, down;
  int down_k_splits = 1;
  int gate_up_k_splits = 1;
  bool fused_routing = false;  // the GEMM kernels route the pairs; no routing kernel
  bool programmatic_launch = false;
  // The finalize kernel is a programmatic dependent of down (programmatic_launch, except on sm_90's kernels after a
  // prefill tile's down on a layer with I <= kPlainFinalizeMaxDownK, unless
  // MoeLayerOptions::programmatic_prefill_finalize); equal to programmatic_launch where the plan has no finalize
  // kernel (the direct paths). So programmatic_launch && !programmatic_finalize: the rule took this plan.
  bool programmatic_finalize = false;
  FinalizeMode finalize = FinalizeMode::kDeterministic;
  // The call runs the direct decode path (`direct`): block_m is then its chunk size (8 tokens), both split counts 1
  // and fused_routing true; the two GEMM plans above keep the configs of the tiled kernels' choice for the call.
  bool direct_decode = false;
  MoeDirectPlan direct;
  // gate_up and down run as the cluster decode kernel (MoeLayerOptions::cluster_decode): `clusters` clusters of
  // `cluster_blocks` blocks of the gate_up plan's config, which both GEMM plans then hold; gate_up's K in 2 splits
  // (two blocks per N tile), down's in 1.
  bool cluster_decode = false;
  int clusters = 0, cluster_blocks = 0;
  int clusters_resident = 0;  // of that config and size at once on this GPU (cudaOccupancyMaxActiveClusters)
  // gate_up's last, partial round of tiles in a second kernel, each tile's K in this many pieces (0: none;
  // MoeLayerOptions::gate_up_tail). gate_up_k_splits is then 1, and the pieces use its split buffers.
  int gate_up_tail_pieces = 0;
  // down and the finalize run as one kernel after the tiled gate_up (MoeLayerOptions::direct_decode: a step of at most
  // 32 pairs past the direct path, where every block of it is resident at once): `direct_down_blocks`
  // blocks of 16 output columns each, `direct_down_smem_bytes` of shared memory each; down_k_splits is then 1, and no
  // partial sums go through the workspace.
  bool direct_down = false;
  int direct_down_blocks = 0;
  int64_t direct_down_smem_bytes = 0;
  std::string source;          // where block_m and the splits came from: caller, options, tuning cache, heuristic
  // Prints every field that changes what runs (the bench compares plans by it, tools/bench/timed_config.h).
  std::string to_string() const;
};

class MoeLayer {
 public:
  MoeLayer();
  ~MoeLayer();
  MoeLayer(MoeLayer&&) noexcept;
  MoeLayer& operator=(MoeLayer&&) noexcept;
  MoeLayer(const MoeLayer&) = delete;
  MoeLayer& operator=(const MoeLayer&) = delete;

  static Status can_implement(const MoeShape& shape, const MoeLayerOptions& options);
  // Allocates the prepacked weights on the current device and converts w13 [E, 2I, H] and w2 [E, H, I]
  // into them on `stream`; synchronises once at the end to report bad scales. Not for the hot path.
  Status init(const MoeShape& shape, const MoeLayerOptions& options, const Nvfp4ExpertWeights& w13,
              const Nvfp4ExpertWeights& w2, cudaStream_t stream);

  Status can_implement(const MoeForwardArgs& args) const;
  // The plan run() would execute for `args` (its num_tokens, block_m and down_k_splits; the pointers are not
  // looked at). Rejects what can_implement rejects before the pointer checks.
  Status plan(const MoeForwardArgs& args, MoeRunPlan* out) const;
  // Workspace for up to `max_tokens` tokens (routing tables, the SwiGLU output, finalize buffers, gate_up's
  // split-K partial sums), for the layer's own K-split choices (default and tuned), or also for `down_k_splits`
  // and `gate_up_k_splits` (MoeForwardArgs) forced by the caller. Ask again after use_tuning(): tuned split counts can need more.
  size_t workspace_size(int64_t max_tokens, int down_k_splits = 0, int gate_up_k_splits = 0) const;
  // The workspace run(args) needs for exactly this call (its plan; 0 where plan() rejects it): cheap, for callers
  // that size or split a workspace per call.
  size_t workspace_size(const MoeForwardArgs& args) const;
  // Enqueues the layer on `stream`: no allocation, no host synchronisation (CUDA-graph capturable).
  Status run(const MoeForwardArgs& args, void* workspace, size_t workspace_bytes, cudaStream_t stream) const;
  // Synchronises `stream`; reports topk ids outside [0, E_global) or non-finite router weights (of this layer's
  // pairs) seen by the last run.
  Status check(const void* workspace, cudaStream_t stream) const;

  // Adopts the tuned choices recorded for this layer's shape and finalize mode (an empty cache, or one
  // for another GPU, leaves the heuristic in charge). Returns how many token buckets were adopted.
  size_t use_tuning(const TuningCache& cache);
  // Where the plans' block_m choices come from, in words (tuning cache and how many buckets, or the heuristic).
  std::string tuning_source() const;
  // plan() for num_tokens tokens and the layer's own choices, as one line (or the reason there is none).
  std::string describe(int64_t num_tokens) const;
  const MoeShape& shape() const;
  size_t prepacked_bytes() const;

 private:
  friend struct detail::MoeLayerAccess;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fp4moe
