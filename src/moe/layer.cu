// MoeLayer (include/fp4moe/moe.h): init (device, resident configs, weights, tuning cache) and the launches of a
// forward pass from its plan.
// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "fp4moe/moe.h"
#include "fp4moe/planner.h"
#include "fp4moe/scale_layout.h"
#include "fp4moe/testing.h"
#include "fp4moe/tuning.h"
#include "fp4moe/version.h"
#include "kernels/moe_decode_direct.cuh"
#include "kernels/moe_finalize.cuh"
#include "kernels/moe_routing.cuh"
#include "src/cuda/cuda_util.h"
#include "src/util/no_throw.h"
#include "src/moe/kernel_registry.h"
#include "src/moe/prepack.h"
#include "src/moe/run_plan.h"
#include "src/moe/workspace.h"

namespace fp4moe {

namespace detail {
// The testing hooks' way in (fp4moe/testing.h).
struct MoeLayerAccess {
  static Status run(const MoeLayer& l, const MoeForwardArgs& a, void* w, size_t bytes, cudaStream_t s, unsigned phases);
  static testing::MoeWorkspaceView view(const MoeLayer& l, const void* w, int64_t num_tokens);
};
}  // namespace detail

namespace {

static_assert(kMaxDirectDecodePairs <= kernels::kWarpRoutingMaxPairs, "the direct decode kernels route in one warp");
static_assert(kMaxFusedRoutingPairs <= kernels::kBlockRoutingMaxPairs, "the GEMM kernels' routing tables hold the pairs");

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

// Launches `kernel` as clusters of `cluster` blocks (a multiple of the grid; PTX ISA "Cluster of Cooperative Thread
// Arrays": the cluster's blocks are resident together), with `pdl` as above.
template <class... KArgs, class... Args>
cudaError_t launch_clusters(void (*kernel)(KArgs...), int64_t grid, int cluster, int block, int64_t smem,
                            cudaStream_t stream, bool pdl, Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(grid));
  cfg.blockDim = dim3(static_cast<unsigned>(block));
  cfg.dynamicSmemBytes = static_cast<size_t>(smem);
  cfg.stream = stream;
  cudaLaunchAttribute attrs[2]{};
  attrs[0].id = cudaLaunchAttributeClusterDimension;
  attrs[0].val.clusterDim.x = static_cast<unsigned>(cluster);
  attrs[0].val.clusterDim.y = 1;
  attrs[0].val.clusterDim.z = 1;
  attrs[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attrs[1].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attrs;
  cfg.numAttrs = pdl ? 2 : 1;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

// The pointer rules of MoeForwardArgs (T > 0): set and aligned as the kernels load them.
Status check_arg_pointers(const MoeForwardArgs& a) {
  FP4MOE_RETURN_IF_ERROR(detail::check_device_pointer(a.hidden, 16, "hidden"));
  FP4MOE_RETURN_IF_ERROR(detail::check_device_pointer(a.output, 16, "output"));
  FP4MOE_RETURN_IF_ERROR(detail::check_device_pointer(a.topk_ids, 4, "topk_ids"));
  return detail::check_device_pointer(a.topk_weights, 4, "topk_weights");
}

}  // namespace

struct MoeLayer::Impl {
  MoeShape shape;
  MoeLayerOptions options;
  int arch = 0, sms = 0, device = -1;
  DirectKernelRegs direct_regs;
  std::vector<const detail::MoeKernelSet*> sets;  // the resident configs' kernels, parallel to `resident`
  std::vector<detail::ResidentConfig> resident;   // for this device's architecture
  std::map<int64_t, TunedChoice> tuned;           // tokens bucket -> block_m and down K splits, from a tuning cache
  std::string tuning_source = "built-in heuristic";
  detail::PreparedWeights weights;
  bool print_plans = false;  // FP4MOE_PRINT_PLANS
  mutable std::mutex printed_mutex;
  mutable std::set<std::string> printed;

  ~Impl() {
    if (weights.storage) cudaFree(weights.storage);
  }
  detail::PlanContext context() const {
    detail::PlanContext c;
    c.shape = &shape;
    c.options = &options;
    c.arch = arch;
    c.sms = sms;
    c.direct_regs = direct_regs;
    c.configs = &resident;
    c.tuned = &tuned;
    return c;
  }
  Status plan(const MoeForwardArgs& a, MoeRunPlan* p, detail::GemmChoice* choice) const {
    FP4MOE_RETURN_IF_ERROR(
        detail::make_run_plan(context(), a.num_tokens, a.block_m, a.down_k_splits, p, choice, a.gate_up_k_splits));
    if (print_plans) {
      const std::string line = "fp4moe: MoeLayer " + shape_text(shape) + " sm_" + std::to_string(arch) + ": " + p->to_string();
      std::lock_guard<std::mutex> lock(printed_mutex);
      if (printed.insert(line).second) std::fprintf(stderr, "%s\n", line.c_str());
    }
    return Status::ok();
  }
  // Takes the cache's choices for this shape and finalize mode that name a config resident on this GPU.
  void adopt(const TuningCache& cache, const std::string& source) {
    tuned.clear();
    const detail::PlanContext c = context();
    for (const auto& [bucket, choice] : cache.choices_for(shape, options.finalize))
      if (detail::GemmChoice g; detail::choose_configs(c, choice.block_m, 0, &g) &&
                                down_k_splits_supported(shape, choice.down_k_splits))
        tuned[bucket] = choice;
    if (!tuned.empty()) tuning_source = source + " (" + std::to_string(tuned.size()) + " token buckets)";
  }
  Status run(const MoeForwardArgs& a, void* workspace, size_t workspace_bytes, cudaStream_t stream, unsigned phases) const;
};

MoeLayer::MoeLayer() = default;
MoeLayer::~MoeLayer() = default;
MoeLayer::MoeLayer(MoeLayer&&) noexcept = default;
MoeLayer& MoeLayer::operator=(MoeLayer&&) noexcept = default;

Status MoeLayer::can_implement(const MoeShape& s, const MoeLayerOptions& o) { return detail::check_shape(s, o); }

Status MoeLayer::init(const MoeShape& shape, const MoeLayerOptions& options, const Nvfp4ExpertWeights& w13,
                      const Nvfp4ExpertWeights& w2, cudaStream_t stream) {
  return detail::no_throw([&]() -> Status {
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
    const char* print = std::getenv("FP4MOE_PRINT_PLANS");
    impl->print_plans = print != nullptr && *print != '\0' && std::string(print) != "0";
    FP4MOE_CUDA_TRY(cudaGetDevice(&impl->device));
    cudaDeviceProp prop{};
    FP4MOE_CUDA_TRY(cudaGetDeviceProperties(&prop, impl->device));
    const int cc = prop.major * 10 + prop.minor;
    impl->arch = kernel_arch_family(cc);
    impl->sms = prop.multiProcessorCount;
    // The sm_120 configs on an sm_90 device (MoeLayerOptions::kernel_arch), one block per SM as on the 100 KB parts.
    const bool emulate = options.kernel_arch != 0 && options.kernel_arch != impl->arch;
    if (emulate) {
      if (!(options.kernel_arch == 120 && impl->arch == 90 && detail::sm120_configs_run_on_sm90()))
        return unsupported("kernel_arch " + std::to_string(options.kernel_arch) + " cannot run on sm_" + std::to_string(cc) +
                           " in this build (only the sm_120 configs, on sm_90, in a build with FP4MOE_SM120_ON_SM90)");
      impl->arch = options.kernel_arch;
    }
    for (const auto& set : detail::moe_kernel_sets()) {
      if (set.config.cc != impl->arch) continue;
      if (set.config.tile.family == KernelFamily::kWarpSpecialized && !options.warp_specialized) continue;
      for (auto fn : set.all())
        FP4MOE_CUDA_TRY(cudaFuncSetAttribute(reinterpret_cast<const void*>(fn), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(set.config.smem_bytes)));
      if (set.cluster_decode != nullptr)
        FP4MOE_CUDA_TRY(cudaFuncSetAttribute(reinterpret_cast<const void*>(set.cluster_decode),
                                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(set.config.smem_bytes)));
      int occ = 0;
      FP4MOE_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, reinterpret_cast<const void*>(set.gate_up),
                                                                    set.config.threads, set.config.smem_bytes));
      // A warp-specialized set that cannot be resident (a GPU with less shared memory or fewer registers than
      // planned) is skipped: the layer keeps the multistage kernels of that block_m.
      if (occ < 1 && set.config.tile.family == KernelFamily::kWarpSpecialized) continue;
      if (occ < 1)
        return Status(StatusCode::kResourceExhausted, "kernel config block_m=" + std::to_string(set.config.tile.block_m) +
                                                          " cannot be resident on this GPU");
      if (emulate) occ = std::min(occ, set.config.blocks_per_sm);
      // The cluster decode kernel's clusters of this shape's size that are resident at once (they stay inside a GPC).
      int clusters = 0;
      const int cluster_blocks = set.cluster_decode == nullptr
                                     ? 0
                                     : detail::cluster_decode_blocks(shape, set.config.tile.block_n,
                                                                     set.config.tile.block_k, set.config.stages);
      if (cluster_blocks > 0 && !emulate && options.cluster_decode) {
        cudaLaunchConfig_t cfg{};
        cfg.gridDim = dim3(static_cast<unsigned>(cluster_blocks));
        cfg.blockDim = dim3(static_cast<unsigned>(set.config.threads));
        cfg.dynamicSmemBytes = static_cast<size_t>(set.config.smem_bytes);
        cudaLaunchAttribute attr{};
        attr.id = cudaLaunchAttributeClusterDimension;
        attr.val.clusterDim.x = static_cast<unsigned>(cluster_blocks);
        attr.val.clusterDim.y = attr.val.clusterDim.z = 1;
        cfg.attrs = &attr;
        cfg.numAttrs = 1;
        // A device or driver that cannot say (MIG, MPS, no cluster support) gets none: the tiled kernels, not a failed init.
        if (cudaOccupancyMaxActiveClusters(&clusters, reinterpret_cast<const void*>(set.cluster_decode), &cfg) != cudaSuccess) {
          clusters = 0;
          (void)cudaGetLastError();  // (the query's error is not sticky; clear it for the caller's next check)
        }
      }
      impl->sets.push_back(&set);
      impl->resident.push_back(detail::ResidentConfig{set.config, occ * impl->sms, clusters});
    }
    if (impl->resident.empty()) {
      std::string built;
      for (const auto& t : built_cuda_targets()) built += (built.empty() ? "sm_" : ", sm_") + t;
      return unsupported("this build has no MoE kernels for sm_" + std::to_string(cc) + " (built for " +
                         (built.empty() ? std::string("no GPU arch") : built) + ")");
    }
    for (const void* k : {reinterpret_cast<const void*>(kernels::moe_direct_gate_up_kernel<false>),
                          reinterpret_cast<const void*>(kernels::moe_direct_gate_up_kernel<true>),
                          reinterpret_cast<const void*>(kernels::moe_direct_down_kernel<false>),
                          reinterpret_cast<const void*>(kernels::moe_direct_down_kernel<true>),
                          reinterpret_cast<const void*>(kernels::moe_direct_down_kernel<false, true>),
                          reinterpret_cast<const void*>(kernels::moe_direct_down_ring_kernel)})
      FP4MOE_CUDA_TRY(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kDirectMaxSmem)));
    // The direct kernels' registers as built, for the plan's residency arithmetic (direct_down_stages_weights).
    {
      cudaFuncAttributes fa{};
      FP4MOE_CUDA_TRY(cudaFuncGetAttributes(&fa, kernels::moe_direct_gate_up_kernel<false>));
      impl->direct_regs.gate_up = fa.numRegs;
      FP4MOE_CUDA_TRY(cudaFuncGetAttributes(&fa, kernels::moe_direct_gate_up_kernel<true>));
      impl->direct_regs.gate_up_loop = fa.numRegs;
      FP4MOE_CUDA_TRY(cudaFuncGetAttributes(&fa, kernels::moe_direct_down_kernel<true>));
      impl->direct_regs.down_staged = fa.numRegs;
    }
    const int64_t rsmem = kernels::routing_smem_bytes(shape.num_experts);
    for (const void* k : {reinterpret_cast<const void*>(kernels::moe_routing_kernel),
                          reinterpret_cast<const void*>(kernels::moe_routing_place_kernel)})
      FP4MOE_CUDA_TRY(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(rsmem)));
    FP4MOE_RETURN_IF_ERROR(detail::prepare_weights(shape, options, w13, w2, stream, &impl->weights));
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
  });
}

std::string MoeLayer::tuning_source() const { return impl_ ? impl_->tuning_source : "not initialised"; }

const MoeShape& MoeLayer::shape() const {
  static const MoeShape empty{};
  return impl_ ? impl_->shape : empty;
}
size_t MoeLayer::prepacked_bytes() const { return impl_ ? impl_->weights.total_bytes : 0; }

size_t MoeLayer::use_tuning(const TuningCache& cache) {
  if (!impl_) return 0;
  impl_->tuning_source = "built-in heuristic";
  impl_->adopt(cache, "tuning cache given to use_tuning");
  return impl_->tuned.size();
}

Status MoeLayer::plan(const MoeForwardArgs& args, MoeRunPlan* out) const {
  if (!impl_) return invalid_argument("MoeLayer is not initialised (call init first)");
  if (out == nullptr) return invalid_argument("plan: output is null");
  return impl_->plan(args, out, nullptr);
}

std::string MoeLayer::describe(int64_t num_tokens) const {
  if (!impl_) return "MoeLayer (not initialised)";
  MoeForwardArgs a;
  a.num_tokens = num_tokens;
  MoeRunPlan p;
  const Status s = impl_->plan(a, &p, nullptr);
  return "MoeLayer " + shape_text(impl_->shape) + " sm_" + std::to_string(impl_->arch) + ": " +
         (s.is_ok() ? p.to_string() : "no plan for T=" + std::to_string(num_tokens) + ": " + s.message());
}

size_t MoeLayer::workspace_size(int64_t max_tokens, int down_k_splits, int gate_up_k_splits) const {
  if (!impl_ || max_tokens < 0 ||
      !detail::check_tokens(impl_->shape, max_tokens, std::max(down_k_splits, gate_up_k_splits)).is_ok())
    return 0;
  const detail::SplitBuffers b = detail::max_split_buffers(impl_->context(), max_tokens, down_k_splits, gate_up_k_splits);
  return static_cast<size_t>(
      detail::workspace_layout(impl_->shape, impl_->options.finalize, max_tokens, b.partial_rows, b.gate_up_floats).total);
}

size_t MoeLayer::workspace_size(const MoeForwardArgs& a) const {
  MoeRunPlan rp;
  if (!impl_ || !impl_->plan(a, &rp, nullptr).is_ok()) return 0;
  return static_cast<size_t>(detail::call_workspace_layout(impl_->shape, impl_->options.finalize, rp).total);
}

Status MoeLayer::can_implement(const MoeForwardArgs& a) const {
  if (!impl_) return invalid_argument("MoeLayer is not initialised (call init first)");
  MoeRunPlan p;
  FP4MOE_RETURN_IF_ERROR(impl_->plan(a, &p, nullptr));
  return a.num_tokens == 0 ? Status::ok() : check_arg_pointers(a);
}

Status MoeLayer::run(const MoeForwardArgs& a, void* workspace, size_t workspace_bytes, cudaStream_t stream) const {
  return detail::no_throw([&]() -> Status {
    if (!impl_) return invalid_argument("MoeLayer is not initialised (call init first)");
    return impl_->run(a, workspace, workspace_bytes, stream, testing::kPhaseAll);
  });
}

Status MoeLayer::Impl::run(const MoeForwardArgs& a, void* workspace, size_t workspace_bytes, cudaStream_t stream,
                           unsigned phases) const {
  using testing::kPhaseDown;
  using testing::kPhaseGateUp;
  using testing::kPhaseRouting;
  // The call's plan, made once: everything below reads it.
  MoeRunPlan rp;
  detail::GemmChoice choice;
  FP4MOE_RETURN_IF_ERROR(plan(a, &rp, &choice));
  if (a.num_tokens > 0) FP4MOE_RETURN_IF_ERROR(check_arg_pointers(a));
  const MoeShape& s = shape;
  const int splits = rp.down_k_splits, gu_splits = rp.gate_up_k_splits;
  const detail::WorkspaceLayout L = detail::call_workspace_layout(s, options.finalize, rp);
  if (workspace_bytes < static_cast<size_t>(L.total))
    return Status(StatusCode::kResourceExhausted, "workspace holds " + std::to_string(workspace_bytes) +
                                                      " bytes; " + std::to_string(a.num_tokens) + " tokens need " +
                                                      std::to_string(L.total) + " (workspace_size" +
                                                      (a.down_k_splits ? ", with down_k_splits " + std::to_string(splits) : std::string()) +
                                                      (a.gate_up_k_splits ? ", with gate_up_k_splits " + std::to_string(gu_splits) : std::string()) + ")");
  FP4MOE_RETURN_IF_ERROR(detail::check_device_pointer(workspace, detail::kWorkspaceAlign, "workspace"));
  if (a.num_tokens == 0) return Status::ok();
  int dev = -1;
  FP4MOE_CUDA_TRY(cudaGetDevice(&dev));
  if (dev != device)
    return invalid_argument("the current device (" + std::to_string(dev) + ") is not the one the layer was initialised on (" +
                            std::to_string(device) + ")");
  FP4MOE_RETURN_IF_ERROR(detail::check_stream_device(stream, device));
  uint8_t* wsp = static_cast<uint8_t*>(workspace);
  auto i32 = [&](int64_t off) { return reinterpret_cast<int32_t*>(wsp + off); };
  const int32_t pairs = static_cast<int32_t>(a.num_tokens * s.top_k);
  const detail::MoeKernelSet& ks_gate_up = *sets[static_cast<size_t>(choice.gate_up)];
  const detail::MoeKernelSet& ks_down = *sets[static_cast<size_t>(choice.down)];
  // Each kernel is a programmatic dependent of the kernel enqueued just before it: the pass's first one (routing,
  // gate_up with its routing inside, or the direct gate_up) of whatever kernel the stream ran before the call -- the
  // router that wrote the ids, the previous layer -- so its blocks are resident as that one drains; it waits for it
  // (griddepcontrol.wait) before it reads or writes anything. Not after a memset of this call (then the first kernel
  // launches normally), and not a down kernel run alone (it reads the routing before its wait).
#if defined(FP4MOE_NO_GRIDDEP)  // kernels built without griddepcontrol (an A/B build): plain launches only
  const bool pdl_ok = false;
#else
  const bool pdl_ok = rp.programmatic_launch;
#endif
  const bool det = finalize_is_deterministic(options.finalize);
  const bool bf16_partials = options.finalize == FinalizeMode::kDeterministicBf16;

  kernels::MoeGemmExtras ex{};
  {
    kernels::RoutingParams& r = ex.routing;
    r.topk_ids = a.topk_ids;
    r.topk_weights = a.topk_weights;
    r.num_pairs = pairs;
    r.num_experts = static_cast<int32_t>(s.num_experts);
    r.block_m = rp.direct_decode ? kDirectChunkRows : rp.block_m;
    r.first_expert = static_cast<int32_t>(s.first_expert);
    r.expert_offsets = i32(L.offsets);
    r.perm_pair = i32(L.perm);
    r.inv_perm = i32(L.inv);
    r.num_chunks = i32(L.nchunks);
    r.chunk_expert = i32(L.chunk_expert);
    r.chunk_start = i32(L.chunk_start);
    r.chunk_rows = i32(L.chunk_rows);
    r.error_flags = reinterpret_cast<uint32_t*>(wsp + L.flags);
    ex.dequant_mul = kernels::kDequantMul;
    ex.num_global_experts = static_cast<int32_t>(s.global_experts());
  }

  // The direct kernels' parameters (the direct path's two, and the ring down kernel after the tiled gate_up).
  auto direct_params = [&] {
    kernels::DirectDecodeParams d{};
    d.ex = ex;
    d.w13 = weights.w13;
    d.s13 = weights.s13;
    d.alpha13 = weights.alpha13;
    d.w2 = weights.w2;
    d.s2 = weights.s2;
    d.alpha2 = weights.alpha2;
    d.hidden = static_cast<const __nv_bfloat16*>(a.hidden);
    d.act = reinterpret_cast<__nv_bfloat16*>(wsp + L.act);
    d.out = static_cast<__nv_bfloat16*>(a.output);
    d.num_tokens = static_cast<int32_t>(a.num_tokens);
    d.hidden_dim = static_cast<int32_t>(s.hidden);
    d.intermediate = static_cast<int32_t>(s.intermediate);
    d.top_k = static_cast<int32_t>(s.top_k);
    d.bf16_terms = bf16_partials;
    return d;
  };
  // The direct decode path (kernels/moe_decode_direct.cuh): gate_up, then down with the finalize, each routing the
  // pairs itself (gate_up's block 0 writes the tables). A routing phase alone runs the routing kernel below.
  if (rp.direct_decode && (phases & (kPhaseGateUp | kPhaseDown))) {
    kernels::DirectDecodeParams d = direct_params();
    d.gate_up_chunk_blocks = rp.direct.gate_up_chunk_blocks;
    d.down_staged_rows = rp.direct.down_staged_rows;
    const MoeDirectPlan& dp = rp.direct;
    auto* gate_up_kernel = direct_gate_up_loops(dp.gate_up_chunk_blocks, pairs) ? kernels::moe_direct_gate_up_kernel<true>
                                                                                : kernels::moe_direct_gate_up_kernel<false>;
    auto* down_kernel = dp.down_stages_weights                ? kernels::moe_direct_down_kernel<true>
                        : dp.down_staged_rows < pairs ? kernels::moe_direct_down_kernel<false, true>
                                                      : kernels::moe_direct_down_kernel<false>;
    if (phases & kPhaseGateUp)
      FP4MOE_CUDA_TRY(launch(gate_up_kernel, dp.gate_up_blocks, dp.threads, dp.gate_up_smem_bytes, stream, pdl_ok, d));
    if (phases & kPhaseDown)
      FP4MOE_CUDA_TRY(launch(down_kernel, dp.down_blocks, dp.threads, dp.down_smem_bytes, stream,
                             pdl_ok && (phases & kPhaseGateUp), d));
    return Status::ok();
  }
  float* partial = reinterpret_cast<float*>(wsp + L.partial);
  // Fast mode accumulates with atomics into a zeroed buffer: zeroed first, so the kernels stay back to back.
  bool memset_first = false;  // a memset node precedes this call's first kernel (which then launches normally)
  if ((phases & kPhaseDown) && !det) {
    FP4MOE_CUDA_TRY(cudaMemsetAsync(partial, 0, static_cast<size_t>(a.num_tokens * s.hidden * 4), stream));
    memset_first = true;
  }

  const bool fused_routing = rp.fused_routing && (phases & kPhaseRouting) && (phases & kPhaseGateUp);
  // The cluster decode kernel: both GEMMs of the whole pass (routing inside), then the finalize below; its K halves
  // of gate_up meet at a cluster barrier, without the split kernels' counters.
  const bool cluster = rp.cluster_decode && fused_routing && (phases & kPhaseDown) && ks_gate_up.cluster_decode != nullptr;
  // A cluster plan run phase by phase (the testing hooks, the bench's per-phase times) runs its config's tiled kernels:
  // gate_up's K in the plan's two halves where the config has split-K kernels, else whole (sm_90's 3-block 8-token
  // config: the layer's own plans split only on the deep one).
  const int gu_launch_splits = rp.cluster_decode && !cluster && ks_gate_up.gate_up_split == nullptr ? 1 : gu_splits;
  // gate_up with split K: its arrival counters (kernels/moe_gemm_epilogue.cuh, gate_up_split_fixup) start at zero
  // each call, whatever the workspace held; a memset node, like the atomic finalize's, before the first kernel.
  float* gu_split = reinterpret_cast<float*>(wsp + L.gu_split);
  // gate_up's tail kernel (MoeRunPlan::gate_up_tail_pieces; the plan takes it only after the routing kernel, K whole,
  // no cluster kernel): its pieces use the split kernels' buffers and counters. (A phase run without the routing phase
  // has the tables in the workspace, as the routing kernel leaves them.)
  const bool tail = rp.gate_up_tail_pieces > 0 && (phases & kPhaseGateUp);
  if (tail && ks_gate_up.gate_up_tail == nullptr)
    return Status(StatusCode::kInternal, "the plan has gate_up's tail kernel, which its config does not have");
  if ((phases & kPhaseGateUp) && (gu_launch_splits > 1 || tail) && !cluster) {
    FP4MOE_CUDA_TRY(cudaMemsetAsync(wsp + L.gu_counters, 0, static_cast<size_t>(L.gu_counter_bytes), stream));
    memset_first = true;
  }
  const bool first_pdl = pdl_ok && !memset_first;

  // A few pairs: the GEMM kernels route them themselves (kernels/moe_routing_warp.cuh, block_routing), gate_up's
  // block 0 writing the tables the finalize and testing::workspace_view read; the routing kernel is not launched.
  const bool routing_kernel = (phases & kPhaseRouting) && !fused_routing;
  if (routing_kernel) {
    if (kernels::routing_multi_block(pairs)) {  // many pairs: one block per range (kernels/moe_routing.cuh)
      const int64_t blocks = kernels::routing_blocks(pairs);
      int32_t* counts = i32(L.route_counts);
      auto* block_flags = reinterpret_cast<uint32_t*>(counts + blocks * s.num_experts);
      FP4MOE_CUDA_TRY(launch(kernels::moe_routing_count_kernel, blocks, 1024,
                             kernels::routing_count_smem_bytes(s.num_experts), stream, first_pdl, ex.routing,
                             ex.num_global_experts, counts, block_flags));
      FP4MOE_CUDA_TRY(launch(kernels::moe_routing_place_kernel, blocks, 1024, kernels::routing_smem_bytes(s.num_experts),
                             stream, pdl_ok, ex.routing, ex.num_global_experts, static_cast<const int32_t*>(counts),
                             static_cast<const uint32_t*>(block_flags)));
    } else {
      FP4MOE_CUDA_TRY(launch(kernels::moe_routing_kernel, 1, 1024, kernels::routing_smem_bytes(s.num_experts), stream,
                             first_pdl, ex.routing, ex.num_global_experts));
    }
  }
  // (The chunk-table pointers also go in MoeGemmParams: kernels/moe_gemm_params.cuh says why.)
  kernels::MoeGemmParams g{};
  g.perm_pair = i32(L.perm);
  g.top_k = static_cast<int32_t>(s.top_k);
  g.num_chunks = i32(L.nchunks);
  g.chunk_expert = i32(L.chunk_expert);
  g.chunk_start = i32(L.chunk_start);
  g.chunk_rows = i32(L.chunk_rows);
  g.topk_weights = a.topk_weights;
  kernels::MoeGemmParams gu = g;  // gate_up
  gu.weights = weights.w13;
  gu.scales = weights.s13;
  gu.alpha = weights.alpha13;
  gu.n = static_cast<int32_t>(2 * s.intermediate);
  gu.k = static_cast<int32_t>(s.hidden);
  gu.x = static_cast<const __nv_bfloat16*>(a.hidden);
  gu.gather_tokens = true;
  gu.act_out = reinterpret_cast<__nv_bfloat16*>(wsp + L.act);
  // K splits: the SwiGLU needs the whole sum, which the block finishing a tile's last K range adds up.
  gu.k_splits = gu_launch_splits;
  gu.partial_out = gu_split;
  gu.split_stride = a.num_tokens * s.top_k * 2 * s.intermediate;
  kernels::MoeGemmParams dn = g;  // down
  dn.weights = weights.w2;
  dn.scales = weights.s2;
  dn.alpha = weights.alpha2;
  dn.n = static_cast<int32_t>(s.hidden);
  dn.k = static_cast<int32_t>(s.intermediate);
  dn.x = reinterpret_cast<const __nv_bfloat16*>(wsp + L.act);
  dn.gather_tokens = false;
  dn.partial_out = partial;
  dn.k_splits = splits;
  dn.split_stride = a.num_tokens * s.top_k * s.hidden;
  if (cluster)
    FP4MOE_CUDA_TRY(launch_clusters(ks_gate_up.cluster_decode, int64_t{rp.clusters} * rp.cluster_blocks, rp.cluster_blocks,
                                    rp.gate_up.threads, rp.gate_up.smem_bytes, stream, first_pdl, gu, dn, ex));
  if ((phases & kPhaseGateUp) && !cluster) {
    kernels::MoeGemmExtras ex_gu = ex;
    if (tail) ex_gu.tail_grid = static_cast<int32_t>(rp.gate_up.grid);  // (the whole rounds only)
    FP4MOE_CUDA_TRY(launch(gu_launch_splits > 1 ? (fused_routing ? ks_gate_up.gate_up_split_fused : ks_gate_up.gate_up_split)
                                         : (fused_routing ? ks_gate_up.gate_up_fused : ks_gate_up.gate_up),
                           rp.gate_up.grid,
                           rp.gate_up.threads, rp.gate_up.smem_bytes, stream,
                           routing_kernel ? pdl_ok : first_pdl, gu, ex_gu));
    if (tail) {
      // Fewer than grid tiles are left to it: a block per piece, the blocks past the call's pieces leaving at once.
      kernels::MoeGemmParams gt = gu;
      gt.k_splits = rp.gate_up_tail_pieces;
      FP4MOE_CUDA_TRY(launch(ks_gate_up.gate_up_tail, int64_t{rp.gate_up.grid} * rp.gate_up_tail_pieces,
                             rp.gate_up.threads, rp.gate_up.smem_bytes, stream, pdl_ok, gt, ex_gu));
    }
  }
  // Down and the finalize as one kernel after the tiled gate_up (kernels/moe_decode_direct.cuh): it routes the pairs
  // itself, in chunks of the direct path's size, and reads the SwiGLU rows gate_up left in the workspace.
  if ((phases & kPhaseDown) && rp.direct_down) {
    kernels::DirectDecodeParams d = direct_params();
    d.ex.routing.block_m = kDirectChunkRows;
    FP4MOE_CUDA_TRY(launch(kernels::moe_direct_down_ring_kernel, rp.direct_down_blocks, kDirectThreads,
                           rp.direct_down_smem_bytes, stream, pdl_ok && (phases & kPhaseGateUp), d));
    return Status::ok();
  }
  if (phases & kPhaseDown) {
    const detail::MoeKernelSet& k = ks_down;
    const auto store = fused_routing ? (bf16_partials ? k.down_store_bf16_fused : k.down_store_fused)
                                     : (bf16_partials ? k.down_store_bf16 : k.down_store);
    const auto down = det ? store : (fused_routing ? k.down_atomic_fused : k.down_atomic);
    if (!cluster)
      FP4MOE_CUDA_TRY(launch(down, rp.down.grid, rp.down.threads, rp.down.smem_bytes, stream,
                             pdl_ok && (phases & kPhaseGateUp), dn, ex));
    auto* out = static_cast<__nv_bfloat16*>(a.output);
    if (det) {
      // (On sm_90's kernels after a TP shard's prefill tile, plain unless the options say otherwise:
      // MoeRunPlan::programmatic_finalize.)
      // The fixed-order sum over the partial type P (fp32, or bf16 partials): kFinalizeCols<P> columns per thread.
      auto gather = [&](auto p_type) {
        using P = decltype(p_type);
        const int64_t n = a.num_tokens * (s.hidden / kernels::kFinalizeCols<P>);
        return launch(kernels::moe_finalize_gather_kernel<P>, ceil_div(n, kernels::kFinalizeThreads),
                      kernels::kFinalizeThreads, 0, stream, pdl_ok && rp.programmatic_finalize,
                      reinterpret_cast<const P*>(partial),
                      static_cast<int32_t>(splits), dn.split_stride, static_cast<const int32_t*>(i32(L.inv)),
                      static_cast<int32_t>(a.num_tokens), static_cast<int32_t>(s.top_k), static_cast<int32_t>(s.hidden),
                      out);
      };
      FP4MOE_CUDA_TRY(bf16_partials ? gather(__nv_bfloat16{}) : gather(float{}));
    } else {
      const int64_t n = a.num_tokens * s.hidden;
      FP4MOE_CUDA_TRY(launch(kernels::moe_finalize_convert_kernel, ceil_div(n / 8, 256), 256, 0, stream, pdl_ok,
                             static_cast<const float*>(partial), n, out));
    }
  }
  return Status::ok();
}

Status MoeLayer::check(const void* workspace, cudaStream_t stream) const {
  FP4MOE_RETURN_IF_ERROR(detail::check_device_pointer(workspace, detail::kWorkspaceAlign, "workspace"));
  uint32_t flags = 0;
  FP4MOE_RETURN_IF_ERROR(detail::read_error_word(static_cast<const uint32_t*>(workspace), stream, &flags));
  std::string msg;
  if (flags & kernels::kErrBadExpertId)
    msg += "topk_ids holds ids outside [0, " + std::to_string(impl_ ? impl_->shape.global_experts() : 0) +
           ") (the model's experts); those pairs were skipped. ";
  if (flags & kernels::kErrBadRouterWeight) msg += "topk_weights holds non-finite weights; those pairs were skipped.";
  return msg.empty() ? Status::ok() : invalid_argument(msg);
}

Status detail::MoeLayerAccess::run(const MoeLayer& l, const MoeForwardArgs& a, void* w, size_t bytes, cudaStream_t s,
                                   unsigned phases) {
  if (!l.impl_) return invalid_argument("MoeLayer is not initialised (call init first)");
  if (phases == 0 || (phases & ~unsigned{testing::kPhaseAll}) != 0)
    return invalid_argument("phases must be a non-empty combination of kPhaseRouting, kPhaseGateUp and kPhaseDown");
  return l.impl_->run(a, w, bytes, s, phases);
}

testing::MoeWorkspaceView detail::MoeLayerAccess::view(const MoeLayer& l, const void* w, int64_t num_tokens) {
  testing::MoeWorkspaceView v;
  if (!l.impl_ || w == nullptr || num_tokens < 0) return v;
  const detail::WorkspaceLayout L = detail::workspace_layout(l.impl_->shape, l.impl_->options.finalize, num_tokens, 0);
  const uint8_t* base = static_cast<const uint8_t*>(w);
  v.expert_offsets = reinterpret_cast<const int32_t*>(base + L.offsets);
  v.perm_pair = reinterpret_cast<const int32_t*>(base + L.perm);
  v.inv_perm = reinterpret_cast<const int32_t*>(base + L.inv);
  v.act = base + L.act;
  MoeForwardArgs a;
  a.num_tokens = num_tokens;
  MoeRunPlan rp;
  if (l.plan(a, &rp).is_ok()) {  // (the split buffer sits past the finalize's, whose size the plan sets)
    const detail::WorkspaceLayout C = detail::call_workspace_layout(l.impl_->shape, l.impl_->options.finalize, rp);
    v.gate_up_partials = reinterpret_cast<const float*>(base + C.gu_split);
    v.gate_up_partial_floats = (C.gu_counters - C.gu_split) / 4;
  }
  return v;
}

namespace testing {
Status run_phases(const MoeLayer& layer, const MoeForwardArgs& args, void* workspace, size_t workspace_bytes,
                  cudaStream_t stream, unsigned phases) {
  return detail::MoeLayerAccess::run(layer, args, workspace, workspace_bytes, stream, phases);
}
MoeWorkspaceView workspace_view(const MoeLayer& layer, const void* workspace, int64_t num_tokens) {
  return detail::MoeLayerAccess::view(layer, workspace, num_tokens);
}
}  // namespace testing

}  // namespace fp4moe
