// GPU tests of the NVFP4 MoE layer against the fp64 CPU reference: routing tables exactly, the SwiGLU
// output and the layer output element-wise within tolerances derived from K and bf16; every element
// written; determinism; CUDA-graph capture; all shipped block_m configs.
// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>
#include <vector>

#include "fp4moe/bf16.h"
#include "fp4moe/moe.h"
#include "fp4moe/shard.h"
#include "fp4moe/tuning.h"
#include "kernels/moe_routing_layout.h"
#include "tests/gpu/moe_check.h"

namespace fp4moe {
namespace {

using testing::Case;
using testing::DeviceBuffer;
using testing::Problem;
using testing::Routing;
using testing::check_against_reference;
using testing::plan_of;

// Sets up `c` with fresh random data in *p, runs it (outputs poisoned first) and checks it against the reference.
void run_case(const Case& c, Problem* p) {
  p->setup(c, devdata::fresh_seed() % 1000003);
  if (::testing::Test::HasFatalFailure()) return;
  p->run_poisoned();
  if (::testing::Test::HasFatalFailure()) return;
  check_against_reference(*p);
}

void run_case(const Case& c) {
  Problem p;
  run_case(c, &p);
}

// The routing tables a run left in p's workspace, read through `l`: expert_offsets [E + 1], perm_pair [T k]
// and inv_perm [T k], one after the other.
std::vector<int32_t> routing_tables(const MoeLayer& l, const Problem& p) {
  const int64_t E = p.c.E, P = p.c.T * p.c.k;
  const testing::MoeWorkspaceView v = testing::workspace_view(l, p.ws.get(), p.c.T);
  std::vector<int32_t> t(static_cast<size_t>(E + 1 + 2 * P));
  EXPECT_EQ(cudaMemcpy(t.data(), v.expert_offsets, static_cast<size_t>(E + 1) * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(t.data() + E + 1, v.perm_pair, static_cast<size_t>(P) * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(t.data() + E + 1 + P, v.inv_perm, static_cast<size_t>(P) * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  return t;
}

#define MOE_CASE(name, ...)            \
  TEST(MoeGpu, name) {                 \
    FP4MOE_SKIP_WITHOUT_GPU();         \
    run_case(Case{__VA_ARGS__});       \
  }

MOE_CASE(T1_E8_k1, 1, 8, 256, 256, 1)
MOE_CASE(T3_E8_k2, 3, 8, 256, 512, 2)
MOE_CASE(T3_E64_k8_UpFirst, 3, 64, 512, 256, 8, Routing::kUniform, 0, FinalizeMode::kDeterministic, false)
MOE_CASE(T64_E64_k8, 64, 64, 256, 256, 8)
MOE_CASE(T64_E256_k8_ModelOptScales, 64, 256, 256, 256, 8, Routing::kUniform, 0, FinalizeMode::kDeterministic, true, true)
MOE_CASE(T512_E256_k8, 512, 256, 256, 256, 8)
MOE_CASE(T512_E64_k8_Skewed, 512, 64, 256, 256, 8, Routing::kSkewed)
MOE_CASE(T64_E8_k2_OneExpert, 64, 8, 256, 256, 2, Routing::kOneExpert)
MOE_CASE(T64_E8_k2_OneExpertOnly, 64, 1, 256, 256, 1)
MOE_CASE(T40_E16_k4_BadIds, 40, 16, 256, 256, 4, Routing::kWithBadIds)
MOE_CASE(T100_E16_k4_Atomic, 100, 16, 512, 256, 4, Routing::kUniform, 0, FinalizeMode::kAtomic)
MOE_CASE(T200_E16_k4_BlockM8, 200, 16, 256, 256, 4, Routing::kUniform, 8)
MOE_CASE(T200_E16_k4_BlockM16, 200, 16, 256, 256, 4, Routing::kUniform, 16)
MOE_CASE(T200_E16_k4_BlockM32, 200, 16, 256, 256, 4, Routing::kUniform, 32)
MOE_CASE(T200_E16_k4_BlockM64, 200, 16, 256, 256, 4, Routing::kSkewed, 64)
MOE_CASE(T300_E8_k4_BlockM64_I512, 300, 8, 256, 512, 4, Routing::kUniform, 64)
MOE_CASE(T500_E16_k4_BlockM32_Skewed_Atomic, 500, 16, 256, 512, 4, Routing::kSkewed, 32, FinalizeMode::kAtomic)
MOE_CASE(Glm5FullShape_T3, 3, 256, 6144, 2048, 8)
// The down GEMM split along K (partial sums per K range, summed in order by the finalize, or atomics).
MOE_CASE(Glm5FullShape_T1_DownSplits4, 1, 256, 6144, 2048, 8, Routing::kUniform, 0, FinalizeMode::kDeterministic, true, false, 4)
MOE_CASE(T3_E8_I1024_DownSplits4, 3, 8, 256, 1024, 2, Routing::kUniform, 0, FinalizeMode::kDeterministic, true, false, 4)
MOE_CASE(T5_E8_I2048_DownSplits8_Atomic, 5, 8, 256, 2048, 2, Routing::kUniform, 16, FinalizeMode::kAtomic, true, false, 8)
MOE_CASE(T70_E16_I1024_DownSplits2_BlockM64_NoPdl, 70, 16, 256, 1024, 4, Routing::kSkewed, 64, FinalizeMode::kDeterministic, true, false, 2, false)
// bf16 partials (FinalizeMode::kDeterministicBf16): the TP8 shard's shape at T=1 (the direct decode path's bf16
// terms; with block_m 8, the tiled kernels' fused routing and split gate_up), the warp-specialized tiles, and K
// splits (the split stride in bf16 elements).
MOE_CASE(Glm5Tp8Shape_T1_Bf16Partials, 1, 256, 6144, 256, 8, Routing::kUniform, 0, FinalizeMode::kDeterministicBf16)
MOE_CASE(Glm5Tp8Shape_T1_Bf16Partials_Tiled, 1, 256, 6144, 256, 8, Routing::kUniform, 8, FinalizeMode::kDeterministicBf16)
MOE_CASE(T512_E256_k8_Bf16Partials, 512, 256, 256, 256, 8, Routing::kUniform, 0, FinalizeMode::kDeterministicBf16)
MOE_CASE(T200_E16_k4_BlockM8_Skewed_Bf16Partials, 200, 16, 256, 256, 4, Routing::kSkewed, 8, FinalizeMode::kDeterministicBf16)
MOE_CASE(T3_E8_I1024_DownSplits4_Bf16Partials, 3, 8, 256, 1024, 2, Routing::kUniform, 0, FinalizeMode::kDeterministicBf16, true, false, 4)
MOE_CASE(T70_E16_I1024_DownSplits2_BlockM64_Bf16Partials, 70, 16, 256, 1024, 4, Routing::kSkewed, 64, FinalizeMode::kDeterministicBf16, true, false, 2)

// The bf16-partial mode really rounds its terms: on the same inputs some outputs differ from the fp32-partial
// mode's (a layer that ignored the mode would match bit for bit and still pass its reference test), its
// workspace holds half the partial bytes, and its plan says so.
TEST(MoeGpu, Bf16PartialsRoundTheTermsAndHalveTheirBuffer) {
  FP4MOE_SKIP_WITHOUT_GPU();
  const uint64_t seed = devdata::fresh_seed() % 1000003;
  Problem f32, b16;
  f32.setup(Case{128, 32, 512, 256, 8, Routing::kUniform, 32}, seed);
  if (HasFatalFailure()) return;
  b16.setup(Case{128, 32, 512, 256, 8, Routing::kUniform, 32, FinalizeMode::kDeterministicBf16}, seed);
  if (HasFatalFailure()) return;
  f32.run_poisoned();
  b16.run_poisoned();
  if (HasFatalFailure()) return;
  const auto a = f32.out.download<uint16_t>(128 * 512), b = b16.out.download<uint16_t>(128 * 512);
  size_t differ = 0;
  for (size_t i = 0; i < a.size(); ++i) differ += a[i] != b[i];
  EXPECT_GT(differ, a.size() / 100) << "bf16 partials changed " << differ << " of " << a.size() << " outputs";
  EXPECT_LT(differ, a.size()) << "every output differs: not one more rounding per term";
  // The partial buffer: 128 x 8 rows of H per K split, fp32 or bf16; the rest of the workspace is the same.
  // (workspace_size covers the largest down K split a plan may take: a whole number of such buffers)
  const size_t saved = f32.layer.workspace_size(128) - b16.layer.workspace_size(128), half = size_t{128} * 8 * 512 * 2;
  EXPECT_TRUE(saved >= half && saved % half == 0) << saved;
  EXPECT_NE(b16.layer.describe(128).find("deterministic-bf16 finalize"), std::string::npos) << b16.layer.describe(128);
}

// A tuning cache's choice for a tokens bucket sets both the block size and the down GEMM's K splits, and
// workspace_size grows to hold the tuned split count's partial sums.
TEST(MoeGpu, TunedBlockMAndDownSplitsAreUsed) {
  FP4MOE_SKIP_WITHOUT_GPU();
  Problem p;
  Case c{3, 8, 256, 1024, 2};
  c.direct_decode = false;  // (the direct decode path, which has nothing to tune, takes T=3 otherwise)
  p.setup(c, devdata::fresh_seed() % 1000003);
  if (HasFatalFailure()) return;
  const size_t before = p.layer.workspace_size(3);
  TuningCache cache(TuningEnvironment{"any GPU", 1, 0, 0, "any"});
  cache.record(MoeShape{8, 256, 1024, 2}, FinalizeMode::kDeterministic, 4, TunedChoice{16, 1.0, 4});
  ASSERT_EQ(p.layer.use_tuning(cache), 1u);
  EXPECT_EQ(plan_of(p.layer, 3).block_m, 16);
  EXPECT_EQ(plan_of(p.layer, 3).down_k_splits, 4);
  EXPECT_EQ(plan_of(p.layer, 5).down_k_splits, 1) << "another bucket keeps the default";
  EXPECT_GT(p.layer.workspace_size(3), before);
  // run() uses the tuned split count: the untuned size is now too small for its partial sums.
  const Status small = p.layer.run(p.args(), p.ws.get(), before, nullptr);
  EXPECT_EQ(small.code(), StatusCode::kResourceExhausted) << small.to_string();
  p.ws.alloc(p.layer.workspace_size(3));
  p.run_poisoned();
  if (HasFatalFailure()) return;
  check_against_reference(p);
}

// Programmatic dependent launch changes when kernels start, never what they compute.
TEST(MoeGpu, ProgrammaticLaunchIsBitIdenticalToPlainLaunch) {
  FP4MOE_SKIP_WITHOUT_GPU();
  Problem p;
  p.setup(Case{6, 16, 512, 1024, 4, Routing::kUniform, 0, FinalizeMode::kDeterministic, true, false, 4, true},
          devdata::fresh_seed() % 1000003);
  if (HasFatalFailure()) return;
  p.run_poisoned();
  if (HasFatalFailure()) return;
  check_against_reference(p);
  const auto with_pdl = p.out.download<uint16_t>(static_cast<size_t>(6 * 512));
  MoeLayerOptions o;
  o.programmatic_launch = false;
  MoeLayer plain;
  const Status st = plain.init(MoeShape{16, 512, 1024, 4}, o, p.w13.device(), p.w2.device(), nullptr);
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  ASSERT_TRUE(p.out.poison(0xFF));
  const Status r = plain.run(p.args(), p.ws.get(), p.ws.bytes(), nullptr);
  ASSERT_TRUE(r.is_ok()) << r.to_string();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(p.out.download<uint16_t>(with_pdl.size()), with_pdl) << "plain and programmatic launches differ";
}

// The types of the last two dependencies of one forward pass of `l` captured in a CUDA graph: into its sink (the
// finalize kernel) and into that node's predecessor (down). A launch with programmatic stream serialization becomes a
// programmatic edge (cudaGraphDependencyTypeProgrammatic), a plain one a default edge.
void last_two_edge_types(const MoeLayer& l, const MoeForwardArgs& a, void* ws, size_t ws_bytes, int* into_sink,
                         int* into_pred) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  cudaGraph_t graph = nullptr;
  testing::capture_graph([&](cudaStream_t cs) { return l.run(a, ws, ws_bytes, cs); }, s, &graph);
  if (::testing::Test::HasFatalFailure()) return;
  size_t n = 0;
  ASSERT_EQ(cudaGraphGetEdges(graph, nullptr, nullptr, nullptr, &n), cudaSuccess);
  std::vector<cudaGraphNode_t> from(n), to(n);
  std::vector<cudaGraphEdgeData> data(n);
  ASSERT_EQ(cudaGraphGetEdges(graph, from.data(), to.data(), data.data(), &n), cudaSuccess);
  ASSERT_GE(n, 2u) << "a pass of routing, gate_up, down and the finalize is a chain of kernels";
  auto edge_into = [&](cudaGraphNode_t node) {
    for (size_t i = 0; i < n; ++i)
      if (to[i] == node) return static_cast<int>(i);
    return -1;
  };
  cudaGraphNode_t sink = nullptr;
  for (size_t i = 0; i < n && sink == nullptr; ++i)
    if (std::find(from.begin(), from.end(), to[i]) == from.end()) sink = to[i];
  const int last = edge_into(sink);
  ASSERT_GE(last, 0);
  const int before = edge_into(from[static_cast<size_t>(last)]);
  ASSERT_GE(before, 0);
  *into_sink = data[static_cast<size_t>(last)].type;
  *into_pred = data[static_cast<size_t>(before)].type;
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
}

// A TP shard's prefill tile (I <= kPlainFinalizeMaxDownK) on sm_90's kernels has its finalize launched plain after a
// programmatic down (MoeRunPlan::programmatic_finalize), or as its programmatic dependent with
// MoeLayerOptions::programmatic_prefill_finalize: the same output bit for bit, checked against the reference, at both
// prefill tiles. (sm_120's kernels keep the finalize programmatic either way: the rule was measured on sm_90.)
TEST(MoeGpu, PrefillFinalizeLaunchIsBitIdenticalEitherWay) {
  FP4MOE_SKIP_WITHOUT_GPU();
  if (testing::compute_capability_major() != 9) GTEST_SKIP() << "the plain prefill finalize is planned on sm_90 only";
  int ran = 0;
  for (int bm : {64, 128}) {
    Problem p;
    p.setup(Case{300, 16, 512, 256, 4, Routing::kUniform, bm}, devdata::fresh_seed() % 1000003);
    if (HasFatalFailure()) return;
    MoeRunPlan plan;
    ASSERT_TRUE(p.layer.plan(p.args(), &plan).is_ok());
    if (plan.block_m != bm) continue;  // (the 128-token tile is sm_90's warp-specialized one only)
    SCOPED_TRACE(plan.to_string());
    ASSERT_TRUE(plan.programmatic_launch);
    EXPECT_FALSE(plan.programmatic_finalize);
    p.run_poisoned();
    if (HasFatalFailure()) return;
    check_against_reference(p);
    const auto plain_finalize = p.out.download<uint16_t>(static_cast<size_t>(300 * 512));
    MoeLayerOptions o = options_for(p.c);
    o.programmatic_prefill_finalize = true;
    MoeLayer all_pdl;
    const Status st = all_pdl.init(p.layer.shape(), o, p.w13.device(), p.w2.device(), nullptr);
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    MoeRunPlan other;
    ASSERT_TRUE(all_pdl.plan(p.args(), &other).is_ok());
    EXPECT_TRUE(other.programmatic_finalize) << other.to_string();
    ASSERT_TRUE(p.out.poison(0xFF) && p.ws.poison(0xFF));
    const Status r = all_pdl.run(p.args(), p.ws.get(), p.ws.bytes(), nullptr);
    ASSERT_TRUE(r.is_ok()) << r.to_string();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(p.out.download<uint16_t>(plain_finalize.size()), plain_finalize)
        << "the finalize launched plain and as a programmatic dependent differ";
    // The launches themselves: down -> finalize a default edge under the rule and a programmatic one with the option;
    // gate_up -> down programmatic either way.
    int sink = -1, pred = -1;
    last_two_edge_types(p.layer, p.args(), p.ws.get(), p.ws.bytes(), &sink, &pred);
    if (HasFatalFailure()) return;
    EXPECT_EQ(sink, cudaGraphDependencyTypeDefault) << "down -> finalize, the rule";
    EXPECT_EQ(pred, cudaGraphDependencyTypeProgrammatic) << "gate_up -> down, the rule";
    last_two_edge_types(all_pdl, p.args(), p.ws.get(), p.ws.bytes(), &sink, &pred);
    if (HasFatalFailure()) return;
    EXPECT_EQ(sink, cudaGraphDependencyTypeProgrammatic) << "down -> finalize, programmatic_prefill_finalize";
    EXPECT_EQ(pred, cudaGraphDependencyTypeProgrammatic) << "gate_up -> down, programmatic_prefill_finalize";
    ++ran;
  }
  EXPECT_EQ(ran, 2) << "sm_90 plans both prefill tiles for this shape";
}

// Two layers' forward passes back to back on one stream and one workspace, the second taking the first's output as
// its hidden states, as a model's consecutive MoE layers do: each output equals that layer's own run bit for bit, on
// the stream and in two replays of a CUDA graph of both. Each pass's first kernel is a programmatic dependent of the
// previous pass's last kernel, whose output it reads and whose workspace it overwrites; only its wait keeps them
// apart, and the outputs are poisoned before every run, so a read that came early would show. Cases: the direct
// decode path, the tiled kernels routing in registers, the routing kernel, the multi-block routing kernels, and a
// gate_up K split (a memset first: the first kernel then launches normally), and a prefill tile (its finalize
// launched plain on sm_90).
TEST(MoeGpu, ConsecutiveLayersOnOneWorkspaceMatchTheirOwnRuns) {
  FP4MOE_SKIP_WITHOUT_GPU();
  enum Kind { kDirect, kFused, kRouted, kMultiBlock, kSplit, kPrefill };
  std::vector<std::pair<Kind, Case>> cases = {{kDirect, Case{1, 256, 2048, 256, 8}},
                                              {kFused, Case{3, 8, 256, 512, 2}},
                                              {kRouted, Case{64, 64, 256, 256, 8}},
                                              {kMultiBlock, Case{300, 16, 256, 256, 8}},
                                              {kSplit, Case{2, 8, 1024, 256, 4}},
                                              {kPrefill, Case{300, 16, 256, 256, 8, Routing::kUniform, 64}}};
  cases[kFused].second.direct_decode = false;
  cases[kSplit].second.direct_decode = false;
  cases[kSplit].second.gate_up_k_splits = 2;
  for (const auto& [kind, c] : cases) {
    SCOPED_TRACE(c.name());
    const uint64_t seed = devdata::fresh_seed() % 1000003;
    Problem p, q;
    p.setup(c, seed);
    if (HasFatalFailure()) return;
    q.setup(c, seed + 1);
    if (HasFatalFailure()) return;
    MoeRunPlan plan;
    ASSERT_TRUE(p.layer.plan(p.args(), &plan).is_ok());
    ASSERT_TRUE(plan.programmatic_launch) << plan.to_string();
    if (kind == kDirect) EXPECT_TRUE(plan.direct_decode) << plan.to_string();
    if (kind == kFused) EXPECT_TRUE(!plan.direct_decode && plan.fused_routing) << plan.to_string();
    if (kind == kRouted || kind == kMultiBlock) EXPECT_FALSE(plan.fused_routing) << plan.to_string();
    if (kind == kMultiBlock) EXPECT_TRUE(kernels::routing_multi_block(c.T * c.k)) << "the multi-block routing kernels";
    if (kind == kSplit) EXPECT_EQ(plan.gate_up_k_splits, 2) << plan.to_string();
    // (a prefill tile: its finalize launches plain, and the next pass's first kernel is its programmatic dependent)
    if (kind == kPrefill)
      EXPECT_TRUE(plan.block_m == 64 && plan.programmatic_finalize == (testing::compute_capability_major() != 9))
          << plan.to_string();
    // Each layer's own run: p on its inputs (checked against the reference), then q on p's output.
    p.run_poisoned();
    if (HasFatalFailure()) return;
    check_against_reference(p);
    const size_t n = static_cast<size_t>(c.T * c.H);
    const auto want_p = p.out.download<uint16_t>(n);
    MoeForwardArgs qa = q.args();
    qa.hidden = p.out.get();
    ASSERT_TRUE(q.out.poison(0xFF) && q.ws.poison(0xFF));
    ASSERT_TRUE(q.layer.run(qa, q.ws.get(), q.ws.bytes(), nullptr).is_ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto want_q = q.out.download<uint16_t>(n);
    ASSERT_GE(p.ws.bytes(), q.layer.workspace_size(c.T, c.down_k_splits, c.gate_up_k_splits));
    // Both on one stream and p's workspace.
    auto enqueue = [&](cudaStream_t s) {
      const Status a = p.layer.run(p.args(), p.ws.get(), p.ws.bytes(), s);
      return a.is_ok() ? q.layer.run(qa, p.ws.get(), p.ws.bytes(), s) : a;
    };
    auto poison = [&] { return p.out.poison(0xFF) && q.out.poison(0xFF) && p.ws.poison(0xFF); };
    ASSERT_TRUE(poison());
    const Status st = enqueue(nullptr);
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(p.out.download<uint16_t>(n), want_p) << "the first layer's output, on the stream";
    EXPECT_EQ(q.out.download<uint16_t>(n), want_q) << "the second layer's output, on the stream";
    // Both captured in one graph, replayed twice.
    testing::replay_graph(enqueue, 2, poison, [&](int replay) {
      EXPECT_EQ(p.out.download<uint16_t>(n), want_p) << "the first layer's output, graph replay " << replay;
      EXPECT_EQ(q.out.download<uint16_t>(n), want_q) << "the second layer's output, graph replay " << replay;
    });
  }
}

// At most 64 (token, expert) pairs the GEMM kernels route themselves (no routing kernel): the tables, the
// error report and the output equal the routing kernel's bit for bit, and the output the reference. Cases, at up
// to 32 pairs (one pair per lane of the routing warp) and at 33-64 (two): several chunks of one expert, skipped ids,
// a non-finite router weight, E not a multiple of 32, k = 1, atomic finalize, bf16 partials, the 16-token tile with
// 2 down splits, the multistage 16-token tile above 32 pairs (warp_specialized off), down on the 8-token tile's
// 3-block config (64 pairs); two are also captured in a CUDA graph. The chunk table gate_up's block 0 writes is
// checked by running the down phase alone on it.
TEST(MoeGpu, FusedSmallRoutingMatchesTheRoutingKernel) {
  FP4MOE_SKIP_WITHOUT_GPU();
  const Case cases[] = {
      Case{32, 4, 256, 256, 1, Routing::kOneExpert, 8},
      Case{4, 16, 256, 512, 8, Routing::kWithBadIds},
      Case{2, 300, 256, 512, 8, Routing::kUniform, 16, FinalizeMode::kDeterministic, true, false, 2},
      Case{32, 8, 512, 256, 1, Routing::kSkewed, 0, FinalizeMode::kAtomic},  // k = 1: one atomic term per output, bits fixed
      Case{1, 64, 256, 512, 8, Routing::kUniform, 8, FinalizeMode::kDeterministic, true, false, 2},
      // 33-64 pairs
      Case{8, 256, 256, 512, 8, Routing::kUniform, 8},  // 64 pairs over many experts: down on the 3-block config
      Case{6, 16, 256, 256, 8, Routing::kWithBadIds},   // 48 pairs, several rows per expert
      Case{64, 4, 256, 256, 1, Routing::kOneExpert, 8},  // 8 chunks of one expert
      Case{40, 8, 512, 256, 1, Routing::kSkewed, 0, FinalizeMode::kAtomic},
      Case{5, 64, 256, 512, 8, Routing::kUniform, 8, FinalizeMode::kDeterministic, true, false, 2},
      Case{7, 64, 256, 256, 8, Routing::kUniform, 8, FinalizeMode::kDeterministicBf16},
      Case{8, 32, 256, 512, 8, Routing::kUniform, 16, FinalizeMode::kDeterministic, true, false, 0, true, false},
  };
  for (Case c : cases) {
    // The tiled kernels with and without their fused routing (the direct decode path, which routes inside its own
    // kernels and sums K in another order, is compared with them in test_moe_direct.cu).
    c.direct_decode = false;
    SCOPED_TRACE(c.name());
    Problem p;
    run_case(c, &p);
    if (HasFatalFailure()) return;
    ASSERT_TRUE(plan_of(p.layer, c.T, c.block_m).fused_routing) << p.layer.describe(c.T);
    const int64_t P = c.T * c.k;
    // A non-finite router weight (a skipped pair) on top of the case's routing, for both paths.
    p.in.weights[static_cast<size_t>(P - 1)] = std::nanf("");
    ASSERT_TRUE(p.weights.upload(p.in.weights));
    MoeLayerOptions o = testing::options_for(c);
    o.fuse_small_routing = false;
    MoeLayer unfused;
    ASSERT_TRUE(unfused.init(MoeShape{c.E, c.H, c.I, c.k}, o, p.w13.device(), p.w2.device(), nullptr).is_ok());
    ASSERT_FALSE(plan_of(unfused, c.T, c.block_m).fused_routing);
    std::vector<uint16_t> outs[2];
    std::vector<int32_t> tables[2];
    StatusCode check_codes[2];
    std::string check_msgs[2];
    const MoeLayer* layers[2] = {&p.layer, &unfused};
    for (int i = 0; i < 2; ++i) {
      ASSERT_TRUE(p.out.poison(0xFF) && p.ws.poison(0xFF));
      const Status st = layers[i]->run(p.args(), p.ws.get(), p.ws.bytes(), nullptr);
      ASSERT_TRUE(st.is_ok()) << st.to_string();
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      outs[i] = p.out.download<uint16_t>(static_cast<size_t>(c.T * c.H));
      tables[i] = routing_tables(*layers[i], p);
      const Status ck = layers[i]->check(p.ws.get(), nullptr);
      check_codes[i] = ck.code();
      check_msgs[i] = ck.to_string();
    }
    EXPECT_EQ(outs[0], outs[1]) << "fused routing and the routing kernel give different outputs";
    EXPECT_EQ(tables[0], tables[1]) << "fused routing and the routing kernel give different tables";
    EXPECT_EQ(check_codes[0], StatusCode::kInvalidArgument) << "the non-finite weight was not reported";
    EXPECT_EQ(check_msgs[0], check_msgs[1]);
    // Routing + gate_up fused (block 0 writes every table, the chunk table too), then the down phase alone,
    // which reads those tables from the workspace: the same output.
    ASSERT_TRUE(p.out.poison(0xFF) && p.ws.poison(0xFF));
    ASSERT_TRUE(testing::run_phases(p.layer, p.args(), p.ws.get(), p.ws.bytes(), nullptr,
                                    testing::kPhaseRouting | testing::kPhaseGateUp).is_ok());
    ASSERT_TRUE(testing::run_phases(p.layer, p.args(), p.ws.get(), p.ws.bytes(), nullptr, testing::kPhaseDown).is_ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(p.out.download<uint16_t>(outs[0].size()), outs[0]) << "down alone on the fused gate_up's tables differs";
    if (c.T == 2 || c.T == 8) {  // CUDA-graph capture of the fused path replays to the same output
      std::vector<std::vector<uint16_t>> replayed;
      testing::graph_replays(p, p.args(), 1, &replayed);
      if (HasFatalFailure()) return;
      EXPECT_EQ(replayed.at(0), outs[0]) << "graph replay differs";
    }
  }
}

// sm_90's 16-, 32- and 64-token tiles both ways: the warp-specialized kernels (the default) and the
// multistage ones (MoeLayerOptions::warp_specialized off), against the reference: several items per block,
// both finalize modes, a split down K, skewed and one-expert routing, both gate/up orders; then a bit-identical
// rerun. A call of at most 32 pairs keeps the multistage 16-token kernels, which route the pairs themselves.
// The 32- and 64-token tiles' partial chunks run their wgmma at the rows rounded up to 16 (64 experts of about 40
// tokens at block_m 64: N = 48 for most, 32 and 64 for some; at 32, N = 16 for chunks of up to 16 rows).
// With warp_specialized off, sm_90's multistage 32- and 64-token tiles run (they multiply with wgmma): the plan
// says so, so this is the test that reaches that path.
TEST(MoeGpu, WarpSpecializedAndMultistageTilesMatchTheReference) {
  FP4MOE_SKIP_WITHOUT_GPU();
  FP4MOE_SKIP_UNLESS_SM90("the warp-specialized kernels");
  const Case cases[] = {
      Case{512, 64, 512, 512, 8, Routing::kUniform, 64},
      Case{320, 64, 256, 512, 8, Routing::kUniform, 64},
      Case{320, 64, 256, 512, 8, Routing::kUniform, 32, FinalizeMode::kAtomic},
      Case{300, 16, 256, 512, 2, Routing::kSkewed, 32, FinalizeMode::kDeterministic, false},
      Case{64, 8, 256, 512, 8, Routing::kSkewed, 64, FinalizeMode::kAtomic, true, false, 2},
      Case{300, 32, 512, 256, 4, Routing::kUniform, 32},
      Case{700, 8, 512, 512, 8, Routing::kOneExpert, 64, FinalizeMode::kDeterministic, true, false, 2, false},
      // Long K (16 K tiles per item in both GEMMs, more than the 32-token tile's 8 stages): every block reuses
      // its stages, so the empty-barrier waits and both parities run for each tile.
      Case{128, 8, 2048, 2048, 2, Routing::kUniform, 32},
      Case{128, 4, 2048, 2048, 2, Routing::kUniform, 64, FinalizeMode::kDeterministic, true, false, 2},
      Case{200, 16, 512, 512, 4, Routing::kUniform, 16},
      Case{96, 8, 2048, 1024, 2, Routing::kSkewed, 16, FinalizeMode::kAtomic, false, false, 2},
      Case{300, 64, 256, 512, 8, Routing::kOneExpert, 16},
      Case{300, 16, 256, 512, 2, Routing::kSkewed, 32, FinalizeMode::kDeterministicBf16},
      Case{200, 16, 512, 512, 4, Routing::kUniform, 16, FinalizeMode::kDeterministicBf16, true, false, 2},
  };
  for (bool ws : {true, false}) {
    for (Case c : cases) {
      c.warp_specialized = ws;
      SCOPED_TRACE(c.name());
      Problem p;
      run_case(c, &p);
      if (HasFatalFailure()) return;
      const MoeRunPlan rp = plan_of(p.layer, c.T);
      EXPECT_EQ(rp.gate_up.family == KernelFamily::kWarpSpecialized, ws) << rp.to_string();
      EXPECT_EQ(rp.gate_up.wgmma, ws || rp.block_m >= 32) << rp.to_string();
      EXPECT_FALSE((plan_of(p.layer, c.T, 8).gate_up.family == KernelFamily::kWarpSpecialized)) << "the 8-token tile has no such kernels";
      EXPECT_EQ((plan_of(p.layer, c.T, 16).gate_up.family == KernelFamily::kWarpSpecialized), ws) << "(every case has more than 32 pairs)";
      EXPECT_FALSE((plan_of(p.layer, 1, 16).gate_up.family == KernelFamily::kWarpSpecialized)) << "at most 32 pairs: the multistage kernels route them";
      EXPECT_TRUE(plan_of(p.layer, 1, 16).fused_routing);
      EXPECT_EQ(p.layer.describe(c.T).find("warp-specialized") != std::string::npos, ws) << p.layer.describe(c.T);
      if (finalize_is_deterministic(c.finalize)) {
        const auto first = p.out.download<uint16_t>(static_cast<size_t>(c.T * c.H));
        p.run_poisoned();
        if (HasFatalFailure()) return;
        EXPECT_EQ(p.out.download<uint16_t>(first.size()), first) << "two deterministic runs differ";
      }
    }
  }
}

// The prefill tile (warp-specialized, 128 tokens per item, the producer's registers moved to the consumers):
// full and partial chunks (experts of 256, 100, 137, 150, 173, 180, 203, 222, 233 and 1..127 tokens: chunks of 9, 22,
// 45, 52, 75, 94, 100 and 105 rows run the wgmma at N = 16, 32, 48, 64, 80, 96, 112 and 112), one expert of 700 (six
// chunks), 64 experts of about 96 tokens each (more items than blocks, so a block's later items start on the accumulators of
// an earlier one at another width), K long enough to
// reuse every stage (16 K tiles against 4 stages), a split down K, every finalize mode, upfirst and ModelOpt scales; each against the reference with poisoned outputs, deterministic reruns bit for bit,
// and a graph replay of the same.
TEST(MoeGpu, PrefillTileMatchesTheReference) {
  FP4MOE_SKIP_WITHOUT_GPU();
  FP4MOE_SKIP_UNLESS_SM90("the 128-token tile is warp-specialized");
  const Case cases[] = {
      Case{1024, 8, 512, 512, 2, Routing::kUniform, 128},
      Case{700, 8, 512, 512, 8, Routing::kOneExpert, 128, FinalizeMode::kDeterministicBf16},
      Case{300, 16, 256, 512, 2, Routing::kSkewed, 128, FinalizeMode::kAtomic, false, true},
      Case{256, 4, 2048, 2048, 2, Routing::kUniform, 128, FinalizeMode::kDeterministic, true, false, 2},
      Case{548, 8, 1024, 256, 4, Routing::kSkewed, 128},
      Case{137, 1, 256, 256, 1, Routing::kUniform, 128, FinalizeMode::kDeterministicBf16},
      Case{150, 1, 512, 256, 1, Routing::kUniform, 128, FinalizeMode::kAtomic},
      Case{180, 1, 256, 512, 1, Routing::kUniform, 128},
      Case{100, 1, 512, 256, 1, Routing::kUniform, 128},
      Case{173, 1, 256, 256, 1, Routing::kUniform, 128, FinalizeMode::kDeterministicBf16},
      Case{203, 1, 256, 512, 1, Routing::kUniform, 128},
      Case{222, 1, 512, 256, 1, Routing::kUniform, 128, FinalizeMode::kAtomic},
      Case{233, 1, 256, 256, 1, Routing::kUniform, 128},
      Case{2048, 64, 256, 512, 3, Routing::kUniform, 128},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name());
    Problem p;
    run_case(c, &p);
    if (HasFatalFailure()) return;
    const MoeRunPlan rp = plan_of(p.layer, c.T);
    EXPECT_EQ(rp.block_m, 128) << rp.to_string();
    EXPECT_EQ(rp.gate_up.family, KernelFamily::kWarpSpecialized) << rp.to_string();
    EXPECT_EQ(rp.down.family, KernelFamily::kWarpSpecialized) << rp.to_string();
    EXPECT_EQ(rp.down.block_k, 128) << rp.to_string();
    if (!finalize_is_deterministic(c.finalize)) continue;
    testing::expect_reruns_bit_identical(p);
    if (HasFatalFailure()) return;
  }
}

TEST(MoeGpu, DeterministicRunsAreBitIdenticalAndGraphReplayMatches) {
  FP4MOE_SKIP_WITHOUT_GPU();
  Problem p;
  p.setup(Case{256, 64, 256, 256, 8}, devdata::fresh_seed() % 1000003);
  if (HasFatalFailure()) return;
  p.run_poisoned();
  if (HasFatalFailure()) return;
  testing::expect_reruns_bit_identical(p);
}

TEST(MoeGpu, ZeroTokensIsANoOp) {
  FP4MOE_SKIP_WITHOUT_GPU();
  Problem p;
  const Case c{4, 8, 256, 256, 2};
  p.setup(c, devdata::fresh_seed() % 1000003);
  if (HasFatalFailure()) return;
  ASSERT_TRUE(p.out.poison(0x3C));
  MoeForwardArgs a = p.args();
  a.num_tokens = 0;
  ASSERT_TRUE(p.layer.run(a, p.ws.get(), p.ws.bytes(), nullptr).is_ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  // Every element of the caller's output buffer (sized for c.T tokens) keeps the poison.
  const auto out = p.out.download<uint16_t>(static_cast<size_t>(c.T * c.H));
  ASSERT_EQ(out.size(), static_cast<size_t>(c.T * c.H));
  for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], 0x3C3C) << "element " << i << " written";
}

TEST(MoeLayerArgs, RejectedWithClearErrors) {
  // Shape checks need no device.
  MoeLayerOptions o;
  EXPECT_NE(MoeLayer::can_implement(MoeShape{0, 256, 256, 1}, o).message().find("num_experts"), std::string::npos);
  EXPECT_NE(MoeLayer::can_implement(MoeShape{8, 256, 256, 9}, o).message().find("top_k"), std::string::npos);
  EXPECT_NE(MoeLayer::can_implement(MoeShape{8, 200, 256, 2}, o).message().find("hidden"), std::string::npos);
  EXPECT_NE(MoeLayer::can_implement(MoeShape{8, 256, 100, 2}, o).message().find("intermediate"), std::string::npos);
  // Within the 2^40-element bound but past what the kernels' int32 rows and columns hold.
  EXPECT_NE(MoeLayer::can_implement(MoeShape{1, int64_t{1} << 31, 64, 1}, o).message().find("at most 2^30"),
            std::string::npos);
  EXPECT_NE(MoeLayer::can_implement(MoeShape{1, 256, int64_t{1} << 30, 1}, o).message().find("at most 2^29"),
            std::string::npos);
  o.block_m = 12;
  EXPECT_NE(MoeLayer::can_implement(MoeShape{8, 256, 256, 2}, o).message().find("block_m"), std::string::npos);
  MoeLayer uninit;
  EXPECT_FALSE(uninit.can_implement(MoeForwardArgs{}).is_ok());
}

// expert_range's sizes are bounded before any offset is formed (pointer arithmetic only: no device needed): a stack
// whose offsets would wrap, or a count of experts past any real layer, is rejected and the output left as it was.
TEST(MoeLayerArgs, ExpertRangeRejectsStacksWhoseOffsetsWrap) {
  static const float gs[4] = {1.0f, 1.0f, 1.0f, 1.0f};
  static uint8_t bytes[1024];
  const Nvfp4ExpertWeights w{bytes, bytes, gs};
  Nvfp4ExpertWeights out{bytes + 1, bytes + 2, gs};
  const int64_t big = int64_t{1} << 30;
  EXPECT_EQ(expert_range(w, 32, big, big, 16, 16, &out).code(), StatusCode::kInvalidArgument);  // 2^65 elements
  EXPECT_EQ(expert_range(w, INT64_MIN, 16, 16, 0, 1, &out).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(expert_range(w, (int64_t{1} << 20) + 1, 16, 16, 0, 1, &out).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(out.packed, bytes + 1);
  EXPECT_EQ(out.scales, bytes + 2);
  ASSERT_TRUE(expert_range(w, 4, 16, 32, 1, 2, &out).is_ok());
  EXPECT_EQ(static_cast<const uint8_t*>(out.packed), bytes + 16 * 16);  // one expert of 16 x 32 E2M1 codes
  EXPECT_EQ(static_cast<const uint8_t*>(out.scales), bytes + 16 * 2);   // and of 16 x 2 scales
  EXPECT_EQ(out.global_scale, gs + 1);
}

}  // namespace
}  // namespace fp4moe
