// The NVFP4 MoE layer (W4A16): prepack once, then forward = routing -> gate_up (+SwiGLU) -> down (+finalize).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fp4moe/status.h"

namespace fp4moe {

class TuningCache;  // fp4moe/tuning.h

struct MoeShape {
  int64_t num_experts = 0;   // E, 1..1024
  int64_t hidden = 0;        // H: multiple of 128 (down's N tile) and of 256 (gate_up's K tile)
  int64_t intermediate = 0;  // I: 2I a multiple of 128, I a multiple of 256
  int64_t top_k = 0;         // k, 1..E
};

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
};

// Expert weights in the checkpoint (ModelOpt) layout, on the device.
struct Nvfp4ExpertWeights {
  const void* packed = nullptr;        // uint8 [E, N, K/2], element 2j in the low nibble
  const void* scales = nullptr;        // UE4M3 [E, N, K/16], linear
  const float* global_scale = nullptr;  // fp32 [E]
};

// Most (token, expert) pairs the GEMM kernels route themselves (MoeLayerOptions::fuse_small_routing).
inline constexpr int kMaxFusedRoutingPairs = 32;

struct MoeLayerOptions {
  GateUpOrder gate_up_order = GateUpOrder::kGateFirst;
  GlobalScaleKind global_scale_kind = GlobalScaleKind::kQuantize;
  FinalizeMode finalize = FinalizeMode::kDeterministic;
  int block_m = 0;  // 0: chosen per call (tuning cache, else heuristic); else one of kernel_block_ms()
  // sm_90+: launch each kernel of a forward pass as a programmatic dependent of the one before, so it starts
  // while that one drains (the down GEMM streams its first weights before gate_up has finished). Off: plain
  // stream order (same results, bit for bit).
  bool programmatic_launch = true;
  // At most kMaxFusedRoutingPairs (token, expert) pairs (a decode step of up to 32 / top_k tokens) with a
  // decode tile (block_m <= 16): the GEMM kernels route the pairs themselves, in registers, instead of a
  // routing kernel launched before them. Off: always the routing kernel (same tables and results, bit for bit).
  bool fuse_small_routing = true;
  // sm_90: the 16-, 32- and 64-token tiles run warp-specialized kernels (kernels/moe_gemm_ws.cuh: one block per SM,
  // a producer warpgroup issuing every copy, four consumer warpgroups for 256 weight rows, mbarriers between
  // them); 8-27% faster on the H200 at T = 512..4096, and the 16-token one 4-8% at T = 64..256
  // (docs/perf/moe-decode.md). A call of at most 32 pairs that the classic kernels route themselves
  // (fuse_small_routing) keeps them. Off: the 2-blocks-per-SM kernels of the other tiles. Other archs: no
  // effect. Results agree within the tolerance (same K order in every sum, but another N tiling).
  bool warp_specialized = true;
  // Tuning cache read at init: "" = the default location (tuning.h), "none" = do not read one.
  std::string tuning_cache = "";
};

struct MoeForwardArgs {
  const void* hidden = nullptr;        // bf16 [T, H], 16-byte aligned
  int64_t num_tokens = 0;              // T (0 is a no-op)
  const int32_t* topk_ids = nullptr;   // [T, k]; ids outside [0, E) are skipped and reported by check()
  const float* topk_weights = nullptr;  // [T, k]; non-finite weights are skipped and reported
  void* output = nullptr;              // bf16 [T, H], 16-byte aligned
  int block_m = 0;                     // 0: the layer's choice for T (tuned or heuristic); else a kernel_block_ms() value
  // K ranges of the down GEMM (summed in a fixed order by the deterministic finalize): 0 = the layer's choice
  // (1, or 2 where few work items fill the GPU's last round poorly: MoeLayer::down_k_splits_for); else 1, 2, 4
  // or 8 dividing intermediate / 256.
  // The workspace must then hold T * k * splits fp32 rows of H: workspace_size(T, down_k_splits).
  int down_k_splits = 0;
};

// Which parts of forward() to enqueue (benchmarks time them one by one; the default runs all). Running
// gate_up or down alone reuses the routing tables and activations an earlier call with the same arguments
// left in the same workspace.
enum MoePhase : unsigned { kPhaseRouting = 1, kPhaseGateUp = 2, kPhaseDown = 4, kPhaseAll = 7 };

// Where a run's intermediate results sit inside its workspace (device pointers), for tests and debugging.
struct MoeWorkspaceView {
  const int32_t* expert_offsets = nullptr;  // [E + 1] permuted rows of expert e: [offsets[e], offsets[e+1])
  const int32_t* perm_pair = nullptr;       // [T * k] pair index (t * k + s) of each permuted row
  const int32_t* inv_perm = nullptr;        // [T * k] permuted row of each pair, -1 if the pair was skipped
  const void* act = nullptr;                // bf16 [T * k, I] SwiGLU output in permuted row order
};

// Block sizes along M (tokens per work chunk) of the kernel configs built into this library.
std::vector<int> kernel_block_ms();

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
  // Workspace for up to `max_tokens` tokens (routing tables, the SwiGLU output, finalize buffers), for the
  // layer's own down_k_splits choices (default and tuned), or also for `down_k_splits` (MoeForwardArgs) forced
  // by the caller. Ask again after use_tuning(): tuned split counts can need more.
  size_t workspace_size(int64_t max_tokens, int down_k_splits = 0) const;
  // Enqueues the layer on `stream`: no allocation, no host synchronisation (CUDA-graph capturable).
  Status run(const MoeForwardArgs& args, void* workspace, size_t workspace_bytes, cudaStream_t stream,
             unsigned phases = kPhaseAll) const;
  // Synchronises `stream`; reports topk ids outside [0, E) or non-finite router weights seen by the last run.
  Status check(const void* workspace, cudaStream_t stream) const;

  MoeWorkspaceView workspace_view(const void* workspace, int64_t num_tokens) const;

  // Adopts the tuned choices recorded for this layer's shape and finalize mode (an empty cache, or one
  // for another GPU, leaves the heuristic in charge). Returns how many token buckets were adopted.
  size_t use_tuning(const TuningCache& cache);
  // Where run()'s block_m choices come from, in words (tuning cache and how many buckets, or the heuristic and why).
  std::string tuning_source() const;

  // Block size along M that run() uses for `num_tokens`, and a one-line description of the configs.
  int block_m_for(int64_t num_tokens) const;
  // K splits of the down GEMM that run() uses for `num_tokens` when MoeForwardArgs::down_k_splits is 0: the
  // tuning cache's choice for the bucket, else 2 where the down GEMM's work items (about the active experts x
  // its N tiles) fill the resident blocks' rounds at least 10 points better in halves (few tokens), else 1.
  int down_k_splits_for(int64_t num_tokens) const;
  // Whether a forward pass of `num_tokens` (with MoeForwardArgs::block_m = `block_m`, 0 = the layer's choice)
  // routes inside the GEMM kernels instead of launching the routing kernel (MoeLayerOptions::fuse_small_routing).
  bool fuses_routing(int64_t num_tokens, int block_m = 0) const;
  // Whether a call of num_tokens tokens (block_m: 0 = the layer's choice) runs the warp-specialized kernels.
  bool runs_warp_specialized(int64_t num_tokens, int block_m = 0) const;
  std::string describe(int64_t num_tokens) const;
  const MoeShape& shape() const;
  size_t prepacked_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace fp4moe
