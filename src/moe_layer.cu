// Host side of the MoE layer: validation, prepack, workspace layout and the launches of a forward pass.
#include <algorithm>
#include <map>
#include <cmath>
#include <string>
#include <utility>

#include "fp4moe/moe.h"
#include "fp4moe/planner.h"
#include "fp4moe/scale_layout.h"
#include "fp4moe/tuning.h"
#include "fp4moe/version.h"
#include "fp4moe/moe_gemm_config.h"
#include "kernels/moe_finalize.cuh"
#include "kernels/moe_prepack.cuh"
#include "kernels/moe_routing.cuh"
#include "src/cuda_util.h"
#include "src/moe_kernel_registry.h"

namespace fp4moe {
namespace {

constexpr int64_t kAlign = 256;
constexpr int64_t kMaxExperts = 1024;

int64_t align_up(int64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

// K splits of the down GEMM when neither the caller nor a tuning cache chooses: 1, or 2 where the few
// (expert, N tile) items of a small T fill the resident blocks' last round poorly and halves fill it well
// (MoeLayer::down_k_splits_for). `fp4moe tune` times 1, 2 and 4 per bucket; callers can force 2, 4 or 8
// (MoeForwardArgs::down_k_splits).
constexpr int kDefaultDownKSplits = 1;
// Where two configs of one block_m are built, calls of at most this many (token, expert) pairs take the one
// planned for fewer blocks per SM (a deeper pipeline each), larger ones the other (measured on the H200 with
// GLM-5: 2.5-10% faster at T = 1..8, i.e. 8..64 pairs; 3% slower at T = 16..64).
constexpr int64_t kDeepPipelineMaxPairs = 64;
// Above this many tokens the heuristic never splits (the items are many; each split adds partial sums).
constexpr int64_t kMaxSplitTokens = 64;

// Byte offsets of the workspace's parts for T tokens; the deterministic finalize's fp32 buffer holds
// `partial` rows of H (pairs x K splits), the atomic one T rows.
struct WorkspaceLayout {
  int64_t flags, offsets, perm, inv, nchunks, chunk_expert, chunk_start, chunk_rows, act, partial, total;
};

WorkspaceLayout workspace_layout(const MoeShape& s, FinalizeMode mode, int64_t tokens, int64_t partial) {
  const int64_t pairs = tokens * s.top_k;
  // Chunks of at most 8 rows (the smallest block_m) per expert: bounds every config's chunk table.
  const int64_t max_chunks = (pairs + 7) / 8 + std::min(s.num_experts, pairs) + 1;
  WorkspaceLayout w{};
  int64_t o = 0;
  auto take = [&](int64_t bytes) { const int64_t at = o; o += align_up(bytes); return at; };
  w.flags = take(4);
  w.offsets = take((s.num_experts + 1) * 4);
  w.perm = take(pairs * 4);
  w.inv = take(pairs * 4);
  w.nchunks = take(4);
  w.chunk_expert = take(max_chunks * 4);
  w.chunk_start = take(max_chunks * 4);
  w.chunk_rows = take(max_chunks * 4);
  w.act = take(pairs * s.intermediate * 2);
  w.partial = take((mode == FinalizeMode::kDeterministic ? partial : tokens) * s.hidden * 4);
  w.total = o;
  return w;
}

// Launches `kernel`; with `pdl` as a programmatic dependent launch (sm_90+) of the kernel enqueued just before
// it: it may start while that one drains and waits inside for its results (kernels/ptx.cuh, griddepcontrol).
template <class... KArgs, class... Args>
cudaError_t launch(void (*kernel)(KArgs...), int64_t grid, int block, int64_t smem, cudaStream_t stream, bool pdl,
                   Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(grid));
  cfg.blockDim = dim3(static_cast<unsigned>(block));
  cfg.dynamicSmemBytes = static_cast<size_t>(smem);
  cfg.stream = stream;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = pdl ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

std::string shape_str(const MoeShape& s) {
  return "E=" + std::to_string(s.num_experts) + " H=" + std::to_string(s.hidden) + " I=" +
         std::to_string(s.intermediate) + " k=" + std::to_string(s.top_k);
}

}  // namespace

std::vector<int> kernel_block_ms() {
  std::vector<int> ms;
  for (const auto& k : detail::moe_kernel_sets())
    if (!k.warp_specialized && std::find(ms.begin(), ms.end(), k.block_m) == ms.end()) ms.push_back(k.block_m);
  return ms;
}

struct MoeLayer::Impl {
  MoeShape shape;
  MoeLayerOptions options;
  int arch = 0, sms = 0, device = -1;
  struct Sel {
    const detail::MoeKernelSet* set;
    int blocks;  // persistent grid: resident blocks per SM x SMs
  };
  std::vector<Sel> sels;  // one per block_m, for this device's architecture
  std::map<int64_t, TunedChoice> tuned;  // tokens bucket -> block_m and down K splits, from a tuning cache
  std::string tuning_source = "built-in heuristic";
  void* storage = nullptr;  // one allocation: weights, scales, alpha for w13 then w2
  size_t w13_bytes = 0, s13_bytes = 0, w2_bytes = 0, s2_bytes = 0, total_bytes = 0;
  uint8_t *pw13 = nullptr, *ps13 = nullptr, *pw2 = nullptr, *ps2 = nullptr;
  float *alpha13 = nullptr, *alpha2 = nullptr;

  ~Impl() {
    if (storage) cudaFree(storage);
  }
  // Takes the cache's choices for this shape and finalize mode that name a config built for this GPU.
  void adopt(const TuningCache& cache, const std::string& source) {
    tuned.clear();
    for (const auto& [bucket, c] : cache.choices_for(shape, options.finalize))
      if (pick(c.block_m) != nullptr && down_k_splits_supported(shape, c.down_k_splits)) tuned[bucket] = c;
    if (!tuned.empty()) tuning_source = source + " (" + std::to_string(tuned.size()) + " token buckets)";
  }
  // Whether a call of `pairs` pairs on config `sel` routes inside the GEMMs (MoeLayer::fuses_routing).
  bool fuses(const Sel* sel, int64_t pairs) const {
    return options.fuse_small_routing && pairs >= 1 && pairs <= kMaxFusedRoutingPairs && sel != nullptr &&
           sel->set->gate_up_fused != nullptr;
  }
  // The config of `block_m` for a call with `pairs` (token, expert) pairs: the warp-specialized one where it was
  // kept (MoeLayerOptions::warp_specialized), unless the call is few enough pairs for a classic config of that
  // block_m to route them itself (fuses(): no routing kernel, 5-13% at T=1 on the H200, which outweighs the
  // kernel family there). Among the classic configs, where two are built (sm_90's 8-token tile at 2 and 3
  // blocks per SM), the deeper pipeline up to kDeepPipelineMaxPairs pairs and the one with more warps above
  // (moe_gemm_config.h, moe_gemm_blocks_per_sm).
  const Sel* pick(int block_m, int64_t pairs = 0) const {
    const Sel* best = nullptr;
    const Sel* ws = nullptr;
    for (const auto& s : sels) {
      if (s.set->block_m != block_m) continue;
      if (s.set->warp_specialized) {
        ws = &s;
        continue;
      }
      const bool better = best == nullptr || (pairs <= kDeepPipelineMaxPairs
                                                  ? s.set->blocks_per_sm < best->set->blocks_per_sm
                                                  : s.set->blocks_per_sm > best->set->blocks_per_sm);
      if (better) best = &s;
    }
    if (ws != nullptr && !fuses(best, pairs)) return ws;
    return best != nullptr ? best : ws;
  }
};

MoeLayer::MoeLayer() = default;
MoeLayer::~MoeLayer() = default;
MoeLayer::MoeLayer(MoeLayer&&) noexcept = default;
MoeLayer& MoeLayer::operator=(MoeLayer&&) noexcept = default;

Status MoeLayer::can_implement(const MoeShape& s, const MoeLayerOptions& o) {
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
  if (s.num_experts * 2 * s.intermediate * s.hidden > (int64_t{1} << 40))
    return invalid_argument("expert weights larger than 2^40 elements are not supported");
  if (o.block_m != 0) {
    const auto ms = kernel_block_ms();
    if (std::find(ms.begin(), ms.end(), o.block_m) == ms.end())
      return invalid_argument("block_m " + std::to_string(o.block_m) + " is not a built-in config (8, 16, 32, 64)");
  }
  return Status::ok();
}

Status MoeLayer::init(const MoeShape& shape, const MoeLayerOptions& options, const Nvfp4ExpertWeights& w13,
                      const Nvfp4ExpertWeights& w2, cudaStream_t stream) {
  FP4MOE_RETURN_IF_ERROR(can_implement(shape, options));
  for (const auto* w : {&w13, &w2}) {
    const char* name = w == &w13 ? "w13" : "w2";
    if (!w->packed || !w->scales || !w->global_scale)
      return invalid_argument(std::string(name) + ": packed, scales and global_scale must all be set");
    FP4MOE_RETURN_IF_ERROR(detail::check_device_pointer(w->global_scale, 4, "global_scale"));
  }
  auto impl = std::make_unique<Impl>();
  impl->shape = shape;
  impl->options = options;
  FP4MOE_CUDA_TRY(cudaGetDevice(&impl->device));
  cudaDeviceProp prop{};
  FP4MOE_CUDA_TRY(cudaGetDeviceProperties(&prop, impl->device));
  const int cc = prop.major * 10 + prop.minor;
  impl->arch = cc == 121 ? 120 : cc;
  impl->sms = prop.multiProcessorCount;
  for (const auto& set : detail::moe_kernel_sets()) {
    if (set.arch != impl->arch) continue;
    if (set.warp_specialized && !options.warp_specialized) continue;
    Impl::Sel sel{&set, 0};
    for (auto fn : set.all())
      FP4MOE_CUDA_TRY(cudaFuncSetAttribute(reinterpret_cast<const void*>(fn),
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(set.smem_bytes)));
    int occ = 0;
    FP4MOE_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, reinterpret_cast<const void*>(set.gate_up),
                                                                  set.threads, set.smem_bytes));
    // A warp-specialized set that cannot be resident (a GPU with less shared memory or fewer registers than
    // planned) is skipped: the layer keeps the 2-blocks-per-SM kernels of that block_m.
    if (occ < 1 && set.warp_specialized) continue;
    if (occ < 1)
      return Status(StatusCode::kResourceExhausted,
                    "kernel config block_m=" + std::to_string(set.block_m) + " cannot be resident on this GPU");
    sel.blocks = occ * impl->sms;
    impl->sels.push_back(sel);
  }
  if (impl->sels.empty())
    return unsupported("this build has no MoE kernels for sm_" + std::to_string(cc) +
                       " (built for sm_90a and sm_120a)");
  const int64_t rsmem = kernels::routing_smem_bytes(shape.num_experts);
  FP4MOE_CUDA_TRY(cudaFuncSetAttribute(reinterpret_cast<const void*>(kernels::moe_routing_kernel),
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(rsmem)));

  const int64_t E = shape.num_experts, H = shape.hidden, I = shape.intermediate;
  impl->w13_bytes = static_cast<size_t>(E * 2 * I * H / 2);
  impl->s13_bytes = static_cast<size_t>(E * 2 * I * H / 16);
  impl->w2_bytes = static_cast<size_t>(E * H * I / 2);
  impl->s2_bytes = static_cast<size_t>(E * H * I / 16);
  const size_t alpha_bytes = static_cast<size_t>(align_up(E * 4));
  impl->total_bytes = impl->w13_bytes + impl->s13_bytes + impl->w2_bytes + impl->s2_bytes + 2 * alpha_bytes + kAlign;
  FP4MOE_CUDA_TRY(cudaMalloc(&impl->storage, impl->total_bytes));
  uint8_t* base = static_cast<uint8_t*>(impl->storage);
  impl->pw13 = base;
  impl->ps13 = impl->pw13 + impl->w13_bytes;
  impl->pw2 = impl->ps13 + impl->s13_bytes;
  impl->ps2 = impl->pw2 + impl->w2_bytes;
  impl->alpha13 = reinterpret_cast<float*>(impl->ps2 + impl->s2_bytes);
  impl->alpha2 = impl->alpha13 + alpha_bytes / 4;
  uint32_t* flags = reinterpret_cast<uint32_t*>(reinterpret_cast<uint8_t*>(impl->alpha2) + alpha_bytes);
  FP4MOE_CUDA_TRY(cudaMemsetAsync(flags, 0, 4, stream));

  auto prepack = [&](const Nvfp4ExpertWeights& w, int64_t n, int64_t k, kernels::RowInterleave il, uint8_t* dw,
                     uint8_t* ds, float* da) -> Status {
    kernels::PrepackParams p{};
    p.src_packed = static_cast<const uint8_t*>(w.packed);
    p.src_scales = static_cast<const uint8_t*>(w.scales);
    p.src_global = w.global_scale;
    p.global_is_multiplier = options.global_scale_kind == GlobalScaleKind::kDequantize;
    p.num_experts = E;
    p.n = n;
    p.k = k;
    p.interleave = il;
    p.dst_weights = dw;
    p.dst_scales = ds;
    p.dst_alpha = da;
    p.error_flags = flags;
    const int64_t words = E * n * k / 8, sbytes = E * n * k / 16;
    kernels::prepack_weights_kernel<<<static_cast<unsigned>(ceil_div(words, 256)), 256, 0, stream>>>(p);
    FP4MOE_CHECK_LAUNCH("prepack_weights_kernel");
    kernels::prepack_scales_kernel<<<static_cast<unsigned>(ceil_div(sbytes, 256)), 256, 0, stream>>>(p);
    FP4MOE_CHECK_LAUNCH("prepack_scales_kernel");
    kernels::prepack_alpha_kernel<<<static_cast<unsigned>(ceil_div(E, 256)), 256, 0, stream>>>(p);
    FP4MOE_CHECK_LAUNCH("prepack_alpha_kernel");
    return Status::ok();
  };
  const auto il = options.gate_up_order == GateUpOrder::kGateFirst ? kernels::RowInterleave::kGateFirst
                                                                  : kernels::RowInterleave::kUpFirst;
  FP4MOE_RETURN_IF_ERROR(prepack(w13, 2 * I, H, il, impl->pw13, impl->ps13, impl->alpha13));
  FP4MOE_RETURN_IF_ERROR(prepack(w2, H, I, kernels::RowInterleave::kNone, impl->pw2, impl->ps2, impl->alpha2));
  uint32_t h_flags = 0;
  FP4MOE_CUDA_TRY(cudaMemcpyAsync(&h_flags, flags, 4, cudaMemcpyDeviceToHost, stream));
  FP4MOE_CUDA_TRY(cudaStreamSynchronize(stream));
  if (h_flags & kernels::kErrBadScale)
    return invalid_argument("a block scale is negative or NaN (UE4M3 scales must be finite and >= 0)");
  if (h_flags & kernels::kErrBadGlobalScale)
    return invalid_argument("a per-expert global scale is not finite and > 0");
  // The tuning cache for this GPU, if there is one (a missing, corrupt or foreign cache keeps the heuristic).
  if (options.tuning_cache != "none") {
    int driver = 0, runtime = 0;
    FP4MOE_CUDA_TRY(cudaDriverGetVersion(&driver));
    FP4MOE_CUDA_TRY(cudaRuntimeGetVersion(&runtime));
    const TuningEnvironment env{prop.name, prop.multiProcessorCount, driver, runtime, FP4MOE_VERSION_STRING};
    const std::string path = options.tuning_cache.empty() ? default_tuning_cache_path() : options.tuning_cache;
    TuningCache cache;
    std::string note;
    FP4MOE_RETURN_IF_ERROR(TuningCache::load(path, env, &cache, &note));
    impl->adopt(cache, "tuning cache " + path);
    if (impl->tuned.empty() && !note.empty()) impl->tuning_source = "built-in heuristic (" + note + ")";
  }
  impl_ = std::move(impl);
  return Status::ok();
}

std::string MoeLayer::tuning_source() const { return impl_ ? impl_->tuning_source : "not initialised"; }

const MoeShape& MoeLayer::shape() const {
  static const MoeShape empty{};
  return impl_ ? impl_->shape : empty;
}
size_t MoeLayer::prepacked_bytes() const { return impl_ ? impl_->total_bytes : 0; }

size_t MoeLayer::use_tuning(const TuningCache& cache) {
  if (!impl_) return 0;
  impl_->tuning_source = "built-in heuristic";
  impl_->adopt(cache, "tuning cache given to use_tuning");
  return impl_->tuned.size();
}

int MoeLayer::block_m_for(int64_t num_tokens) const {
  if (!impl_) return 0;
  if (impl_->options.block_m) return impl_->options.block_m;
  if (const auto it = impl_->tuned.find(tokens_bucket(num_tokens)); it != impl_->tuned.end()) return it->second.block_m;
  // Mean rows per expert decides (measured on an H200 for GLM-5, docs/perf/moe-decode.md). Each chunk
  // dequantizes its expert's weights again and the dequantization is what limits the kernels, so the
  // chunk should hold nearly every expert's tokens (mean + 3 sd of a Poisson count), but no more: unused
  // 8-token MMA tiles are skipped, yet a larger tile has fewer resident warps. Where the 16-token tile is
  // warp-specialized (sm_90), it takes over from the 8-token one at a busiest expert of 12 and keeps it up to
  // 24: single-config runs on the H200 (seventh session) had the 8-token tile 3-5% ahead at T=128 (busiest
  // 10), level at 160 (11.7), and the 16-token one 8% ahead at 192 (13.3), 8-10% ahead of every other tile at
  // 256 (16.5), 2% ahead of the 32-token one at 384 (22.4) and 20% behind it at 512 (28). With the classic
  // 16-token tile (sm_120), the 8-token one runs up to a busiest expert of 15, though some experts then need
  // two chunks: the fastest at T = 96..192 (10-25% ahead of the classic 16-token tile), which wins at T = 256
  // (docs/perf/moe-decode.md, raw-2026-11-30c-block-m.log).
  const double mean = static_cast<double>(num_tokens) * impl_->shape.top_k / impl_->shape.num_experts;
  const double busiest = mean + 3.0 * std::sqrt(mean);
  const Impl::Sel* s16 = impl_->pick(16, num_tokens * impl_->shape.top_k);
  const bool ws16 = s16 != nullptr && s16->set->warp_specialized;
  const double to16 = ws16 ? 12.0 : 15.0, to32 = ws16 ? 24.0 : 20.0;
  const int want = busiest <= to16 ? 8 : busiest <= to32 ? 16 : busiest <= 40.0 ? 32 : 64;
  int best = 0;
  for (const auto& s : impl_->sels) {
    const int m = s.set->block_m;
    if (m >= want && (best == 0 || m < best)) best = m;
  }
  if (best == 0)
    for (const auto& s : impl_->sels) best = std::max(best, s.set->block_m);
  return best;
}

bool MoeLayer::runs_warp_specialized(int64_t num_tokens, int block_m) const {
  if (!impl_) return false;
  const Impl::Sel* s = impl_->pick(block_m ? block_m : block_m_for(num_tokens), num_tokens * impl_->shape.top_k);
  return s != nullptr && s->set->warp_specialized;
}

bool MoeLayer::fuses_routing(int64_t num_tokens, int block_m) const {
  static_assert(kMaxFusedRoutingPairs == kernels::kWarpRoutingMaxPairs, "one warp routes the fused pairs");
  // The fused kernels are built for the deeper 8-token config only, which pick() takes up to 64 pairs.
  static_assert(kDeepPipelineMaxPairs >= kMaxFusedRoutingPairs, "fused-routing pairs must take the deep config");
  if (!impl_) return false;
  const int64_t pairs = num_tokens * impl_->shape.top_k;
  return impl_->fuses(impl_->pick(block_m ? block_m : block_m_for(num_tokens), pairs), pairs);
}

int MoeLayer::down_k_splits_for(int64_t num_tokens) const {
  if (!impl_) return 0;
  if (const auto it = impl_->tuned.find(tokens_bucket(num_tokens)); it != impl_->tuned.end())
    return it->second.down_k_splits;
  const MoeShape& s = impl_->shape;
  const Impl::Sel* sel = impl_->pick(block_m_for(num_tokens), num_tokens * impl_->shape.top_k);
  if (num_tokens > kMaxSplitTokens || sel == nullptr || !down_k_splits_supported(s, 2)) return kDefaultDownKSplits;
  // Items of the down GEMM: chunks (about the experts with a token under uniform routing, or pairs / block_m)
  // x N tiles x splits, walked by `blocks` persistent blocks in rounds. Two splits when they fill the rounds
  // at least 10 points better (GLM-5 at T=1 on 132 SMs: 384 items in 2 rounds of 264 = 73% full, split 768 in
  // 3 rounds = 97%).
  const double pairs = static_cast<double>(num_tokens) * s.top_k;
  const double chunks = std::max(expected_active_experts(s, num_tokens), pairs / sel->set->block_m);
  const double tiles = chunks * static_cast<double>(s.hidden / sel->set->block_n);
  auto fill = [&](int splits) {
    const double items = tiles * splits;
    return items / (std::ceil(items / sel->blocks) * sel->blocks);
  };
  return fill(2) >= fill(1) + 0.1 ? 2 : 1;
}

std::string MoeLayer::describe(int64_t num_tokens) const {
  if (!impl_) return "MoeLayer (not initialised)";
  const Impl::Sel* s = impl_->pick(block_m_for(num_tokens), num_tokens * impl_->shape.top_k);
  const auto* k = s->set;
  return "MoeLayer " + shape_str(impl_->shape) + " sm_" + std::to_string(impl_->arch) + ": T=" +
         std::to_string(num_tokens) + " -> block " + std::to_string(k->block_m) + "x" + std::to_string(k->block_n) +
         "x" + std::to_string(k->block_k) + ", " + std::to_string(k->stages) + " stages, " +
         std::to_string(k->smem_bytes) + " B smem, " + std::to_string(s->blocks) + " persistent blocks, " +
         (k->warp_specialized ? "warp-specialized (1 producer + " + std::to_string(k->block_n / 64) + " consumer warpgroups), "
                              : std::string()) +
         "down K in " +
         std::to_string(down_k_splits_for(num_tokens)) + " split(s), " +
         (fuses_routing(num_tokens) ? "routing inside the GEMMs, " : "") +
         (impl_->options.finalize == FinalizeMode::kDeterministic ? "deterministic" : "atomic") + " finalize";
}

size_t MoeLayer::workspace_size(int64_t max_tokens, int down_k_splits) const {
  if (!impl_ || max_tokens < 0) return 0;
  // The deterministic finalize's partial rows: T * k * splits at its largest over T <= max_tokens, for the
  // caller's forced split count, the default, and every tuned bucket (bucket b serves T in (b/2, b]).
  int64_t rows = max_tokens * impl_->shape.top_k * std::max(kDefaultDownKSplits, down_k_splits);
  for (int64_t t = 1; t <= std::min(max_tokens, kMaxSplitTokens); ++t)  // the heuristic's splits at small T
    rows = std::max(rows, t * impl_->shape.top_k * down_k_splits_for(t));
  for (const auto& [bucket, c] : impl_->tuned)
    if (bucket / 2 < max_tokens) rows = std::max(rows, std::min(bucket, max_tokens) * impl_->shape.top_k * c.down_k_splits);
  return static_cast<size_t>(workspace_layout(impl_->shape, impl_->options.finalize, max_tokens, rows).total);
}

Status MoeLayer::can_implement(const MoeForwardArgs& a) const {
  if (!impl_) return invalid_argument("MoeLayer is not initialised (call init first)");
  if (a.num_tokens < 0) return invalid_argument("num_tokens must be >= 0, got " + std::to_string(a.num_tokens));
  if (a.num_tokens * impl_->shape.top_k > (int64_t{1} << 30))
    return invalid_argument("num_tokens * top_k must be below 2^30");
  if (a.block_m != 0 && impl_->pick(a.block_m) == nullptr)
    return invalid_argument("block_m " + std::to_string(a.block_m) + " is not a built-in config (8, 16, 32, 64)");
  if (a.down_k_splits != 0 && !down_k_splits_supported(impl_->shape, a.down_k_splits))
    return invalid_argument("down_k_splits must be 0 (the layer's choice) or 1, 2, 4 or 8 dividing intermediate / 256 = " +
                            std::to_string(impl_->shape.intermediate / 256) + ", got " + std::to_string(a.down_k_splits));
  {
    // The GEMMs count work items (chunks x N tiles) in int32: bound them for the smallest chunk (8 rows).
    const MoeShape& s = impl_->shape;
    const int64_t pairs = a.num_tokens * s.top_k;
    const int64_t chunks = pairs / 8 + std::min(s.num_experts, pairs) + 1;
    const int64_t tiles = std::max(2 * s.intermediate, s.hidden) / 128;
    const int splits = a.down_k_splits ? a.down_k_splits : down_k_splits_for(a.num_tokens);  // validated above
    if (chunks * tiles * splits >= (int64_t{1} << 31))
      return invalid_argument("num_tokens " + std::to_string(a.num_tokens) +
                              " makes more than 2^31 GEMM work items for this shape; split the batch");
  }
  if (a.num_tokens == 0) return Status::ok();
  FP4MOE_RETURN_IF_ERROR(detail::check_device_pointer(a.hidden, 16, "hidden"));
  FP4MOE_RETURN_IF_ERROR(detail::check_device_pointer(a.output, 16, "output"));
  FP4MOE_RETURN_IF_ERROR(detail::check_device_pointer(a.topk_ids, 4, "topk_ids"));
  FP4MOE_RETURN_IF_ERROR(detail::check_device_pointer(a.topk_weights, 4, "topk_weights"));
  return Status::ok();
}

Status MoeLayer::run(const MoeForwardArgs& a, void* workspace, size_t workspace_bytes, cudaStream_t stream,
                     unsigned phases) const {
  FP4MOE_RETURN_IF_ERROR(can_implement(a));
  const MoeShape& s = impl_->shape;
  const int splits = a.down_k_splits ? a.down_k_splits : down_k_splits_for(a.num_tokens);
  const WorkspaceLayout L = workspace_layout(s, impl_->options.finalize, a.num_tokens, a.num_tokens * s.top_k * splits);
  if (workspace_bytes < static_cast<size_t>(L.total))
    return Status(StatusCode::kResourceExhausted, "workspace holds " + std::to_string(workspace_bytes) +
                                                      " bytes; " + std::to_string(a.num_tokens) + " tokens need " +
                                                      std::to_string(L.total) + " (workspace_size" +
                                                      (a.down_k_splits ? ", with down_k_splits " + std::to_string(splits) : std::string()) + ")");
  FP4MOE_RETURN_IF_ERROR(detail::check_device_pointer(workspace, kAlign, "workspace"));
  if (a.num_tokens == 0) return Status::ok();
  int dev = -1;
  FP4MOE_CUDA_TRY(cudaGetDevice(&dev));
  if (dev != impl_->device)
    return invalid_argument("the current device (" + std::to_string(dev) + ") is not the one the layer was initialised on (" +
                            std::to_string(impl_->device) + ")");
  // The stream's device (cudaStreamGetDevice would invalidate a CUDA-graph capture, so not while capturing:
  // a capture on another device's stream fails at the first launch instead).
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  FP4MOE_CUDA_TRY(cudaStreamIsCapturing(stream, &capturing));
  if (capturing == cudaStreamCaptureStatusNone) {
    int stream_dev = -1;
    FP4MOE_CUDA_TRY(cudaStreamGetDevice(stream, &stream_dev));
    if (stream_dev != impl_->device)
      return invalid_argument("the stream belongs to device " + std::to_string(stream_dev) +
                              "; the layer's weights live on device " + std::to_string(impl_->device));
  }
  uint8_t* ws = static_cast<uint8_t*>(workspace);
  auto i32 = [&](int64_t off) { return reinterpret_cast<int32_t*>(ws + off); };
  const int32_t pairs = static_cast<int32_t>(a.num_tokens * s.top_k);
  const Impl::Sel* sel = impl_->pick(a.block_m ? a.block_m : block_m_for(a.num_tokens), pairs);
  const detail::MoeKernelSet& ks = *sel->set;
  // Each GEMM / finalize kernel is a programmatic dependent of the kernel this call enqueued just before it
  // (never of whatever the stream ran earlier: a phase run alone launches normally).
#if defined(FP4MOE_NO_GRIDDEP)  // kernels built without griddepcontrol (an A/B build): plain launches only
  const bool pdl_ok = false;
#else
  const bool pdl_ok = impl_->options.programmatic_launch && impl_->arch >= 90;
#endif
  const bool det = impl_->options.finalize == FinalizeMode::kDeterministic;
  float* partial = reinterpret_cast<float*>(ws + L.partial);
  // Fast mode accumulates with atomics into a zeroed buffer: zeroed first, so the kernels stay back to back.
  if ((phases & kPhaseDown) && !det)
    FP4MOE_CUDA_TRY(cudaMemsetAsync(partial, 0, static_cast<size_t>(a.num_tokens * s.hidden * 4), stream));

  // A few pairs: the GEMM kernels route them in registers (kernels/moe_routing_warp.cuh), gate_up's
  // block 0 writing the tables the finalize and workspace_view read; the routing kernel is not launched.
  const bool fused_routing = impl_->fuses(sel, pairs) && (phases & kPhaseRouting) && (phases & kPhaseGateUp);
  kernels::RoutingParams r{};
  {
    r.topk_ids = a.topk_ids;
    r.topk_weights = a.topk_weights;
    r.num_pairs = pairs;
    r.num_experts = static_cast<int32_t>(s.num_experts);
    r.block_m = ks.block_m;
    r.expert_offsets = i32(L.offsets);
    r.perm_pair = i32(L.perm);
    r.inv_perm = i32(L.inv);
    r.num_chunks = i32(L.nchunks);
    r.chunk_expert = i32(L.chunk_expert);
    r.chunk_start = i32(L.chunk_start);
    r.chunk_rows = i32(L.chunk_rows);
    r.error_flags = reinterpret_cast<uint32_t*>(ws + L.flags);
    r.dequant_mul = kernels::kDequantMul;
  }
  if ((phases & kPhaseRouting) && !fused_routing) {
    FP4MOE_CUDA_TRY(launch(kernels::moe_routing_kernel, 1, 1024, kernels::routing_smem_bytes(s.num_experts), stream,
                           false, r));
  }
  kernels::MoeGemmParams g{};
  g.perm_pair = i32(L.perm);
  g.top_k = static_cast<int32_t>(s.top_k);
  g.num_chunks = i32(L.nchunks);
  g.chunk_expert = i32(L.chunk_expert);
  g.chunk_start = i32(L.chunk_start);
  g.chunk_rows = i32(L.chunk_rows);
  g.topk_weights = a.topk_weights;
  kernels::MoeGemmParams gu = g;  // gate_up
  gu.weights = impl_->pw13;
  gu.scales = impl_->ps13;
  gu.alpha = impl_->alpha13;
  gu.n = static_cast<int32_t>(2 * s.intermediate);
  gu.k = static_cast<int32_t>(s.hidden);
  gu.x = static_cast<const __nv_bfloat16*>(a.hidden);
  gu.gather_tokens = true;
  gu.act_out = reinterpret_cast<__nv_bfloat16*>(ws + L.act);
  gu.k_splits = 1;  // SwiGLU needs the whole sum
  kernels::MoeGemmParams dn = g;  // down
  dn.weights = impl_->pw2;
  dn.scales = impl_->ps2;
  dn.alpha = impl_->alpha2;
  dn.n = static_cast<int32_t>(s.hidden);
  dn.k = static_cast<int32_t>(s.intermediate);
  dn.x = reinterpret_cast<const __nv_bfloat16*>(ws + L.act);
  dn.gather_tokens = false;
  dn.partial_out = partial;
  dn.k_splits = splits;
  dn.split_stride = a.num_tokens * s.top_k * s.hidden;
  if (phases & kPhaseGateUp)
    FP4MOE_CUDA_TRY(launch(fused_routing ? ks.gate_up_fused : ks.gate_up, sel->blocks, ks.threads, ks.smem_bytes,
                           stream, pdl_ok && (phases & kPhaseRouting) && !fused_routing, gu, r));
  if (phases & kPhaseDown) {
    const auto down = fused_routing ? (det ? ks.down_store_fused : ks.down_atomic_fused) : (det ? ks.down_store : ks.down_atomic);
    FP4MOE_CUDA_TRY(launch(down, sel->blocks, ks.threads, ks.smem_bytes, stream, pdl_ok && (phases & kPhaseGateUp), dn, r));
    auto* out = static_cast<__nv_bfloat16*>(a.output);
    if (det) {
      const int64_t n = a.num_tokens * (s.hidden / 4);
      FP4MOE_CUDA_TRY(launch(kernels::moe_finalize_gather_kernel, ceil_div(n, 256), 256, 0, stream, pdl_ok,
                             static_cast<const float*>(partial), static_cast<int32_t>(splits), dn.split_stride,
                             static_cast<const int32_t*>(i32(L.inv)), static_cast<int32_t>(a.num_tokens),
                             static_cast<int32_t>(s.top_k), static_cast<int32_t>(s.hidden), out));
    } else {
      const int64_t n = a.num_tokens * s.hidden;
      FP4MOE_CUDA_TRY(launch(kernels::moe_finalize_convert_kernel, ceil_div(n / 8, 256), 256, 0, stream, pdl_ok,
                             static_cast<const float*>(partial), n, out));
    }
  }
  return Status::ok();
}

MoeWorkspaceView MoeLayer::workspace_view(const void* workspace, int64_t num_tokens) const {
  MoeWorkspaceView v;
  if (!impl_ || workspace == nullptr) return v;
  const WorkspaceLayout L = workspace_layout(impl_->shape, impl_->options.finalize, num_tokens, 0);
  const uint8_t* ws = static_cast<const uint8_t*>(workspace);
  v.expert_offsets = reinterpret_cast<const int32_t*>(ws + L.offsets);
  v.perm_pair = reinterpret_cast<const int32_t*>(ws + L.perm);
  v.inv_perm = reinterpret_cast<const int32_t*>(ws + L.inv);
  v.act = ws + L.act;
  return v;
}

Status MoeLayer::check(const void* workspace, cudaStream_t stream) const {
  FP4MOE_RETURN_IF_ERROR(detail::check_device_pointer(workspace, kAlign, "workspace"));
  uint32_t flags = 0;
  FP4MOE_CUDA_TRY(cudaMemcpyAsync(&flags, workspace, 4, cudaMemcpyDeviceToHost, stream));
  FP4MOE_CUDA_TRY(cudaStreamSynchronize(stream));
  std::string msg;
  if (flags & kernels::kErrBadExpertId) msg += "topk_ids holds ids outside [0, num_experts); those pairs were skipped. ";
  if (flags & kernels::kErrBadRouterWeight) msg += "topk_weights holds non-finite weights; those pairs were skipped.";
  return msg.empty() ? Status::ok() : invalid_argument(msg);
}

}  // namespace fp4moe
