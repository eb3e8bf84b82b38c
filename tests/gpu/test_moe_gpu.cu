// GPU tests of the NVFP4 MoE layer against the fp64 CPU reference: routing tables exactly, the SwiGLU
// output and the layer output element-wise within tolerances derived from K and bf16; every element
// written; determinism; CUDA-graph capture; all shipped block_m configs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "fp4moe/bf16.h"
#include "fp4moe/moe.h"
#include "tests/gpu/moe_test_data.h"

namespace fp4moe {
namespace {

using testing::DeviceBuffer;
using testing::Routing;

struct Case {
  int64_t T, E, H, I, k;
  Routing routing = Routing::kUniform;
  int block_m = 0;  // 0: the layer's heuristic
  FinalizeMode finalize = FinalizeMode::kDeterministic;
  bool gate_first = true;
  bool dequant_kind = false;
  std::string name() const {
    return "T" + std::to_string(T) + "_E" + std::to_string(E) + "_H" + std::to_string(H) + "_I" + std::to_string(I) +
           "_k" + std::to_string(k) + "_" + testing::routing_name(routing) + "_bm" + std::to_string(block_m) +
           (finalize == FinalizeMode::kAtomic ? "_atomic" : "_det") + (gate_first ? "_gatefirst" : "_upfirst") +
           (dequant_kind ? "_ws2" : "");
  }
};

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
    ASSERT_TRUE(w13.make(c.E, 2 * c.I, c.H, seed * 7 + 1, c.dequant_kind));
    ASSERT_TRUE(w2.make(c.E, c.H, c.I, seed * 7 + 3, c.dequant_kind));
    in.make(c.T, c.H, c.E, c.k, c.routing, seed * 7 + 5);
    MoeShape shape{c.E, c.H, c.I, c.k};
    MoeLayerOptions o;
    o.block_m = c.block_m;
    o.finalize = c.finalize;
    o.gate_up_order = c.gate_first ? GateUpOrder::kGateFirst : GateUpOrder::kUpFirst;
    o.global_scale_kind = c.dequant_kind ? GlobalScaleKind::kDequantize : GlobalScaleKind::kQuantize;
    const Status st = layer.init(shape, o, w13.device(), w2.device(), nullptr);
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    hidden.alloc(in.hidden.size() * 2);
    ids.alloc(in.ids.size() * 4);
    weights.alloc(in.weights.size() * 4);
    out.alloc(static_cast<size_t>(c.T * c.H * 2));
    ws.alloc(layer.workspace_size(c.T));
    ASSERT_TRUE(hidden.upload(in.hidden) && ids.upload(in.ids) && weights.upload(in.weights));
  }
  MoeForwardArgs args() const {
    MoeForwardArgs a;
    a.hidden = hidden.get();
    a.num_tokens = c.T;
    a.topk_ids = ids.as<int32_t>();
    a.topk_weights = weights.as<float>();
    a.output = out.get();
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

void check_against_reference(Problem& p) {
  const Case& c = p.c;
  SCOPED_TRACE(c.name() + " seed " + std::to_string(p.seed) + " " + p.layer.describe(c.T));
  const Status chk = p.layer.check(p.ws.get(), nullptr);
  if (c.routing == Routing::kWithBadIds) {
    EXPECT_EQ(chk.code(), StatusCode::kInvalidArgument) << "bad ids were not reported";
  } else {
    ASSERT_TRUE(chk.is_ok()) << chk.to_string();
  }
  const int64_t P = c.T * c.k;
  const MoeWorkspaceView v = p.layer.workspace_view(p.ws.get(), c.T);
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
  ri.hidden_bf16 = p.in.hidden.data();
  ri.topk_ids = p.in.ids.data();
  ri.topk_weights = p.in.weights.data();
  ri.w13 = &w13v;
  ri.w2 = &w2v;
  std::vector<std::vector<uint16_t>> act_by_pair(static_cast<size_t>(P));
  int64_t bad = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t pair = perm[static_cast<size_t>(r)];
    const auto ref = reference::reference_gate_up(ri, pair / c.k, pair % c.k);
    ASSERT_EQ(static_cast<int64_t>(ref.act.size()), c.I);
    auto& mine = act_by_pair[static_cast<size_t>(pair)];
    mine.assign(act.begin() + r * c.I, act.begin() + (r + 1) * c.I);
    for (int64_t j = 0; j < c.I; ++j) {
      const double got = bf16_to_float(mine[static_cast<size_t>(j)]);
      const double want = ref.act[static_cast<size_t>(j)], tol = ref.act_tol[static_cast<size_t>(j)];
      if (!(std::fabs(got - want) <= tol) && bad++ < 5)
        ADD_FAILURE() << "act row " << r << " (pair " << pair << ") col " << j << ": got " << got << " want " << want
                      << " tol " << tol;
    }
  }
  ASSERT_EQ(bad, 0) << bad << " SwiGLU outputs out of tolerance";

  // Layer output from the GPU's own SwiGLU values: every element finite and within tolerance.
  const auto ref = reference::reference_down(ri, act_by_pair);
  std::vector<uint16_t> out(static_cast<size_t>(c.T * c.H));
  ASSERT_EQ(cudaMemcpy(out.data(), p.out.get(), out.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  double max_rel = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const double got = bf16_to_float(out[i]);
    if (!(std::fabs(got - ref.out[i]) <= ref.tol[i]) && bad++ < 5)
      ADD_FAILURE() << "out[" << i / c.H << ", " << i % c.H << "]: got " << got << " want " << ref.out[i] << " tol "
                    << ref.tol[i];
    if (ref.tol[i] > 0) max_rel = std::max(max_rel, std::fabs(got - ref.out[i]) / ref.tol[i]);
  }
  ASSERT_EQ(bad, 0) << bad << " outputs out of tolerance";
  ::testing::Test::RecordProperty("max_err_over_tol", std::to_string(max_rel));
}

void run_case(const Case& c) {
  Problem p;
  p.setup(c, testing::fresh_seed() % 1000003);
  if (::testing::Test::HasFatalFailure()) return;
  p.run_poisoned();
  if (::testing::Test::HasFatalFailure()) return;
  check_against_reference(p);
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
MOE_CASE(Glm5FullShape_T3, 3, 256, 6144, 2048, 8)

TEST(MoeGpu, DeterministicRunsAreBitIdenticalAndGraphReplayMatches) {
  FP4MOE_SKIP_WITHOUT_GPU();
  Problem p;
  p.setup(Case{256, 64, 256, 256, 8}, testing::fresh_seed() % 1000003);
  if (HasFatalFailure()) return;
  p.run_poisoned();
  if (HasFatalFailure()) return;
  const auto first = p.out.download<uint16_t>(static_cast<size_t>(256 * 256));
  p.run_poisoned();
  if (HasFatalFailure()) return;
  EXPECT_EQ(p.out.download<uint16_t>(first.size()), first) << "two deterministic runs differ";

  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  ASSERT_TRUE(p.out.poison(0xFF));
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  const Status st = p.layer.run(p.args(), p.ws.get(), p.ws.bytes(), s);
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int i = 0; i < 2; ++i) ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(p.out.download<uint16_t>(first.size()), first) << "graph replay differs from a direct run";
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
}

TEST(MoeGpu, ZeroTokensIsANoOp) {
  FP4MOE_SKIP_WITHOUT_GPU();
  Problem p;
  p.setup(Case{4, 8, 256, 256, 2}, 7);
  if (HasFatalFailure()) return;
  ASSERT_TRUE(p.out.poison(0x3C));
  MoeForwardArgs a = p.args();
  a.num_tokens = 0;
  ASSERT_TRUE(p.layer.run(a, p.ws.get(), p.ws.bytes(), nullptr).is_ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (uint16_t v : p.out.download<uint16_t>(8)) EXPECT_EQ(v, 0x3C3C);
}

TEST(MoeLayerArgs, RejectedWithClearErrors) {
  // Shape checks need no device.
  MoeLayerOptions o;
  EXPECT_NE(MoeLayer::can_implement(MoeShape{0, 256, 256, 1}, o).message().find("num_experts"), std::string::npos);
  EXPECT_NE(MoeLayer::can_implement(MoeShape{8, 256, 256, 9}, o).message().find("top_k"), std::string::npos);
  EXPECT_NE(MoeLayer::can_implement(MoeShape{8, 200, 256, 2}, o).message().find("hidden"), std::string::npos);
  EXPECT_NE(MoeLayer::can_implement(MoeShape{8, 256, 100, 2}, o).message().find("intermediate"), std::string::npos);
  o.block_m = 12;
  EXPECT_NE(MoeLayer::can_implement(MoeShape{8, 256, 256, 2}, o).message().find("block_m"), std::string::npos);
  MoeLayer uninit;
  EXPECT_FALSE(uninit.can_implement(MoeForwardArgs{}).is_ok());
}

}  // namespace
}  // namespace fp4moe
