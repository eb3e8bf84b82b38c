// The MoE layer benchmark harness (see moe_bench.h).
// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "fp4moe/planner.h"
#include "fp4moe/testing.h"
#include "random_fill.cuh"
#include "bench/bench_markdown.h"
#include "bench/cublas_loader.h"
#include "bench/moe_bench.h"
#include "bench/warm_up.h"

namespace fp4moe::bench {
namespace {

// A device allocation freed on scope exit.
struct DevBuf {
  void* p = nullptr;
  ~DevBuf() { if (p) cudaFree(p); }
  Status alloc(size_t bytes) {
    BENCH_TRY(cudaMalloc(&p, bytes ? bytes : 16));
    return Status::ok();
  }
};

Status fill(void* p, int64_t n, uint64_t seed, bool scales) {
  devdata::fill_random_bytes_kernel<><<<static_cast<unsigned>((n + 255) / 256), 256>>>(static_cast<uint8_t*>(p), n, seed, scales);
  BENCH_TRY(cudaGetLastError());
  return Status::ok();
}

// The plan `l` makes for T tokens at block_m `bm` and down K splits `splits` (0: its own choice); a default plan
// (block_m 0) where it has none.
MoeRunPlan plan_of(const MoeLayer& l, int64_t T, int bm, int splits = 0) {
  MoeForwardArgs a;
  a.num_tokens = T;
  a.block_m = bm;
  a.down_k_splits = splits;
  MoeRunPlan p;
  if (!l.plan(a, &p).is_ok()) p = MoeRunPlan{};
  return p;
}

// k distinct experts per token: uniform, or Zipf-distributed popularity over a random ranking of experts.
// Ids are the model's (expert parallelism: this shard's experts are [first_expert, first_expert + E) of them).
std::vector<int32_t> make_routing(const MoeBenchOptions& o, int64_t T, std::mt19937_64& rng) {
  const int64_t E = o.shape.global_experts(), K = o.shape.top_k;
  std::vector<double> cdf;
  std::vector<int32_t> rank(static_cast<size_t>(E));
  for (int32_t e = 0; e < E; ++e) rank[static_cast<size_t>(e)] = e;
  if (o.routing == "zipf") {
    std::shuffle(rank.begin(), rank.end(), rng);
    double sum = 0;
    for (int64_t r = 0; r < E; ++r) cdf.push_back(sum += 1.0 / std::pow(static_cast<double>(r + 1), o.zipf_s));
    for (double& c : cdf) c /= sum;
  }
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<int32_t> ids(static_cast<size_t>(T * K));
  for (int64_t t = 0; t < T; ++t) {
    std::set<int32_t> chosen;
    while (static_cast<int64_t>(chosen.size()) < K) {
      if (cdf.empty()) {
        chosen.insert(static_cast<int32_t>(rng() % static_cast<uint64_t>(E)));
      } else {
        const auto it = std::lower_bound(cdf.begin(), cdf.end(), u(rng));
        chosen.insert(rank[static_cast<size_t>(std::min<int64_t>(it - cdf.begin(), E - 1))]);
      }
    }
    int j = 0;
    for (int32_t e : chosen) ids[static_cast<size_t>(t * K + j++)] = e;
  }
  return ids;
}

}  // namespace

Status run_moe_bench(const MoeBenchOptions& o, MoeBenchDevice* dev, std::vector<MoeBenchRow>* rows) {
  if (o.routing != "uniform" && o.routing != "zipf") return invalid_argument("routing must be uniform or zipf");
  FP4MOE_RETURN_IF_ERROR(MoeLayer::can_implement(o.shape, MoeLayerOptions{}));
  const int64_t E = o.shape.num_experts, H = o.shape.hidden, I = o.shape.intermediate, K = o.shape.top_k;
  dev->info = device_info();
  Cublas cublas;
  if (o.baselines) {
    dev->read_gbs = read_bandwidth_gbs(size_t{4} << 30);
    dev->copy_gbs = copy_bandwidth_gbs(size_t{2} << 30);
    dev->have_cublas = cublas.load();
    dev->cublas_error = cublas.error;
    if (dev->have_cublas) {
      const int m = 8192;
      DevBuf b, c;
      FP4MOE_RETURN_IF_ERROR(b.alloc(size_t(m) * m * 2));
      FP4MOE_RETURN_IF_ERROR(c.alloc(size_t(m) * m * 2));
      BENCH_TRY(cudaMemset(b.p, 0x3C, size_t(m) * m * 2));  // 0x3C3C = 0.0115: finite, not zero
      const float one = 1, zero = 0;
      const Timing t = time_events(
          [&](int) {
            cublas.gemm_ex(cublas.handle, CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &one, b.p, CUDA_R_16BF, m, b.p,
                           CUDA_R_16BF, m, &zero, c.p, CUDA_R_16BF, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
          },
          3, 10);
      dev->cublas_tflops = 2.0 * m * m * double(m) / (t.median_us * 1e-6) / 1e12;
    }
  }

  // Weights: random NVFP4 codes and scales in the checkpoint layout, prepacked by the layer.
  MoeLayer layer, layer_twin, layer_plain, layer_atomic, layer_unfused, layer_other_ws, layer_other_det, layer_tiled,
      layer_other_fin;
  MoeLayerOptions base;
  base.finalize = o.finalize;
  const bool main_det = finalize_is_deterministic(o.finalize);
  if (!o.use_tuning_cache) base.tuning_cache = "none";
  base.warp_specialized = o.warp_specialized;
  base.cluster_decode = o.cluster_decode;
  base.direct_decode = o.direct_decode;
  base.gate_up_tail = o.gate_up_tail;
  base.kernel_arch = o.kernel_arch;
  base.programmatic_prefill_finalize = o.programmatic_prefill_finalize;
  {
    DevBuf w13p, w13s, w2p, w2s, g13, g2;
    FP4MOE_RETURN_IF_ERROR(w13p.alloc(E * 2 * I * H / 2));
    FP4MOE_RETURN_IF_ERROR(w13s.alloc(E * 2 * I * H / 16));
    FP4MOE_RETURN_IF_ERROR(w2p.alloc(E * H * I / 2));
    FP4MOE_RETURN_IF_ERROR(w2s.alloc(E * H * I / 16));
    FP4MOE_RETURN_IF_ERROR(g13.alloc(E * 4));
    FP4MOE_RETURN_IF_ERROR(g2.alloc(E * 4));
    FP4MOE_RETURN_IF_ERROR(fill(w13p.p, E * 2 * I * H / 2, 1, false));
    FP4MOE_RETURN_IF_ERROR(fill(w13s.p, E * 2 * I * H / 16, 2, true));
    FP4MOE_RETURN_IF_ERROR(fill(w2p.p, E * H * I / 2, 3, false));
    FP4MOE_RETURN_IF_ERROR(fill(w2s.p, E * H * I / 16, 4, true));
    const std::vector<float> gs(static_cast<size_t>(E), 1000.0f);
    BENCH_TRY(cudaMemcpy(g13.p, gs.data(), E * 4, cudaMemcpyHostToDevice));
    BENCH_TRY(cudaMemcpy(g2.p, gs.data(), E * 4, cudaMemcpyHostToDevice));
    const Nvfp4ExpertWeights w13{w13p.p, w13s.p, static_cast<float*>(g13.p)}, w2{w2p.p, w2s.p, static_cast<float*>(g2.p)};
    FP4MOE_RETURN_IF_ERROR(layer.init(o.shape, base, w13, w2, nullptr));
    if (o.phases) {  // the same weights in the two variants the benchmark compares against
      MoeLayerOptions plain = base, atomic = base, unfused = base, other_ws = base, other_det = base, tiled = base,
                      other_fin = base;
      tiled.direct_decode = false;
      // The other MoeLayerOptions::warp_specialized setting: a copy of the weights only where this GPU has both
      // kernel families (with the option on, the layer takes the warp-specialized 16/32/64-token tiles where built).
      other_ws.warp_specialized = !base.warp_specialized;
      // (A call of kMaxFusedRoutingPairs + 1 pairs: one the multistage kernels do not route themselves.)
      const int64_t probe_tokens = kMaxFusedRoutingPairs / o.shape.top_k + 1;
      bool have_ws = false;
      for (int bm : shipped_block_ms()) have_ws = have_ws || plan_of(layer, probe_tokens, bm).gate_up.family == KernelFamily::kWarpSpecialized;
      if (!base.warp_specialized || have_ws)
        FP4MOE_RETURN_IF_ERROR(layer_other_ws.init(o.shape, other_ws, w13, w2, nullptr));
      plain.programmatic_launch = false;
      other_fin.programmatic_prefill_finalize = !base.programmatic_prefill_finalize;
      atomic.finalize = FinalizeMode::kAtomic;
      other_det.finalize = o.finalize == FinalizeMode::kDeterministicBf16 ? FinalizeMode::kDeterministic
                                                                          : FinalizeMode::kDeterministicBf16;
      unfused.fuse_small_routing = false;
      FP4MOE_RETURN_IF_ERROR(layer_twin.init(o.shape, base, w13, w2, nullptr));
      FP4MOE_RETURN_IF_ERROR(layer_unfused.init(o.shape, unfused, w13, w2, nullptr));
      FP4MOE_RETURN_IF_ERROR(layer_plain.init(o.shape, plain, w13, w2, nullptr));
      // (a copy of the weights only where some timed T takes the direct decode path: its only variant)
      // (and one where some timed plan's finalize launch may follow MoeLayerOptions::programmatic_prefill_finalize: with
      // the option off, a plan the rule took says so, MoeRunPlan::programmatic_finalize; with it on, only the other
      // layer's plans can say it, and the per-T note times that layer where they do)
      bool any_direct = false, any_plain_finalize = false;
      for (int64_t T : o.tokens) {
        if (T < 1) continue;
        const MoeRunPlan own = plan_of(layer, T, 0);
        any_direct = any_direct || own.direct_decode || own.direct_down;
        for (int bm : o.block_ms.empty() ? shipped_block_ms() : o.block_ms) {
          const MoeRunPlan p = plan_of(layer, T, bm);
          any_direct = any_direct || p.direct_down;  // (a forced block_m's plan can take it where the own plan does not)
          any_plain_finalize = any_plain_finalize || (p.programmatic_launch && !p.programmatic_finalize);
        }
      }
      if (any_direct) FP4MOE_RETURN_IF_ERROR(layer_tiled.init(o.shape, tiled, w13, w2, nullptr));
      if (any_plain_finalize || base.programmatic_prefill_finalize)
        FP4MOE_RETURN_IF_ERROR(layer_other_fin.init(o.shape, other_fin, w13, w2, nullptr));
      if (o.finalize != FinalizeMode::kAtomic) FP4MOE_RETURN_IF_ERROR(layer_atomic.init(o.shape, atomic, w13, w2, nullptr));
      if (main_det) FP4MOE_RETURN_IF_ERROR(layer_other_det.init(o.shape, other_det, w13, w2, nullptr));
    }
  }
  // cuBLAS baseline: bf16 weights of every expert.
  DevBuf cw13, cw2;
  if (dev->have_cublas) {
    FP4MOE_RETURN_IF_ERROR(cw13.alloc(size_t(E) * 2 * I * H * 2));
    FP4MOE_RETURN_IF_ERROR(cw2.alloc(size_t(E) * H * I * 2));
    BENCH_TRY(cudaMemset(cw13.p, 0x3C, size_t(E) * 2 * I * H * 2));
    BENCH_TRY(cudaMemset(cw2.p, 0x3C, size_t(E) * H * I * 2));
  }
  std::vector<int> block_ms = o.block_ms;
  if (block_ms.empty())  // every block_m with a config on this GPU
    for (int bm : shipped_block_ms())
      if (plan_of(layer, 1, bm).block_m == bm) block_ms.push_back(bm);
  std::vector<int> split_list;
  for (int sp : o.down_k_splits.empty() ? std::vector<int>{0} : o.down_k_splits)
    if (sp == 0 || down_k_splits_supported(o.shape, sp)) split_list.push_back(sp);
  if (split_list.empty())
    return invalid_argument("none of the requested down K split counts is supported for I = " + std::to_string(I) +
                            " (I / splits must be a multiple of 64)");
  const int max_split = *std::max_element(split_list.begin(), split_list.end());
  const double bytes_per_expert = (2.0 * I * H + double(H) * I) * 0.5625;
  const double read_gbs = o.baselines ? dev->read_gbs : 0;
  rows->clear();
  const auto start = std::chrono::steady_clock::now();
  for (size_t ti = 0; ti < o.tokens.size(); ++ti) {
    const int64_t T = o.tokens[ti];
    if (T < 1) return invalid_argument("token counts must be >= 1");
    if (o.budget_s > 0 && std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > o.budget_s)
      break;
    if (o.progress) o.progress(ti, o.tokens.size(), T);
    // Routing sets rotated between iterations so the active experts' weights are not L2-resident.
    const int sets = T <= 64 ? 16 : 4;
    // Room for the timed split counts and the 4-split comparison, for every variant timed on these workspaces: each
    // layer's plans differ (the tiled variant's down splits where the main layer runs down with the finalize in one
    // kernel; the other finalize mode's partials). An uninitialised layer asks for 0.
    size_t ws_bytes = layer.workspace_size(T, max_split);
    if (o.phases)
      for (const MoeLayer* l : {&layer_twin, &layer_plain, &layer_atomic, &layer_unfused, &layer_other_ws, &layer_other_det,
                                &layer_tiled, &layer_other_fin})
        ws_bytes = std::max(ws_bytes, l->workspace_size(T, max_split));
    std::vector<DevBuf> ws(sets), ids(sets), wts(sets);
    DevBuf hid, out;
    FP4MOE_RETURN_IF_ERROR(hid.alloc(T * H * 2));
    FP4MOE_RETURN_IF_ERROR(out.alloc(T * H * 2));
    BENCH_TRY(cudaMemset(hid.p, 0x3C, T * H * 2));
    std::mt19937_64 rng(static_cast<uint64_t>(T));
    MoeBenchRow r;
    r.T = T;
    for (int s = 0; s < sets; ++s) {
      const std::vector<int32_t> h_ids = make_routing(o, T, rng);
      const std::vector<float> h_w(static_cast<size_t>(T * K), 1.0f / K);
      std::vector<int> cnt(static_cast<size_t>(E), 0);  // this shard's experts
      for (int32_t id : h_ids) {
        const int64_t e = id - o.shape.first_expert;
        if (e >= 0 && e < E) ++cnt[static_cast<size_t>(e)], r.local_pairs += 1;
      }
      for (int c : cnt) {
        r.active += c > 0;
        r.max_per_expert = std::max(r.max_per_expert, c);
      }
      FP4MOE_RETURN_IF_ERROR(ws[s].alloc(ws_bytes));
      FP4MOE_RETURN_IF_ERROR(ids[s].alloc(T * K * 4));
      FP4MOE_RETURN_IF_ERROR(wts[s].alloc(T * K * 4));
      BENCH_TRY(cudaMemcpy(ids[s].p, h_ids.data(), T * K * 4, cudaMemcpyHostToDevice));
      BENCH_TRY(cudaMemcpy(wts[s].p, h_w.data(), T * K * 4, cudaMemcpyHostToDevice));
    }
    r.active /= sets;
    r.local_pairs /= sets;
    int bm_override = 0, splits_override = 0, gu_splits_override = 0;
    auto args = [&](int i) {
      MoeForwardArgs a;
      a.block_m = bm_override;
      a.down_k_splits = splits_override;
      a.gate_up_k_splits = gu_splits_override;
      a.hidden = hid.p;
      a.num_tokens = T;
      a.topk_ids = static_cast<int32_t*>(ids[i % sets].p);
      a.topk_weights = static_cast<float*>(wts[i % sets].p);
      a.output = out.p;
      return a;
    };
    Status failed;
    // The first timing of this T warms up for at least kMinWarmUpMs (the GPU idled while the host made its routing
    // sets, and before the first T its weights); the others follow it with the GPU busy.
    double warm_up_ms = kMinWarmUpMs;
    // (ws_bytes, sized above for every variant's finalize mode, fits each of them)
    auto phase = [&](unsigned ph, const MoeLayer& l) {
      // Routing for every set first, so a phase timed alone finds its tables in the workspace.
      for (int s = 0; s < sets; ++s) {
        const Status st = testing::run_phases(l, args(s), ws[s].p, ws_bytes, nullptr, testing::kPhaseRouting);
        if (!st.is_ok()) failed = st;
      }
      const Timing t = time_events(
          [&](int i) {
            const Status st = testing::run_phases(l, args(i), ws[i % sets].p, ws_bytes, nullptr, ph);
            if (!st.is_ok()) failed = st;
          },
          sets, std::max(o.min_iters, 2 * sets), nullptr, warm_up_ms);
      warm_up_ms = 0;
      return t;
    };
    const MoeRunPlan own = plan_of(layer, T, 0);
    r.heuristic_bm = own.block_m;
    r.heuristic_direct = own.direct_decode;
    r.heuristic_splits = own.down_k_splits;
    // The sweep entries that run the layer's own plan (a forced block_m reads no tuning cache, so it is not always it).
    const std::vector<SweepKey> pick_keys =
        own_plan_keys(own, [&](int bm, int sp) { return plan_of(layer, T, bm, sp); });
    // (with a pass with nothing forced where no forced entry runs the layer's own plan: a tuning cache's split count,
    // a forced split list, the direct decode path)
    for (const auto& [bm, sp] : sweep_keys(block_ms, split_list, pick_keys, own.direct_decode, !o.block_ms.empty())) {
      bm_override = bm;
      splits_override = sp;
      // A split count that this block_m's down tile does not divide (a TP shard's single K tile of 256): not a
      // config of this shape, skipped (the layer would reject it just the same).
      if (MoeRunPlan probe; sp > 1 && !layer.plan(args(0), &probe).is_ok()) continue;
      const double us = phase(testing::kPhaseAll, layer).median_us;
      FP4MOE_RETURN_IF_ERROR(failed);
      r.layer_us_by_config[{bm, sp}] = us;
    }
    if (r.layer_us_by_config.empty())
      return invalid_argument("T=" + std::to_string(T) + ": no timed block_m takes the requested down K splits (" +
                              "each block_m's down tile must divide I / splits)");
    // The config timed from here on (MoeBenchOptions::time_at).
    const TimedConfig fastest = fastest_config(r.layer_us_by_config);
    const TimedConfig timed = timed_config(r.layer_us_by_config, o.time_at, pick_keys);
    r.fastest_bm = fastest.block_m;
    r.fastest_splits = fastest.down_k_splits;
    r.fastest_plan_splits = plan_of(layer, T, fastest.block_m, fastest.down_k_splits).down_k_splits;
    r.fastest_us = fastest.us;
    r.block_m = timed.block_m;
    r.down_k_splits = timed.down_k_splits;
    r.layer_us = timed.us;
    r.timed_at_pick = timed.at_pick;
    bm_override = r.block_m;  // the phases and variants below at the timed config
    splits_override = r.down_k_splits;
    const MoeRunPlan main_plan = plan_of(layer, T, r.block_m, r.down_k_splits);
    r.timed_plan_splits = main_plan.down_k_splits;
    const bool direct = main_plan.direct_decode;
    if (o.phases) {
      // (the direct decode path routes inside its kernels: no routing phase of its own)
      r.route_us = direct ? 0.0 : phase(testing::kPhaseRouting, layer).median_us;
      r.gate_up_us = phase(testing::kPhaseGateUp, layer).median_us;
      r.down_us = phase(testing::kPhaseDown, layer).median_us;
      // The variants, interleaved with the main layer in rounds (MoeBenchRow::layer_main_us says why).
      struct Variant {
        const MoeLayer* layer;
        double* us;
        int gate_up_k_splits = 0;  // forced for this variant (0: the layer's choice)
      };
      std::vector<Variant> variants = {{&layer, &r.layer_main_us},
                                       {&layer_twin, &r.layer_twin_us},
                                       {&layer_plain, &r.layer_plain_us}};
      // (the direct decode path is deterministic in every mode: no atomic variant of it)
      if (o.finalize != FinalizeMode::kAtomic && !direct) variants.push_back({&layer_atomic, &r.layer_atomic_us});
      if (main_det) variants.push_back({&layer_other_det, &r.layer_other_det_us});
      r.gate_up_k_splits = main_plan.gate_up_k_splits;
      if (main_plan.direct_decode) {
        variants.push_back({&layer_tiled, &r.layer_tiled_us});
      } else {
        // (down and the finalize as one kernel: against the tiled down kernel and the finalize kernel)
        if (main_plan.direct_down && plan_of(layer_tiled, T, r.block_m, r.down_k_splits).num_tokens == T)
          variants.push_back({&layer_tiled, &r.layer_tiled_us});
        // (none where the other family has no tile of this block_m: the 128-token tile is warp-specialized only)
        const MoeRunPlan other = plan_of(layer_other_ws, T, r.block_m, r.down_k_splits);
        if (other.block_m == main_plan.block_m && main_plan.gate_up.family != other.gate_up.family)
          variants.push_back({&layer_other_ws, &r.layer_other_ws_us});
        if (main_plan.fused_routing) variants.push_back({&layer_unfused, &r.layer_unfused_us});
        // (where the other setting changes this plan's finalize launch; an uninitialised layer plans nothing)
        const MoeRunPlan other_fin_plan = plan_of(layer_other_fin, T, r.block_m, r.down_k_splits);
        if (other_fin_plan.num_tokens == T && other_fin_plan.programmatic_finalize != main_plan.programmatic_finalize)
          variants.push_back({&layer_other_fin, &r.layer_other_finalize_launch_us});
      }
      if (main_plan.gate_up_k_splits > 1) variants.push_back({&layer, &r.layer_gate_up_unsplit_us, 1});
      constexpr int kRounds = 3;
      std::vector<std::vector<double>> times(variants.size());
      for (int round = 0; round < kRounds; ++round)
        for (size_t v = 0; v < variants.size(); ++v) {
          gu_splits_override = variants[v].gate_up_k_splits;
          times[v].push_back(phase(testing::kPhaseAll, *variants[v].layer).median_us);
        }
      gu_splits_override = 0;
      for (size_t v = 0; v < variants.size(); ++v) *variants[v].us = median_of(times[v]);
      FP4MOE_RETURN_IF_ERROR(failed);
    }
    if (o.graph) {
      // The forward pass as a serving stack runs a decode step: captured in a CUDA graph (one per routing set, on a
      // stream of its own), replayed in turn; launch gaps are then the graph's, not the host's.
      cudaStream_t gs = nullptr;
      BENCH_TRY(cudaStreamCreateWithFlags(&gs, cudaStreamNonBlocking));
      std::vector<cudaGraphExec_t> execs(static_cast<size_t>(sets), nullptr);
      Status captured;
      auto cuda_failed = [&](const std::string& what) {
        const Status e(StatusCode::kCudaError, what);
        captured = e;
      };
      // Captures the forward passes of the routing sets [first, first + count) on workspace `w` (-1: each set's own)
      // into one graph; nullptr (and `captured` says why) on failure.
      auto capture = [&](int first, int count, int w) -> cudaGraphExec_t {
        cudaGraph_t g = nullptr;
        cudaGraphExec_t exec = nullptr;
        if (cudaStreamBeginCapture(gs, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
          cuda_failed("cudaStreamBeginCapture failed");
          return nullptr;
        }
        for (int s = first; s < first + count && captured.is_ok(); ++s) {
          const Status st = layer.run(args(s), ws[w < 0 ? s : w].p, ws_bytes, gs);
          if (!st.is_ok()) captured = st;
        }
        const cudaError_t end = cudaStreamEndCapture(gs, &g);
        if (captured.is_ok() && end != cudaSuccess) cuda_failed(std::string("capture: ") + cudaGetErrorString(end));
        else if (captured.is_ok() && cudaGraphInstantiate(&exec, g, 0) != cudaSuccess) cuda_failed("cudaGraphInstantiate failed");
        if (g) cudaGraphDestroy(g);
        return exec;
      };
      for (int s = 0; s < sets && captured.is_ok(); ++s) execs[static_cast<size_t>(s)] = capture(s, 1, -1);
      if (captured.is_ok()) {
        // Launches cycle through the sets (the weights each touches are not L2-resident for the next), at least three
        // of each: the median of all of them, and each set's own median (its routing, and so its active experts,
        // differ from set to set).
        const Timing tg = time_events(
            [&](int i) {
              if (cudaGraphLaunch(execs[static_cast<size_t>(i % sets)], gs) != cudaSuccess)
                cuda_failed("cudaGraphLaunch failed");
            },
            sets, sets * std::max(3, (o.min_iters + sets - 1) / sets), gs);
        BENCH_TRY(cudaGetLastError());
        r.layer_graph_us = tg.median_us;
        std::vector<double> per_set;
        for (int s = 0; s < sets; ++s) {
          std::vector<double> v;  // (call warmup_calls + i, a multiple of sets plus i, ran set i % sets)
          for (size_t i = static_cast<size_t>(s); i < tg.samples_us.size(); i += static_cast<size_t>(sets))
            v.push_back(tg.samples_us[i]);
          per_set.push_back(median_of(std::move(v)));
        }
        r.layer_graph_set_min_us = *std::min_element(per_set.begin(), per_set.end());
        r.layer_graph_set_max_us = *std::max_element(per_set.begin(), per_set.end());
        r.layer_graph_set_mean_us = std::accumulate(per_set.begin(), per_set.end(), 0.0) / static_cast<double>(sets);
        // Every routing set's pass in one graph, on one workspace (a model's layers share it).
        cudaGraphExec_t chain = capture(0, sets, 0);
        if (captured.is_ok()) {
          r.graph_chain_passes = sets;
          r.layer_graph_chain_us = time_events(
                                       [&](int) {
                                         if (cudaGraphLaunch(chain, gs) != cudaSuccess) cuda_failed("cudaGraphLaunch failed");
                                       },
                                       2, std::max(20, o.min_iters), gs)
                                       .median_us /
                                   sets;
          BENCH_TRY(cudaGetLastError());
        }
        if (chain) cudaGraphExecDestroy(chain);
      }
      for (auto e : execs)
        if (e) cudaGraphExecDestroy(e);
      cudaStreamDestroy(gs);
      FP4MOE_RETURN_IF_ERROR(captured);
    }
    FP4MOE_RETURN_IF_ERROR(layer.check(ws[0].p, nullptr));
    r.weight_bytes = r.active * bytes_per_expert;
    r.flop_per_byte = 2.0 * r.local_pairs * 3.0 * I * H / r.weight_bytes;
    r.tflops = 2.0 * r.local_pairs * (3.0 * I * H) / (r.layer_us * 1e-6) / 1e12;
    r.gbs = r.weight_bytes / (r.layer_us * 1e3);
    if (read_gbs > 0) {
      r.floor_us = r.weight_bytes / (read_gbs * 1e3);
      r.pct_bw = 100.0 * r.gbs / read_gbs;
    }
    r.tokens_per_s = T / (r.layer_us * 1e-6 * o.moe_layers);
    if (dev->have_cublas) {
      // Dense bf16 equivalent: each active expert multiplies its mean token count through w13 and w2.
      const int na = std::max(1, static_cast<int>(r.active + 0.5));
      const int m = std::max(1, static_cast<int>((static_cast<int64_t>(r.local_pairs + 0.5) + na - 1) / na));
      DevBuf cx, cy, ca, cz;
      FP4MOE_RETURN_IF_ERROR(cx.alloc(size_t(na) * m * H * 2));
      FP4MOE_RETURN_IF_ERROR(cy.alloc(size_t(na) * m * 2 * I * 2));
      FP4MOE_RETURN_IF_ERROR(ca.alloc(size_t(na) * m * I * 2));
      FP4MOE_RETURN_IF_ERROR(cz.alloc(size_t(na) * m * H * 2));
      BENCH_TRY(cudaMemset(cx.p, 0x3C, size_t(na) * m * H * 2));
      BENCH_TRY(cudaMemset(ca.p, 0x3C, size_t(na) * m * I * 2));
      const float one = 1, zero = 0;
      cublasStatus_t bad = CUBLAS_STATUS_SUCCESS;
      auto check = [&](cublasStatus_t st) { if (st != CUBLAS_STATUS_SUCCESS) bad = st; };
      // Rotate which experts are used when fewer than all are active (start offset), to leave L2 cold.
      const Timing tg = time_events(
          [&](int i) {
            const int64_t off = (static_cast<int64_t>(i) * na) % (E - na + 1);
            check(cublas.gemm_strided_batched_ex(cublas.handle, CUBLAS_OP_T, CUBLAS_OP_N, 2 * I, m, H, &one,
                                                 static_cast<char*>(cw13.p) + off * 2 * I * H * 2, CUDA_R_16BF, H,
                                                 2 * I * H, cx.p, CUDA_R_16BF, H, int64_t(m) * H, &zero, cy.p,
                                                 CUDA_R_16BF, 2 * I, int64_t(m) * 2 * I, na, CUBLAS_COMPUTE_32F,
                                                 CUBLAS_GEMM_DEFAULT));
          },
          3, 20);
      const Timing td = time_events(
          [&](int i) {
            const int64_t off = (static_cast<int64_t>(i) * na) % (E - na + 1);
            check(cublas.gemm_strided_batched_ex(cublas.handle, CUBLAS_OP_T, CUBLAS_OP_N, H, m, I, &one,
                                                 static_cast<char*>(cw2.p) + off * H * I * 2, CUDA_R_16BF, I, H * I,
                                                 ca.p, CUDA_R_16BF, I, int64_t(m) * I, &zero, cz.p, CUDA_R_16BF, H,
                                                 int64_t(m) * H, na, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
          },
          3, 20);
      if (bad != CUBLAS_STATUS_SUCCESS)
        return Status(StatusCode::kInternal, "cuBLAS baseline failed with status " + std::to_string(static_cast<int>(bad)));
      r.cublas_gate_up_us = tg.median_us;
      r.cublas_us = tg.median_us + td.median_us;
    }
    rows->push_back(r);
  }
  if (o.progress) o.progress(o.tokens.size(), o.tokens.size(), 0);
  return Status::ok();
}

void print_moe_bench(const MoeBenchOptions& o, const MoeBenchDevice& dev, const std::vector<MoeBenchRow>& rows, FILE* f) {
  const DeviceInfo& d = dev.info;
  std::fprintf(f, "device: %s (sm_%d%d), %d SMs, SM clock %d MHz, memory clock %d MHz x %d bit, L2 %.0f MB, "
                  "smem/block opt-in %zu B, driver %d, runtime %d\n",
               d.name.c_str(), d.cc_major, d.cc_minor, d.sms, d.sm_clock_mhz, d.mem_clock_mhz, d.bus_width_bits,
               d.l2_bytes / 1e6, d.smem_optin, d.driver, d.runtime);
  if (o.baselines)
    std::fprintf(f, "measured: read %.0f GB/s (streaming read kernel, 4 GiB, best of 3 medians), copy %.0f GB/s (read+write), cuBLAS bf16 "
                    "8192^3 %.0f TFLOP/s%s\n",
                 dev.read_gbs, dev.copy_gbs, dev.cublas_tflops,
                 dev.have_cublas ? "" : (" (cuBLAS unavailable: " + dev.cublas_error + ")").c_str());
  for (const auto& r : rows) {
    std::fprintf(f, "  T=%lld: max tokens on one expert %d; layer us by block_m:", static_cast<long long>(r.T), r.max_per_expert);
    for (const auto& [bm, us] : r.layer_us_by_bm()) {
      if (bm != kOwnPlanBlockM) std::fprintf(f, " bm%d %.0f", bm, us);
      else if (r.heuristic_direct) std::fprintf(f, " direct %.1f", us);
      else std::fprintf(f, " nothing-forced (bm%d) %.1f", r.heuristic_bm, us);
    }
    if (r.layer_us_by_config.size() > r.layer_us_by_bm().size()) {
      std::fprintf(f, "; by block_m/down K splits:");
      for (const auto& [cfg, us] : r.layer_us_by_config) std::fprintf(f, " %d/%d %.1f", cfg.first, cfg.second, us);
    }
    if (r.fastest_splits > 1) std::fprintf(f, " (fastest with the down K in %d splits)", r.fastest_splits);
    if (r.heuristic_direct) std::fprintf(f, " (the layer picks the direct decode path)");
    else if (r.heuristic_splits > 1) std::fprintf(f, " (the layer picks %d, down K in %d splits)", r.heuristic_bm, r.heuristic_splits);
    else std::fprintf(f, " (the layer picks %d)", r.heuristic_bm);
    auto config_name = [&r](int bm, int splits) {
      if (bm == kOwnPlanBlockM)
        return r.heuristic_direct ? std::string("the direct decode path")
                                  : "the pass with nothing forced (bm" + std::to_string(r.heuristic_bm) +
                                        (r.heuristic_splits > 1 ? ", down K in " + std::to_string(r.heuristic_splits) + " splits)" : ")");
      const std::string n = "bm" + std::to_string(bm);
      return splits > 1 ? n + " with the down K in " + std::to_string(splits) + " splits" : n;
    };
    if (o.time_at == TimeAt::kLayerPick && !r.timed_at_pick)
      std::fprintf(f, "; the pick was not swept, so what follows is timed at the fastest, %s",
                   config_name(r.block_m, r.down_k_splits).c_str());
    else if (r.fastest_us < r.layer_us)
      std::fprintf(f, "; timed at the pick, %s; the sweep's fastest is %s, %.1f us (%+.1f%% against the pick's %.1f)",
                   config_name(r.block_m, r.down_k_splits).c_str(), config_name(r.fastest_bm, r.fastest_splits).c_str(),
                   r.fastest_us, 100.0 * (r.fastest_us / r.layer_us - 1.0), r.layer_us);
    if (r.layer_graph_chain_us > 0)
      std::fprintf(f, "; %d passes in one CUDA graph (one workspace): %.1f us per pass", r.graph_chain_passes,
                   r.layer_graph_chain_us);
    if (r.layer_graph_set_mean_us > 0)
      std::fprintf(f, "; each routing set's single-pass graph alone: mean %.1f us (least %.1f, most %.1f)",
                   r.layer_graph_set_mean_us, r.layer_graph_set_min_us, r.layer_graph_set_max_us);
    if (r.layer_main_us > 0) {
      auto rel = [&](double us) { return 100.0 * (us / r.layer_main_us - 1.0); };
      const std::string at = r.block_m == kOwnPlanBlockM && !r.heuristic_direct
                                 ? config_name(r.block_m, 0) + ", each variant at its own plan"
                                 : config_name(r.block_m, r.down_k_splits);
      std::fprintf(f, "; at %s, medians of 3 rounds each timing the layer (%.1f us) and then every variant: same options "
                      "on a second copy of the weights %.1f us (%+.1f%%), without programmatic launch %.1f us (%+.1f%%)",
                   at.c_str(), r.layer_main_us, r.layer_twin_us, rel(r.layer_twin_us), r.layer_plain_us,
                   rel(r.layer_plain_us));
      if (r.layer_atomic_us > 0)
        std::fprintf(f, ", atomic finalize %.1f us (%+.1f%%)", r.layer_atomic_us, rel(r.layer_atomic_us));
      if (r.layer_other_det_us > 0)
        std::fprintf(f, ", %s partials %.1f us (%+.1f%%)", o.finalize == FinalizeMode::kDeterministicBf16 ? "fp32" : "bf16",
                     r.layer_other_det_us, rel(r.layer_other_det_us));
      if (r.layer_other_ws_us > 0)
        std::fprintf(f, ", %s %.1f us (%+.1f%%)",
                     o.warp_specialized ? "multistage kernels (not warp-specialized)" : "warp-specialized kernels",
                     r.layer_other_ws_us, rel(r.layer_other_ws_us));
      if (r.layer_tiled_us > 0)
        std::fprintf(f, ", the tiled kernels (direct decode off) %.1f us (%+.1f%%)", r.layer_tiled_us, rel(r.layer_tiled_us));
      if (r.layer_other_finalize_launch_us > 0)
        std::fprintf(f, ", the finalize %s %.1f us (%+.1f%%)",
                     o.programmatic_prefill_finalize ? "launched plain" : "a programmatic dependent too",
                     r.layer_other_finalize_launch_us, rel(r.layer_other_finalize_launch_us));
      if (r.layer_unfused_us > 0)
        std::fprintf(f, ", with the routing kernel (not fused) %.1f us (%+.1f%%)", r.layer_unfused_us, rel(r.layer_unfused_us));
      if (r.layer_gate_up_unsplit_us > 0)
        std::fprintf(f, ", gate_up K not split (the layer splits it in %d) %.1f us (%+.1f%%)", r.gate_up_k_splits,
                     r.layer_gate_up_unsplit_us, rel(r.layer_gate_up_unsplit_us));
    }
    std::fprintf(f, "\n");
  }
  const MoeShape& s = o.shape;
  std::fprintf(f, "\nMoE layer (E=%lld%s, H=%lld, I=%lld, top-%lld), NVFP4 W4A16, %s finalize, %s routing; weights "
                  "rotated past L2; median of >= %d after warm-up\n",
               static_cast<long long>(s.num_experts),
               s.global_experts() != s.num_experts ? (" of " + std::to_string(s.global_experts())).c_str() : "",
               static_cast<long long>(s.hidden), static_cast<long long>(s.intermediate), static_cast<long long>(s.top_k),
               finalize_mode_name(o.finalize), o.routing.c_str(), o.min_iters);
  std::fprintf(f, "bytes = active experts' NVFP4 weights incl. scales (0.5625 B/weight); floor = bytes / measured read BW\n");
  std::fprintf(f, "%s\n\n", o.time_at == TimeAt::kLayerPick
                                ? "bm = the block_m of the config fp4moe's columns are timed at: the layer's own pick where the sweep has it (the\n"
                                  "per-T notes say where not, and name the sweep's fastest where it differs)"
                                : "bm = the block_m of the config fp4moe's columns are timed at: the sweep's fastest");
  std::fprintf(f, "%6s %6s %4s %8s %7s %8s %8s %8s %8s %8s %6s %6s %7s %9s %7s %9s %7s %9s %7s %6s %7s\n", "T", "active", "bm",
               "MB", "route", "gate_up", "down", "layer", "graph", "floor", "GB/s", "%BW", "TFLOP/s", "cuBLAS gu", "gu x",
               "cuBLAS", "layer x", "tok/s*", "FLOP/B", "%peak", "bound");
  // Roofline: the memory roof is the measured read bandwidth, the compute roof the measured cuBLAS bf16 rate;
  // a case is memory-bound when its arithmetic intensity is below their ratio (the ridge point).
  const double ridge = dev.read_gbs > 0 ? dev.cublas_tflops * 1e3 / dev.read_gbs : 0;
  for (const auto& r : rows)
    std::fprintf(f, "%6lld %6d %4s %8.1f %7.1f %8.1f %8.1f %8.1f %8.1f %8.1f %6.0f %5.1f%% %7.1f %9.1f %6.2fx %9.1f %6.2fx %9.0f %7.1f %5.1f%% %7s\n",
                 static_cast<long long>(r.T), static_cast<int>(r.active + 0.5),
                 r.timed_direct() ? "dir" : std::to_string(r.plan_block_m(r.block_m)).c_str(), r.weight_bytes / 1e6,
                 r.route_us, r.gate_up_us, r.down_us, r.layer_us, r.layer_graph_us, r.floor_us, r.gbs, r.pct_bw, r.tflops,
                 r.cublas_gate_up_us, r.cublas_gate_up_us > 0 ? r.cublas_gate_up_us / r.gate_up_us : 0.0, r.cublas_us,
                 r.cublas_us > 0 ? r.cublas_us / r.layer_us : 0.0, r.tokens_per_s, r.flop_per_byte,
                 dev.cublas_tflops > 0 ? 100.0 * r.tflops / dev.cublas_tflops : 0.0,
                 ridge <= 0 ? "-" : r.flop_per_byte < ridge ? "memory" : "compute");
  std::fprintf(f, "(bm dir = the direct decode path: two kernels that route the pairs (route 0), the finalize inside down; times in us; route/gate_up/down timed alone; layer = all phases in one run; graph = the layer replayed\n"
                  " from a CUDA graph (per routing set); cuBLAS = bf16\n"
                  " cublasGemmStridedBatchedEx over the active experts at their mean token count: gate_up, and gate_up + down;\n"
                  " gu x = cuBLAS gate_up / fp4moe gate_up, layer x = cuBLAS gate_up + down / fp4moe layer;\n"
                  " tok/s* = projected decode throughput of the MoE layers alone: T / (layer time x %d layers), not a served number;\n"
                 " FLOP/B = arithmetic intensity on the weight bytes; %%peak = TFLOP/s / the measured cuBLAS bf16 rate;\n"
                 " bound = the roof that applies at that intensity: memory below the ridge point, compute above)\n",
               o.moe_layers);
}

std::string moe_bench_json(const MoeBenchOptions& o, const MoeBenchDevice& dev, const std::vector<MoeBenchRow>& rows) {
  nlohmann::json j;
  j["device"] = {{"name", dev.info.name}, {"sms", dev.info.sms}, {"cc", dev.info.cc_major * 10 + dev.info.cc_minor},
                 {"driver", dev.info.driver}, {"runtime", dev.info.runtime}};
  j["baselines"] = {{"read_gbs", dev.read_gbs}, {"copy_gbs", dev.copy_gbs}, {"cublas_bf16_tflops", dev.cublas_tflops}};
  j["shape"] = {{"experts", o.shape.num_experts}, {"global_experts", o.shape.global_experts()},
                {"first_expert", o.shape.first_expert}, {"hidden", o.shape.hidden},
                {"intermediate", o.shape.intermediate}, {"top_k", o.shape.top_k}, {"routing", o.routing}};
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& r : rows) {
    nlohmann::json by = nlohmann::json::object();
    for (const auto& [bm, us] : r.layer_us_by_bm()) by[std::to_string(bm)] = us;
    arr.push_back({{"tokens", r.T}, {"active_experts", r.active}, {"block_m", r.plan_block_m(r.block_m)}, {"heuristic_block_m", r.heuristic_bm},
                   {"direct_decode", r.timed_direct()},
                   {"timed_nothing_forced", r.block_m == kOwnPlanBlockM},
                   {"timed_plan_down_k_splits", r.timed_plan_splits}, {"heuristic_down_k_splits", r.heuristic_splits}, {"heuristic_direct_decode", r.heuristic_direct},
                   {"timed_at", time_at_name(r.timed_at())},
                   {"time_at_requested", time_at_name(o.time_at)}, {"fastest_block_m", r.plan_block_m(r.fastest_bm)},
                   {"fastest_nothing_forced", r.fastest_bm == kOwnPlanBlockM},
                   {"fastest_down_k_splits", r.fastest_splits}, {"fastest_plan_down_k_splits", r.fastest_plan_splits},
                   {"fastest_layer_us", r.fastest_us},
                   {"layer_tiled_us", r.layer_tiled_us},
                   {"layer_us_by_block_m", by}, {"route_us", r.route_us}, {"gate_up_us", r.gate_up_us},
                   {"down_us", r.down_us}, {"layer_us", r.layer_us}, {"layer_graph_us", r.layer_graph_us}, {"layer_graph_chain_us", r.layer_graph_chain_us},
                   {"layer_graph_set_mean_us", r.layer_graph_set_mean_us}, {"layer_graph_set_min_us", r.layer_graph_set_min_us},
                   {"layer_graph_set_max_us", r.layer_graph_set_max_us},
                   {"graph_chain_passes", r.graph_chain_passes},
                   {"local_pairs", r.local_pairs}, {"weight_bytes", r.weight_bytes},
                   {"floor_us", r.floor_us}, {"gbs", r.gbs}, {"pct_read_bw", r.pct_bw}, {"tflops", r.tflops},
                   {"flop_per_byte", r.flop_per_byte}, {"cublas_gate_up_us", r.cublas_gate_up_us},
                   {"cublas_us", r.cublas_us}, {"projected_tokens_per_s", r.tokens_per_s},
                   {"layer_variant_reference_us", r.layer_main_us}, {"layer_second_weight_copy_us", r.layer_twin_us},
                   {"layer_plain_launch_us", r.layer_plain_us}, {"layer_atomic_finalize_us", r.layer_atomic_us},
                   {"finalize", finalize_mode_name(o.finalize)}, {"layer_other_deterministic_finalize_us", r.layer_other_det_us},
                   {"layer_unfused_routing_us", r.layer_unfused_us},
                   {"layer_other_finalize_launch_us", r.layer_other_finalize_launch_us},
                   {"gate_up_k_splits", r.gate_up_k_splits}, {"layer_gate_up_unsplit_us", r.layer_gate_up_unsplit_us}, {"layer_other_warp_specialized_us", r.layer_other_ws_us},
                   {"down_k_splits", r.down_k_splits},
                   {"pct_compute_roof", dev.cublas_tflops > 0 ? 100.0 * r.tflops / dev.cublas_tflops : 0.0},
                   {"bound", dev.read_gbs <= 0 || dev.cublas_tflops <= 0 ? "unknown"
                             : r.flop_per_byte < dev.cublas_tflops * 1e3 / dev.read_gbs ? "memory" : "compute"}});
  }
  j["rows"] = arr;
  return j.dump(2);
}

std::string moe_bench_csv(const MoeBenchDevice& dev, const std::vector<MoeBenchRow>& rows) {
  std::ostringstream s;
  s << "tokens,active_experts,block_m,direct_decode,route_us,gate_up_us,down_us,layer_us,floor_us,gbs,pct_read_bw,tflops,"
       "cublas_gate_up_us,cublas_us,projected_tokens_per_s,layer_plain_launch_us,layer_atomic_finalize_us,"
       "down_k_splits,flop_per_byte,pct_compute_roof,bound,timed_at,fastest_block_m,fastest_layer_us\n";
  const double ridge = dev.read_gbs > 0 ? dev.cublas_tflops * 1e3 / dev.read_gbs : 0;
  for (const auto& r : rows)
    s << r.T << ',' << r.active << ',' << r.plan_block_m(r.block_m) << ',' << (r.timed_direct() ? 1 : 0) << ',' << r.route_us << ',' << r.gate_up_us << ',' << r.down_us << ','
      << r.layer_us << ',' << r.floor_us << ',' << r.gbs << ',' << r.pct_bw << ',' << r.tflops << ','
      << r.cublas_gate_up_us << ',' << r.cublas_us << ',' << r.tokens_per_s << ',' << r.layer_plain_us << ','
      << r.layer_atomic_us << ',' << r.down_k_splits << ',' << r.flop_per_byte << ','
      << (dev.cublas_tflops > 0 ? 100.0 * r.tflops / dev.cublas_tflops : 0.0) << ','
      << (ridge <= 0 || dev.cublas_tflops <= 0 ? "unknown" : r.flop_per_byte < ridge ? "memory" : "compute") << ','
      << time_at_name(r.timed_at()) << ','
      << r.plan_block_m(r.fastest_bm) << ','
      << r.fastest_us << '\n';
  return s.str();
}

std::string moe_bench_markdown(const MoeBenchOptions& o, const std::string& title, const MoeBenchDevice& dev,
                               const std::vector<MoeBenchRow>& rows) {
  MarkdownTable t;
  t.title = title + " on " + dev.info.name;
  t.conditions = markdown_conditions(o.time_at, o.routing, o.zipf_s, finalize_mode_name(o.finalize), o.kernel_arch);
  t.read_gbs = dev.read_gbs;
  t.cublas_tflops = dev.have_cublas ? dev.cublas_tflops : 0.0;
  for (const auto& r : rows) t.rows.push_back(markdown_row(r, o.time_at));
  return bench_markdown(t);
}

}  // namespace fp4moe::bench
