// Shared GPU-test machinery for the MoE layer: a problem (weights, routing, layer, buffers) and the
// element-wise check of routing tables, SwiGLU output and layer output against the fp64 CPU reference.
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "fp4moe/bf16.h"
#include "fp4moe/moe.h"
#include "fp4moe/testing.h"
#include "tests/gpu/moe_test_data.h"

namespace fp4moe::testing {

// Runs f(0..n-1) on all hardware threads (the fp64 reference is the slow part of a GPU test).
inline void parallel_for(int64_t n, const std::function<void(int64_t)>& f) {
  const int64_t threads = std::max<int64_t>(1, std::min<int64_t>(n, std::thread::hardware_concurrency()));
  std::atomic<int64_t> next{0};
  std::vector<std::thread> pool;
  for (int64_t t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      for (int64_t i = next++; i < n; i = next++) f(i);
    });
  for (auto& th : pool) th.join();
}

// A GPU value against the exact reference: within tol, or (when the reference rounds to a non-finite
// bf16) the same non-finite class.
inline bool matches(double got, double want, double tol) {
  const double want_bf16 = round_to_bf16(static_cast<float>(want));
  if (!std::isfinite(want_bf16) || !std::isfinite(want)) {
    if (std::isnan(want) || std::isnan(want_bf16)) return std::isnan(got);
    return std::isinf(got) && std::signbit(got) == std::signbit(want);
  }
  return std::fabs(got - want) <= tol;
}

// reference_down split over tokens and threads.
inline reference::LayerOutput reference_down_parallel(const reference::MoeReferenceInput& in,
                                                      const std::vector<std::vector<uint16_t>>& act) {
  reference::LayerOutput all;
  all.out.resize(static_cast<size_t>(in.num_tokens * in.hidden));
  all.tol.resize(all.out.size());
  const int64_t chunk = 8;
  parallel_for((in.num_tokens + chunk - 1) / chunk, [&](int64_t ci) {
    const int64_t t0 = ci * chunk, t1 = std::min(in.num_tokens, t0 + chunk);
    reference::MoeReferenceInput sub = in;
    sub.num_tokens = t1 - t0;
    sub.topk_ids = in.topk_ids + t0 * in.top_k;
    sub.topk_weights = in.topk_weights + t0 * in.top_k;
    std::vector<std::vector<uint16_t>> sub_act(act.begin() + t0 * in.top_k, act.begin() + t1 * in.top_k);
    const auto r = reference::reference_down(sub, sub_act);
    std::copy(r.out.begin(), r.out.end(), all.out.begin() + t0 * in.hidden);
    std::copy(r.tol.begin(), r.tol.end(), all.tol.begin() + t0 * in.hidden);
  });
  return all;
}

// The reference's input for T tokens of `in` on a layer of shape `s` (E = s.num_experts: the ids' range).
inline reference::MoeReferenceInput reference_input(const RoutingInputs& in, int64_t T, const MoeShape& s,
                                                    const reference::DecodedExperts* w13,
                                                    const reference::DecodedExperts* w2) {
  reference::MoeReferenceInput ri;
  ri.num_tokens = T, ri.hidden = s.hidden, ri.intermediate = s.intermediate, ri.top_k = s.top_k;
  ri.num_experts = s.num_experts;
  ri.hidden_bf16 = in.hidden.data();
  ri.topk_ids = in.ids.data();
  ri.topk_weights = in.weights.data();
  ri.w13 = w13;
  ri.w2 = w2;
  return ri;
}

struct Case {
  int64_t T, E, H, I, k;
  Routing routing = Routing::kUniform;
  int block_m = 0;  // 0: the layer's heuristic
  FinalizeMode finalize = FinalizeMode::kDeterministic;
  bool gate_first = true;
  bool dequant_kind = false;
  int down_k_splits = 0;  // 0: the layer's choice
  bool pdl = true;        // MoeLayerOptions::programmatic_launch
  bool warp_specialized = true;  // MoeLayerOptions::warp_specialized (sm_90's 16-, 32- and 64-token tiles)
  int kernel_arch = 0;           // MoeLayerOptions::kernel_arch (120: the sm_120 configs on the H200)
  int gate_up_k_splits = 0;      // MoeForwardArgs::gate_up_k_splits (0: the layer's choice)
  bool direct_decode = true;     // MoeLayerOptions::direct_decode
  bool cluster_decode = MoeLayerOptions{}.cluster_decode;  // MoeLayerOptions::cluster_decode
  bool gate_up_tail = MoeLayerOptions{}.gate_up_tail;      // MoeLayerOptions::gate_up_tail
  // An expert-parallel rank holding experts [0, E) of global_experts (0: not sharded); the inputs' ids stay in
  // [0, E), so every pair is this rank's and the layer of E experts is the reference.
  int64_t global_experts = 0;
  // With global_experts: ids drawn over all global_experts instead, so the pairs routed to the other ranks' experts
  // [E, global_experts) are skipped (the reference skips ids past its E too) and must not be reported.
  bool global_ids = false;
  std::string name() const {
    return "T" + std::to_string(T) + "_E" + std::to_string(E) +
           (global_experts ? "_of" + std::to_string(global_experts) + (global_ids ? "_globalids" : "") : "") + "_H" + std::to_string(H) + "_I" + std::to_string(I) +
           "_k" + std::to_string(k) + "_" + testing::routing_name(routing) + "_bm" + std::to_string(block_m) +
           (finalize == FinalizeMode::kAtomic ? "_atomic" : finalize == FinalizeMode::kDeterministicBf16 ? "_detbf16" : "_det") + (gate_first ? "_gatefirst" : "_upfirst") +
           (dequant_kind ? "_ws2" : "") + "_splits" + std::to_string(down_k_splits) + (pdl ? "" : "_nopdl") +
           (warp_specialized ? "" : "_not_warp_specialized") + (kernel_arch ? "_kernels_sm" + std::to_string(kernel_arch) : "") +
           (gate_up_k_splits ? "_gusplits" + std::to_string(gate_up_k_splits) : "") + (direct_decode ? "" : "_tiled") +
           (cluster_decode == MoeLayerOptions{}.cluster_decode ? "" : cluster_decode ? "_cluster" : "_no_cluster") +
           (gate_up_tail == MoeLayerOptions{}.gate_up_tail ? "" : gate_up_tail ? "_tail" : "_no_tail");
  }
};

// A layer's random expert weights for `seed`, as every GPU test draws them: w13 [E, 2I, H] and w2 [E, H, I]
// (dequant_kind: ModelOpt-style global scales). With make_inputs, one seed gives a whole problem.
inline bool make_weights(const MoeShape& s, uint64_t seed, bool dequant_kind, ExpertWeights* w13, ExpertWeights* w2) {
  return w13->make(s.num_experts, 2 * s.intermediate, s.hidden, seed * 7 + 1, dequant_kind) &&
         w2->make(s.num_experts, s.hidden, s.intermediate, seed * 7 + 3, dequant_kind);
}
// A step's random inputs for `seed`: T tokens of hidden states, ids over s.num_experts, router weights.
inline void make_inputs(const MoeShape& s, int64_t T, Routing routing, uint64_t seed, RoutingInputs* in) {
  in->make(T, s.hidden, s.num_experts, s.top_k, routing, seed * 7 + 5);
}

// The layer options a case asks for (no tuning cache: what the tests run must not depend on one left on the
// machine; tests of tuning call use_tuning themselves).
inline MoeLayerOptions options_for(const Case& c) {
  MoeLayerOptions o;
  o.block_m = c.block_m;
  o.finalize = c.finalize;
  o.gate_up_order = c.gate_first ? GateUpOrder::kGateFirst : GateUpOrder::kUpFirst;
  o.global_scale_kind = c.dequant_kind ? GlobalScaleKind::kDequantize : GlobalScaleKind::kQuantize;
  o.programmatic_launch = c.pdl;
  o.warp_specialized = c.warp_specialized;
  o.kernel_arch = c.kernel_arch;
  o.direct_decode = c.direct_decode;
  o.cluster_decode = c.cluster_decode;
  o.gate_up_tail = c.gate_up_tail;
  o.tuning_cache = "none";
  return o;
}

// Everything one case needs on the device, plus the outputs of one run.
struct Problem {
  Case c;
  uint64_t seed = 0;
  testing::ExpertWeights w13, w2;
  testing::RoutingInputs in;
  MoeLayer layer;
  DeviceBuffer hidden, ids, weights, out, ws;

  void setup(const Case& cs, uint64_t s) {
    c = cs;
    seed = s;
    const MoeShape shape{c.E, c.H, c.I, c.k, c.global_experts, 0};  // (0 global experts: the E of an unsharded layer)
    ASSERT_TRUE(make_weights(shape, seed, c.dequant_kind, &w13, &w2));
    make_inputs(c.global_ids ? MoeShape{c.global_experts, c.H, c.I, c.k} : shape, c.T, c.routing, seed, &in);
    const Status st = layer.init(shape, options_for(c), w13.device(), w2.device(), nullptr);
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    hidden.alloc(in.hidden.size() * 2);
    ids.alloc(in.ids.size() * 4);
    weights.alloc(in.weights.size() * 4);
    out.alloc(static_cast<size_t>(c.T * c.H * 2));
    ws.alloc(layer.workspace_size(c.T, c.down_k_splits, c.gate_up_k_splits));
    ASSERT_TRUE(hidden.upload(in.hidden) && ids.upload(in.ids) && weights.upload(in.weights));
  }
  MoeForwardArgs args() const {
    MoeForwardArgs a;
    a.hidden = hidden.get();
    a.num_tokens = c.T;
    a.topk_ids = ids.as<int32_t>();
    a.topk_weights = weights.as<float>();
    a.output = out.get();
    a.down_k_splits = c.down_k_splits;
    a.gate_up_k_splits = c.gate_up_k_splits;
    return a;
  }
  // Poisons output and workspace (0xFF bytes: bf16 NaN), runs, synchronises.
  void run_poisoned() {
    ASSERT_TRUE(out.poison(0xFF));
    ASSERT_TRUE(ws.poison(0xFF));
    const Status st = layer.run(args(), ws.get(), ws.bytes(), nullptr);
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
};

// The plan `l` makes for T tokens (block_m: 0 = its own choice); a failed plan fails the test.
inline MoeRunPlan plan_of(const MoeLayer& l, int64_t T, int block_m = 0) {
  MoeForwardArgs a;
  a.num_tokens = T;
  a.block_m = block_m;
  MoeRunPlan p;
  const Status s = l.plan(a, &p);
  EXPECT_TRUE(s.is_ok()) << "plan(T=" << T << ", block_m " << block_m << "): " << s.to_string();
  return p;
}

// Captures what `enqueue` puts on stream `s` (its status: the forward passes') in a CUDA graph, into *graph.
inline void capture_graph(const std::function<Status(cudaStream_t)>& enqueue, cudaStream_t s, cudaGraph_t* graph) {
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  const Status st = enqueue(s);
  ASSERT_EQ(cudaStreamEndCapture(s, graph), cudaSuccess);
  ASSERT_TRUE(st.is_ok()) << st.to_string();
}

// Captures what `enqueue` puts on a fresh stream in a CUDA graph (capture_graph) and launches it `replays` times,
// `poison` run before each launch and `collect(i)` once replay i has completed.
inline void replay_graph(const std::function<Status(cudaStream_t)>& enqueue, int replays,
                         const std::function<bool()>& poison, const std::function<void(int)>& collect) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  capture_graph(enqueue, s, &graph);
  if (::testing::Test::HasFatalFailure()) return;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int i = 0; i < replays; ++i) {
    ASSERT_TRUE(poison());
    ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    collect(i);
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
}

// Captures one forward pass of p.layer with `a` in a CUDA graph on a fresh stream (output and workspace poisoned
// before the capture) and launches it `replays` times, the output poisoned before each launch, so a replay that
// writes nothing cannot pass; outs[i] is replay i's output.
inline void graph_replays(Problem& p, const MoeForwardArgs& a, int replays, std::vector<std::vector<uint16_t>>* outs) {
  outs->clear();
  ASSERT_TRUE(p.out.poison(0xFF) && p.ws.poison(0xFF));
  replay_graph([&](cudaStream_t s) { return p.layer.run(a, p.ws.get(), p.ws.bytes(), s); }, replays,
               [&] { return p.out.poison(0xFF); },
               [&](int) { outs->push_back(p.out.download<uint16_t>(static_cast<size_t>(p.c.T * p.c.H))); });
}

// Runs p.layer with `a` on poisoned output and workspace and returns the output and the routed pairs' SwiGLU rows
// (bf16 bits; skipped pairs have none).
inline void run_and_download(Problem& p, const MoeForwardArgs& a, std::vector<uint16_t>* out, std::vector<uint16_t>* act) {
  ASSERT_TRUE(p.out.poison(0xFF) && p.ws.poison(0xFF));
  const Status st = p.layer.run(a, p.ws.get(), p.ws.bytes(), nullptr);
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  *out = p.out.download<uint16_t>(static_cast<size_t>(p.c.T * p.c.H));
  const MoeWorkspaceView v = workspace_view(p.layer, p.ws.get(), p.c.T);
  int32_t rows = 0;
  ASSERT_EQ(cudaMemcpy(&rows, v.expert_offsets + p.c.E, 4, cudaMemcpyDeviceToHost), cudaSuccess);
  act->resize(static_cast<size_t>(rows * p.c.I));
  ASSERT_EQ(cudaMemcpy(act->data(), v.act, act->size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
}

// Problem q run with `tiled` (the tiled kernels, forced into the other path's order) against another path's output
// `out`, SwiGLU rows `act` and check() code `check` on the same inputs: bit for bit.
inline void expect_tiled_bits(Problem& q, const MoeForwardArgs& tiled, const std::vector<uint16_t>& out,
                              const std::vector<uint16_t>& act, StatusCode check) {
  std::vector<uint16_t> out_t, act_t;
  run_and_download(q, tiled, &out_t, &act_t);
  if (::testing::Test::HasFatalFailure()) return;
  EXPECT_EQ(act, act_t) << "SwiGLU rows differ from the tiled kernels'";
  EXPECT_EQ(out, out_t) << "outputs differ from the tiled kernels'";
  EXPECT_EQ(check, q.layer.check(q.ws.get(), nullptr).code());
}

// A deterministic layer's output is a function of its inputs: the output p.out holds now (the caller's run) against
// a rerun with output and workspace poisoned and two CUDA-graph replays of p.args(), bit for bit. *first (if
// given) receives the output compared against.
inline void expect_reruns_bit_identical(Problem& p, std::vector<uint16_t>* first = nullptr) {
  const auto before = p.out.download<uint16_t>(static_cast<size_t>(p.c.T * p.c.H));
  p.run_poisoned();
  if (::testing::Test::HasFatalFailure()) return;
  EXPECT_EQ(p.out.download<uint16_t>(before.size()), before) << "two runs differ";
  std::vector<std::vector<uint16_t>> replayed;
  graph_replays(p, p.args(), 2, &replayed);
  if (::testing::Test::HasFatalFailure()) return;
  for (size_t i = 0; i < replayed.size(); ++i) EXPECT_EQ(replayed[i], before) << "graph replay " << i << " differs";
  if (first != nullptr) *first = before;
}

inline void check_against_reference(Problem& p) {
  const Case& c = p.c;
  SCOPED_TRACE(c.name() + " seed " + std::to_string(p.seed) + " " + p.layer.describe(c.T));
  const Status chk = p.layer.check(p.ws.get(), nullptr);
  if (c.routing == Routing::kWithBadIds) {
    EXPECT_EQ(chk.code(), StatusCode::kInvalidArgument) << "bad ids were not reported";
  } else {
    ASSERT_TRUE(chk.is_ok()) << chk.to_string();
  }
  const int64_t P = c.T * c.k;
  const MoeWorkspaceView v = workspace_view(p.layer, p.ws.get(), c.T);
  auto dl32 = [](const int32_t* d, int64_t n) {
    std::vector<int32_t> h(static_cast<size_t>(n));
    EXPECT_EQ(cudaMemcpy(h.data(), d, static_cast<size_t>(n) * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  };
  const auto offsets = dl32(v.expert_offsets, c.E + 1);
  const auto perm = dl32(v.perm_pair, P);
  const auto inv = dl32(v.inv_perm, P);

  // Routing: stable grouping by expert, computed here independently.
  std::vector<int32_t> want_off(static_cast<size_t>(c.E + 1), 0), want_perm, want_inv(static_cast<size_t>(P), -1);
  for (int32_t e = 0; e < c.E; ++e) {
    want_off[static_cast<size_t>(e)] = static_cast<int32_t>(want_perm.size());
    for (int64_t i = 0; i < P; ++i)
      if (p.in.ids[static_cast<size_t>(i)] == e) {
        want_inv[static_cast<size_t>(i)] = static_cast<int32_t>(want_perm.size());
        want_perm.push_back(static_cast<int32_t>(i));
      }
  }
  want_off[static_cast<size_t>(c.E)] = static_cast<int32_t>(want_perm.size());
  ASSERT_EQ(offsets, want_off);
  ASSERT_TRUE(std::equal(want_perm.begin(), want_perm.end(), perm.begin())) << "permutation differs";
  ASSERT_EQ(inv, want_inv);
  const int64_t rows = static_cast<int64_t>(want_perm.size());

  // SwiGLU output, every element of every routed row.
  std::vector<uint16_t> act(static_cast<size_t>(rows * c.I));
  ASSERT_EQ(cudaMemcpy(act.data(), v.act, act.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  reference::ExpertWeightsView w13v = p.w13.view(), w2v = p.w2.view();
  reference::MoeReferenceInput ri;
  ri.num_tokens = c.T, ri.hidden = c.H, ri.intermediate = c.I, ri.top_k = c.k, ri.num_experts = c.E;
  ri.gate_first = c.gate_first;
  ri.bf16_partials = c.finalize == FinalizeMode::kDeterministicBf16;
  ri.down_k_splits = c.down_k_splits ? c.down_k_splits : plan_of(p.layer, c.T).down_k_splits;
  ri.hidden_bf16 = p.in.hidden.data();
  ri.topk_ids = p.in.ids.data();
  ri.topk_weights = p.in.weights.data();
  const reference::DecodedExperts w13d(w13v), w2d(w2v);
  ri.w13 = &w13d;
  ri.w2 = &w2d;
  std::vector<std::vector<uint16_t>> act_by_pair(static_cast<size_t>(P));
  std::vector<reference::PairActivation> refs(static_cast<size_t>(rows));
  parallel_for(rows, [&](int64_t r) {
    const int32_t pair = perm[static_cast<size_t>(r)];
    refs[static_cast<size_t>(r)] = reference::reference_gate_up(ri, pair / c.k, pair % c.k);
  });
  std::atomic<int64_t> bad{0};
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t pair = perm[static_cast<size_t>(r)];
    const auto& ref = refs[static_cast<size_t>(r)];
    ASSERT_EQ(static_cast<int64_t>(ref.act.size()), c.I);
    auto& mine = act_by_pair[static_cast<size_t>(pair)];
    mine.assign(act.begin() + r * c.I, act.begin() + (r + 1) * c.I);
    for (int64_t j = 0; j < c.I; ++j) {
      const double got = bf16_to_float(mine[static_cast<size_t>(j)]);
      const double want = ref.act[static_cast<size_t>(j)], tol = ref.act_tol[static_cast<size_t>(j)];
      if (!matches(got, want, tol) && bad++ < 5)
        ADD_FAILURE() << "act row " << r << " (pair " << pair << ") col " << j << ": got " << got << " want " << want
                      << " tol " << tol;
    }
  }
  ASSERT_EQ(bad.load(), 0) << bad.load() << " SwiGLU outputs out of tolerance";

  // Layer output from the GPU's own SwiGLU values: every element within tolerance (non-finite only
  // where the bf16-rounded reference is non-finite too).
  const auto ref = reference_down_parallel(ri, act_by_pair);
  std::vector<uint16_t> out(static_cast<size_t>(c.T * c.H));
  ASSERT_EQ(cudaMemcpy(out.data(), p.out.get(), out.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  double max_rel = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const double got = bf16_to_float(out[i]);
    if (!matches(got, ref.out[i], ref.tol[i]) && bad++ < 5)
      ADD_FAILURE() << "out[" << i / c.H << ", " << i % c.H << "]: got " << got << " want " << ref.out[i] << " tol "
                    << ref.tol[i];
    if (ref.tol[i] > 0 && std::isfinite(got)) max_rel = std::max(max_rel, std::fabs(got - ref.out[i]) / ref.tol[i]);
  }
  ASSERT_EQ(bad.load(), 0) << bad.load() << " outputs out of tolerance";
  ::testing::Test::RecordProperty("max_err_over_tol", std::to_string(max_rel));
}

// p's plan run phase by phase (the testing hooks, as the bench's per-phase times run it: routing with gate_up, then
// down alone), output and workspace poisoned first, against the reference.
inline void check_phase_by_phase(Problem& p) {
  ASSERT_TRUE(p.out.poison(0xFF) && p.ws.poison(0xFF));
  ASSERT_TRUE(run_phases(p.layer, p.args(), p.ws.get(), p.ws.bytes(), nullptr, kPhaseRouting | kPhaseGateUp).is_ok());
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_TRUE(run_phases(p.layer, p.args(), p.ws.get(), p.ws.bytes(), nullptr, kPhaseDown).is_ok());
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  SCOPED_TRACE("phase by phase");
  check_against_reference(p);
}


}  // namespace fp4moe::testing
