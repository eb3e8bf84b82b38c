// GPU tests of sharded layers: expert-parallel ranks (global ids, other ranks' pairs skipped and not reported)
// and tensor-parallel slices (shard_tp_weights), each rank against the fp64 reference and the ranks' sum against
// the full layer's; the small-K tiles of a TP shard's down GEMM; poisoned outputs, every element checked.
// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "fp4moe/bf16.h"
#include "fp4moe/moe.h"
#include "fp4moe/planner.h"
#include "kernels/moe_gemm_items.h"
#include "fp4moe/shard.h"
#include "fp4moe/testing.h"
#include "tests/gpu/moe_check.h"

namespace fp4moe {
namespace {

using testing::DeviceBuffer;
using testing::ExpertWeights;
using testing::RoutingInputs;
using testing::reference_input;

// One rank's run: its output [T, H] (bf16 bits), the SwiGLU output of each pair it owns (by pair index), the
// check() status, and its plan.
struct RankRun {
  std::vector<uint16_t> out;
  std::map<int64_t, std::vector<uint16_t>> act;  // pair -> [I] bf16 bits
  StatusCode check = StatusCode::kOk;  // what check() said
  std::string check_text;
  MoeRunPlan plan;
};

void run_rank(const MoeShape& shape, const Nvfp4ExpertWeights& w13, const Nvfp4ExpertWeights& w2,
              const RoutingInputs& in, int64_t T, RankRun* r, int block_m = 0) {
  MoeLayerOptions o;
  o.tuning_cache = "none";
  MoeLayer layer;
  const Status st = layer.init(shape, o, w13, w2, nullptr);
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  DeviceBuffer hidden(in.hidden.size() * 2), ids(in.ids.size() * 4), wts(in.weights.size() * 4);
  DeviceBuffer out(static_cast<size_t>(T * shape.hidden * 2)), ws(layer.workspace_size(T));
  ASSERT_TRUE(hidden.upload(in.hidden) && ids.upload(in.ids) && wts.upload(in.weights));
  ASSERT_TRUE(out.poison(0xFF) && ws.poison(0xFF));
  MoeForwardArgs a;
  a.hidden = hidden.get();
  a.num_tokens = T;
  a.topk_ids = ids.as<int32_t>();
  a.topk_weights = wts.as<float>();
  a.output = out.get();
  a.block_m = block_m;
  ASSERT_TRUE(layer.plan(a, &r->plan).is_ok());
  const Status run = layer.run(a, ws.get(), ws.bytes(), nullptr);
  ASSERT_TRUE(run.is_ok()) << run.to_string();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  {
    const Status ck = layer.check(ws.get(), nullptr);
    r->check = ck.code();
    r->check_text = ck.to_string();
  }
  r->out = out.download<uint16_t>(static_cast<size_t>(T * shape.hidden));
  const int64_t P = T * shape.top_k;
  const auto v = testing::workspace_view(layer, ws.get(), T);
  std::vector<int32_t> offsets(static_cast<size_t>(shape.num_experts + 1)), perm(static_cast<size_t>(P));
  ASSERT_EQ(cudaMemcpy(offsets.data(), v.expert_offsets, offsets.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(perm.data(), v.perm_pair, perm.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  const int64_t rows = offsets.back();
  std::vector<uint16_t> act(static_cast<size_t>(rows * shape.intermediate));
  ASSERT_EQ(cudaMemcpy(act.data(), v.act, act.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  for (int64_t row = 0; row < rows; ++row)
    r->act[perm[static_cast<size_t>(row)]].assign(act.begin() + row * shape.intermediate,
                                                  act.begin() + (row + 1) * shape.intermediate);
}

// The ranks' outputs summed (fp64 of their bf16 values) against the full layer's reference computed from the
// ranks' own SwiGLU outputs: within the reference's tolerance plus each rank's bf16 rounding of its partial sum.
void expect_sum_matches(const std::vector<RankRun>& ranks, const reference::LayerOutput& ref, int64_t T, int64_t H) {
  int64_t bad = 0;
  for (int64_t i = 0; i < T * H; ++i) {
    double sum = 0, rounding = 0;
    for (const auto& r : ranks) {
      const double v = bf16_to_float(r.out[static_cast<size_t>(i)]);
      ASSERT_TRUE(std::isfinite(v)) << "rank output " << i << " not written or not finite";
      sum += v;
      rounding += std::ldexp(std::fabs(v), -8);
    }
    const double tol = ref.tol[static_cast<size_t>(i)] + rounding;
    if (std::fabs(sum - ref.out[static_cast<size_t>(i)]) > tol && bad++ < 5)
      ADD_FAILURE() << "out[" << i / H << ", " << i % H << "]: ranks sum to " << sum << ", the full layer is "
                    << ref.out[static_cast<size_t>(i)] << " (tol " << tol << ")";
  }
  EXPECT_EQ(bad, 0);
}

// Expert parallelism: 4 ranks of 8 experts out of 32; each takes the global ids, skips the other ranks' pairs
// without reporting them, and the four outputs sum to the full layer. An id outside [0, 32) is reported by every
// rank. A rank none of whose experts is chosen writes zeros.
TEST(MoeShards, ExpertParallelRanksSumToTheFullLayer) {
  FP4MOE_SKIP_WITHOUT_GPU();
  const int64_t E = 32, H = 256, I = 512, k = 4, ep = 4;
  for (int64_t T : {3, 50}) {  // 12 pairs (routed inside the GEMMs) and 200 (the routing kernel)
    SCOPED_TRACE("T=" + std::to_string(T));
    const uint64_t seed = devdata::fresh_seed() % 1000003;
    const MoeShape full{E, H, I, k};
    ExpertWeights w13, w2;
    ASSERT_TRUE(testing::make_weights(full, seed, false, &w13, &w2));
    RoutingInputs in;
    testing::make_inputs(full, T, testing::Routing::kUniform, seed, &in);
    const reference::ExpertWeightsView v13 = w13.view(), v2 = w2.view();
    const reference::DecodedExperts d13(v13), d2(v2);
    const reference::MoeReferenceInput ri = reference_input(in, T, full, &d13, &d2);
    std::vector<RankRun> ranks(ep);
    std::vector<std::vector<uint16_t>> act(static_cast<size_t>(T * k));
    for (int64_t r = 0; r < ep; ++r) {
      Nvfp4ExpertWeights r13, r2;
      ASSERT_TRUE(expert_range(w13.device(), E, 2 * I, H, r * E / ep, E / ep, &r13).is_ok());
      ASSERT_TRUE(expert_range(w2.device(), E, H, I, r * E / ep, E / ep, &r2).is_ok());
      run_rank(MoeShape{E / ep, H, I, k, E, r * E / ep}, r13, r2, in, T, &ranks[static_cast<size_t>(r)]);
      if (HasFatalFailure()) return;
      EXPECT_EQ(ranks[static_cast<size_t>(r)].check, StatusCode::kOk) << "rank " << r << ": " << ranks[static_cast<size_t>(r)].check_text;
      EXPECT_EQ(ranks[static_cast<size_t>(r)].plan.fused_routing, T * k <= kMaxFusedRoutingPairs);
      // Each rank owns exactly the pairs routed to its experts; its SwiGLU rows match the reference's.
      for (int64_t p = 0; p < T * k; ++p) {
        const int32_t id = in.ids[static_cast<size_t>(p)];
        const bool mine = id / (E / ep) == r;
        ASSERT_EQ(ranks[static_cast<size_t>(r)].act.count(p) == 1, mine) << "pair " << p << " (expert " << id << ")";
        if (!mine) continue;
        const auto ref = reference::reference_gate_up(ri, p / k, p % k);
        const auto& got = ranks[static_cast<size_t>(r)].act.at(p);
        for (int64_t j = 0; j < I; ++j)
          ASSERT_TRUE(testing::matches(bf16_to_float(got[static_cast<size_t>(j)]), ref.act[static_cast<size_t>(j)],
                                       ref.act_tol[static_cast<size_t>(j)]))
              << "pair " << p << " col " << j;
        act[static_cast<size_t>(p)] = got;
      }
    }
    expect_sum_matches(ranks, reference::reference_down(ri, act), T, H);
  }
  // Every id on rank 0's experts: ranks 1..3 write exact zeros, and report nothing. An id of 32 (outside the
  // model's experts) is reported by every rank.
  const uint64_t seed = devdata::fresh_seed() % 1000003;
  ExpertWeights w13, w2;
  ASSERT_TRUE(w13.make(E, 2 * I, H, seed + 1, false));
  ASSERT_TRUE(w2.make(E, H, I, seed + 3, false));
  // T=20 runs the tiled kernels, T=2 the direct decode path (whose gate_up then has no chunk at all).
  for (const int64_t T : {int64_t{20}, int64_t{2}}) {
    SCOPED_TRACE("every id on rank 0, T=" + std::to_string(T));
    RoutingInputs in;
    in.make(T, H, E / ep, k, testing::Routing::kUniform, seed + 5);  // ids in [0, 8): rank 0's
    for (int64_t r = 1; r < ep; ++r) {
      Nvfp4ExpertWeights r13, r2;
      ASSERT_TRUE(expert_range(w13.device(), E, 2 * I, H, r * E / ep, E / ep, &r13).is_ok());
      ASSERT_TRUE(expert_range(w2.device(), E, H, I, r * E / ep, E / ep, &r2).is_ok());
      RankRun run;
      run_rank(MoeShape{E / ep, H, I, k, E, r * E / ep}, r13, r2, in, T, &run);
      if (HasFatalFailure()) return;
      EXPECT_EQ(run.plan.direct_decode, T == 2) << run.plan.to_string();
      EXPECT_EQ(run.check, StatusCode::kOk) << run.check_text;
      for (uint16_t b : run.out) ASSERT_EQ(b & 0x7FFF, 0) << "a rank without tokens must write zeros";
      RoutingInputs bad = in;
      bad.ids[5] = static_cast<int32_t>(E);
      RankRun with_bad;
      run_rank(MoeShape{E / ep, H, I, k, E, r * E / ep}, r13, r2, bad, T, &with_bad);
      if (HasFatalFailure()) return;
      EXPECT_EQ(with_bad.check, StatusCode::kInvalidArgument) << "an id outside [0, E_global) must be reported";
    }
  }
}

// Tensor parallelism: TP2 (I/tp = 256, the primary tiles) and TP4 and TP8 (128 and 64: the down GEMM takes the
// small-K tiles) of a 512-wide layer, with both gate/up orders. Each rank's SwiGLU columns equal the full
// layer's columns of its slice (reference), and the ranks' outputs sum to the full layer.
TEST(MoeShards, TensorParallelSlicesSumToTheFullLayer) {
  FP4MOE_SKIP_WITHOUT_GPU();
  const int64_t E = 16, H = 256, I = 512, k = 4;
  for (int64_t tp : {2, 4, 8}) {
    for (int64_t T : {2, 40}) {
      SCOPED_TRACE("tp=" + std::to_string(tp) + " T=" + std::to_string(T));
      const uint64_t seed = devdata::fresh_seed() % 1000003;
      const MoeShape full{E, H, I, k};
      ExpertWeights w13, w2;
      ASSERT_TRUE(testing::make_weights(full, seed, false, &w13, &w2));
      RoutingInputs in;
      testing::make_inputs(full, T, testing::Routing::kSkewed, seed, &in);
      const reference::ExpertWeightsView v13 = w13.view(), v2 = w2.view();
      const reference::DecodedExperts d13(v13), d2(v2);
      const reference::MoeReferenceInput ri = reference_input(in, T, full, &d13, &d2);
      const int64_t Is = I / tp;
      std::vector<RankRun> ranks(static_cast<size_t>(tp));
      std::vector<std::vector<uint16_t>> act(static_cast<size_t>(T * k), std::vector<uint16_t>(static_cast<size_t>(I)));
      for (int64_t r = 0; r < tp; ++r) {
        DeviceBuffer p13(static_cast<size_t>(E * 2 * Is * H / 2)), s13(static_cast<size_t>(E * 2 * Is * H / 16)),
            g13(static_cast<size_t>(E * 4)), p2(static_cast<size_t>(E * H * Is / 2)), s2(static_cast<size_t>(E * H * Is / 16)),
            g2(static_cast<size_t>(E * 4));
        for (const DeviceBuffer* b : {&p13, &s13, &g13, &p2, &s2, &g2}) ASSERT_TRUE(b->poison(0xCD));
        const Nvfp4ExpertWeightsOut o13{p13.get(), s13.get(), g13.as<float>()}, o2{p2.get(), s2.get(), g2.as<float>()};
        ASSERT_TRUE(shard_tp_weights(full, tp, r, w13.device(), w2.device(), o13, o2, nullptr).is_ok());
        run_rank(MoeShape{E, H, Is, k}, Nvfp4ExpertWeights{p13.get(), s13.get(), g13.as<float>()},
                 Nvfp4ExpertWeights{p2.get(), s2.get(), g2.as<float>()}, in, T, &ranks[static_cast<size_t>(r)]);
        if (HasFatalFailure()) return;
        ASSERT_EQ(ranks[static_cast<size_t>(r)].check, StatusCode::kOk) << ranks[static_cast<size_t>(r)].check_text;
        const MoeRunPlan& pl = ranks[static_cast<size_t>(r)].plan;
        EXPECT_EQ(Is % pl.down.block_k, 0) << pl.to_string();
        if (Is == 64) EXPECT_EQ(pl.down.block_k, 64) << "the small-K tile: " << pl.to_string();
        for (const auto& [p, got] : ranks[static_cast<size_t>(r)].act) {
          const auto ref = reference::reference_gate_up(ri, p / k, p % k);
          for (int64_t j = 0; j < Is; ++j) {
            ASSERT_TRUE(testing::matches(bf16_to_float(got[static_cast<size_t>(j)]), ref.act[static_cast<size_t>(r * Is + j)],
                                         ref.act_tol[static_cast<size_t>(r * Is + j)]))
                << "pair " << p << " rank column " << j << " (full column " << r * Is + j << ")";
            act[static_cast<size_t>(p)][static_cast<size_t>(r * Is + j)] = got[static_cast<size_t>(j)];
          }
        }
      }
      expect_sum_matches(ranks, reference::reference_down(ri, act), T, H);
    }
  }
  // Bad slices are rejected before anything is copied.
  const Nvfp4ExpertWeights none{};
  const Nvfp4ExpertWeightsOut out{};
  EXPECT_EQ(shard_tp_weights(MoeShape{16, 256, 512, 4}, 3, 0, none, none, out, out, nullptr).code(), StatusCode::kUnsupported);
  EXPECT_EQ(shard_tp_weights(MoeShape{16, 256, 512, 4}, 2, 2, none, none, out, out, nullptr).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(shard_tp_weights(MoeShape{16, 256, 512, 4}, 2, 0, none, none, out, out, nullptr).code(), StatusCode::kInvalidArgument);
  // An output in host memory (the last buffer copied), or overlapping an input: rejected with the other outputs left
  // as they were (poisoned), where a copy failing half way would have written the first ones.
  {
    const MoeShape full{E, H, I, k};
    const int64_t Is = I / 2;
    ExpertWeights w13, w2;
    ASSERT_TRUE(testing::make_weights(full, devdata::fresh_seed() % 1000003, false, &w13, &w2));
    DeviceBuffer p13(static_cast<size_t>(E * 2 * Is * H / 2)), s13(static_cast<size_t>(E * 2 * Is * H / 16)),
        g13(static_cast<size_t>(E * 4)), p2(static_cast<size_t>(E * H * Is / 2)), s2(static_cast<size_t>(E * H * Is / 16));
    for (const DeviceBuffer* b : {&p13, &s13, &g13, &p2, &s2}) ASSERT_TRUE(b->poison(0xCD));
    std::vector<float> host_gs(static_cast<size_t>(E), -1.0f);
    const Nvfp4ExpertWeightsOut o13{p13.get(), s13.get(), g13.as<float>()};
    const Status st = shard_tp_weights(full, 2, 1, w13.device(), w2.device(), o13,
                                       Nvfp4ExpertWeightsOut{p2.get(), s2.get(), host_gs.data()}, nullptr);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
    EXPECT_NE(st.message().find("w2.global_scale is not device memory"), std::string::npos) << st.to_string();
    const Nvfp4ExpertWeights in13 = w13.device();
    const Status lap = shard_tp_weights(full, 2, 1, in13, w2.device(), o13,
                                        Nvfp4ExpertWeightsOut{p2.get(), const_cast<void*>(in13.scales), g13.as<float>()},
                                        nullptr);
    EXPECT_EQ(lap.code(), StatusCode::kInvalidArgument) << lap.to_string();
    EXPECT_NE(lap.message().find("overlaps"), std::string::npos) << lap.to_string();
    CUDA_OK(cudaDeviceSynchronize());
    for (const DeviceBuffer* b : {&p13, &s13, &g13, &p2, &s2})
      for (uint8_t v : b->download<uint8_t>(b->bytes())) ASSERT_EQ(v, 0xCD) << "an output was written";
    EXPECT_TRUE(std::all_of(host_gs.begin(), host_gs.end(), [](float v) { return v == -1.0f; }));
  }
}

// The presets' TP shards that need the small-K tiles run and match the reference at every block size (one
// expert's rows through each tile of the catalogue): Qwen3-235B-A22B at TP8 (I = 192) on a few experts.
TEST(MoeShards, SmallKTilesMatchTheReferenceAtEveryBlockSize) {
  FP4MOE_SKIP_WITHOUT_GPU();
  for (int bm : shipped_block_ms()) {
    testing::Case c{96, 8, 512, 192, 8, testing::Routing::kSkewed, bm};
    SCOPED_TRACE(c.name());
    testing::Problem p;
    p.setup(c, devdata::fresh_seed() % 1000003);
    if (HasFatalFailure()) return;
    if (bm == 128) {
      // The 128-token tile is 256 weight rows wide, and gate_up's N = 2 x 192 is not a multiple of 256: a call
      // that forces it is refused before anything runs, and says why.
      MoeForwardArgs a;
      a.num_tokens = c.T;
      a.block_m = bm;
      MoeRunPlan rp;
      const Status st = p.layer.plan(a, &rp);
      EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
      EXPECT_NE(st.message().find("block_m 128 has no kernel config"), std::string::npos) << st.to_string();
      continue;
    }
    const MoeRunPlan rp = testing::plan_of(p.layer, c.T, bm);
    EXPECT_EQ(rp.down.block_k, 64) << rp.to_string();
    p.run_poisoned();
    if (HasFatalFailure()) return;
    testing::check_against_reference(p);
  }
}

// The cluster decode kernel (MoeLayerOptions::cluster_decode: gate_up and down of a decode step in one kernel of
// 8-block clusters, I = 256) on TP-shard shapes: 8 (H = 8192), 6 (6144), 4 (4096) and 2 (2048: fewer down stages than
// the copies run ahead of the deep config, and each K half of gate_up just that lead) down N tiles per block; steps of
// 3 tokens (the 8-token tile's deep config on the H200) and, on 256 experts, of 5 (its 3-block config, whose clusters
// of 8 blocks are resident 45 at a time against the deep one's 30, where the tiled plan would not split gate_up);
// uniform, skewed, one-expert and bad-id routing (one chunk per expert: ids are distinct per token, so at most T rows), top-8
// and top-4. Each against the fp64
// reference with output and workspace poisoned, a bit-identical rerun and graph replays, bit for bit against the
// tiled kernels of the same tile (the option off, gate_up's K in the same two splits: output and SwiGLU rows), and
// the same plan run phase by phase.
TEST(MoeShards, ClusterDecodeMatchesTheReferenceAndTheTiledKernels) {
  FP4MOE_SKIP_WITHOUT_GPU();
  using testing::Case;
  using testing::plan_of;
  using testing::Problem;
  using testing::Routing;
  int cc_major = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&cc_major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  if (cc_major != 9) GTEST_SKIP() << "the cluster decode kernel is planned on sm_90 only";
  struct Shape {
    int64_t E, H, k;
  };
  const Shape shapes[] = {{64, 2048, 8}, {16, 6144, 8}, {32, 4096, 8}, {8, 8192, 8}, {256, 2048, 8}, {64, 4096, 4}};
  struct Run {
    int64_t T;
    Routing routing;
  };
  const std::vector<Run> runs3 = {{3, Routing::kUniform}, {3, Routing::kSkewed}, {3, Routing::kOneExpert},
                                  {3, Routing::kWithBadIds}};
  const std::vector<Run> runs5 = {{5, Routing::kUniform}, {5, Routing::kOneExpert}, {5, Routing::kWithBadIds}};
  const std::vector<Run> runs_top4 = {{5, Routing::kUniform}, {7, Routing::kSkewed}};  // 20 and 28 pairs: the deep config
  for (const Shape& sh : shapes)
    for (const Run& r : sh.k == 4 ? runs_top4 : sh.E == 256 ? runs5 : runs3) {
      Case c{r.T, sh.E, sh.H, 256, sh.k, r.routing};
      c.direct_decode = false;  // (few experts: a step of 3 tokens could take the direct path)
      SCOPED_TRACE(c.name());
      const uint64_t seed = devdata::fresh_seed() % 1000003;
      Problem p;
      p.setup(c, seed);
      if (HasFatalFailure()) return;
      const MoeRunPlan plan = plan_of(p.layer, r.T);
      ASSERT_TRUE(plan.cluster_decode) << plan.to_string();
      ASSERT_EQ(plan.cluster_blocks, 8) << plan.to_string();
      std::printf("cluster decode, %s: %s\n", c.name().c_str(), plan.to_string().c_str());
      ASSERT_EQ(plan.gate_up_k_splits, 2) << plan.to_string();
      p.run_poisoned();
      if (HasFatalFailure()) return;
      testing::check_against_reference(p);
      if (HasFatalFailure()) return;
      testing::expect_reruns_bit_identical(p);
      if (HasFatalFailure()) return;
      std::vector<uint16_t> out_c, act_c;
      testing::run_and_download(p, p.args(), &out_c, &act_c);
      if (HasFatalFailure()) return;
      const StatusCode check_c = p.layer.check(p.ws.get(), nullptr).code();
      Case off = c;
      off.cluster_decode = false;
      Problem q;
      q.setup(off, seed);  // (the same weights and inputs)
      if (HasFatalFailure()) return;
      MoeForwardArgs tiled = q.args();
      tiled.block_m = 8;
      tiled.gate_up_k_splits = 2;
      tiled.down_k_splits = 1;
      MoeRunPlan tp;
      ASSERT_TRUE(q.layer.plan(tiled, &tp).is_ok());
      ASSERT_FALSE(tp.cluster_decode) << tp.to_string();
      ASSERT_EQ(tp.gate_up.block_k, 256) << tp.to_string();
      ASSERT_EQ(tp.gate_up_k_splits, 2) << tp.to_string();
      testing::expect_tiled_bits(q, tiled, out_c, act_c, check_c);
      if (HasFatalFailure()) return;
      // The same plan run phase by phase: its config's tiled kernels.
      testing::check_phase_by_phase(p);
      if (HasFatalFailure()) return;
    }
  // Not planned: other forced K splits, more pairs than clusters resident at once, another I, the atomic finalize.
  Case base{3, 64, 2048, 256, 8};
  base.direct_decode = false;
  Problem p;
  p.setup(base, devdata::fresh_seed() % 1000003);
  if (HasFatalFailure()) return;
  MoeForwardArgs a;
  a.num_tokens = 3;
  a.gate_up_k_splits = 4;
  MoeRunPlan forced;
  ASSERT_TRUE(p.layer.plan(a, &forced).is_ok());
  EXPECT_FALSE(forced.cluster_decode) << forced.to_string();
  EXPECT_FALSE(plan_of(p.layer, 8).cluster_decode);  // 64 clusters of 8: more than are resident at once
  EXPECT_FALSE(plan_of(p.layer, 4).cluster_decode);  // the tiled plan splits gate_up; 32 clusters: more than the deep config's
  for (Case other : {Case{3, 64, 2048, 512, 8}, Case{3, 64, 2048, 256, 8, Routing::kUniform, 0, FinalizeMode::kAtomic}}) {
    other.direct_decode = false;
    Problem o;
    o.setup(other, devdata::fresh_seed() % 1000003);
    if (HasFatalFailure()) return;
    EXPECT_FALSE(plan_of(o.layer, 3).cluster_decode) << other.name();
  }
}

// Down and the finalize as one kernel after the tiled gate_up (MoeRunPlan::direct_down: a TP shard's decode step of up
// to 32 pairs, I = 256): against the reference with output and workspace poisoned, a bit-identical rerun and graph
// replays, bit for bit against the tiled kernels of the same plan with down's K in one split (the SwiGLU rows are
// theirs: the same gate_up), and phase by phase. GLM-5's TP8 shard and smaller ones, top-8 and top-4, uniform,
// skewed, one-expert and bad-id routing, both deterministic finalize modes, the cluster kernel off at T = 3, I = 192 (a
// chunk's K less than one batch of 4 groups), and a step none of whose pairs is routed here (zeros out). Planned on
// sm_90 where every block is resident at once: a GPU with fewer SMs than H / 48 skips those shapes.
TEST(MoeShards, DirectDownRingMatchesTheReferenceAndTheTiledKernels) {
  FP4MOE_SKIP_WITHOUT_GPU();
  if (testing::compute_capability_major() != 9) GTEST_SKIP() << "planned on sm_90 only";
  int sms = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  using testing::Case;
  using testing::plan_of;
  using testing::Problem;
  using testing::Routing;
  std::vector<Case> cases = {
      {4, 256, 6144, 256, 8},
      {4, 256, 6144, 256, 8, Routing::kSkewed},
      {4, 256, 6144, 256, 8, Routing::kWithBadIds},
      {3, 64, 2048, 256, 8, Routing::kOneExpert},
      {3, 256, 6144, 256, 8},
      {4, 32, 4096, 256, 8, Routing::kSkewed, 16},  // block_m 16 forced: gate_up's warp-specialized tile
      {8, 64, 4096, 256, 4, Routing::kUniform},
      {7, 64, 4096, 256, 4, Routing::kSkewed},
      {4, 256, 6144, 256, 8, Routing::kUniform, 0, FinalizeMode::kDeterministicBf16},
      {4, 128, 4096, 192, 8},  // Qwen3-235B-A22B's TP8: a chunk's K is 3 groups, less than a batch
  };
  for (Case c : cases) {
    c.cluster_decode = false;  // (it takes T = 3, and top-4 steps of up to 45 pairs where gate_up is not split)
    SCOPED_TRACE(c.name());
    if (c.H / 16 > 3 * int64_t{sms}) {
      std::printf("direct down, %s: skipped (%lld blocks, more than 3 on each of %d SMs)\n", c.name().c_str(),
                  static_cast<long long>(c.H / 16), sms);
      continue;
    }
    const uint64_t seed = devdata::fresh_seed() % 1000003;
    Problem p;
    p.setup(c, seed);
    if (HasFatalFailure()) return;
    const MoeRunPlan plan = plan_of(p.layer, c.T, c.block_m);
    std::printf("direct down, %s: %s\n", c.name().c_str(), plan.to_string().c_str());
    ASSERT_TRUE(plan.direct_down) << plan.to_string();
    p.run_poisoned();
    if (HasFatalFailure()) return;
    testing::check_against_reference(p);
    if (HasFatalFailure()) return;
    testing::expect_reruns_bit_identical(p);
    if (HasFatalFailure()) return;
    std::vector<uint16_t> out_d, act_d;
    testing::run_and_download(p, p.args(), &out_d, &act_d);
    if (HasFatalFailure()) return;
    const StatusCode check_d = p.layer.check(p.ws.get(), nullptr).code();
    Case off = c;
    off.direct_decode = false;
    Problem q;
    q.setup(off, seed);  // (the same weights and inputs)
    if (HasFatalFailure()) return;
    MoeForwardArgs tiled = q.args();
    tiled.block_m = plan.block_m;
    tiled.gate_up_k_splits = plan.gate_up_k_splits;
    tiled.down_k_splits = 1;
    MoeRunPlan tp;
    ASSERT_TRUE(q.layer.plan(tiled, &tp).is_ok());
    ASSERT_FALSE(tp.direct_down) << tp.to_string();
    ASSERT_EQ(tp.gate_up.to_string(), plan.gate_up.to_string()) << tp.to_string();
    testing::expect_tiled_bits(q, tiled, out_d, act_d, check_d);
    if (HasFatalFailure()) return;
    // Phase by phase: the ring kernel run alone after gate_up.
    testing::check_phase_by_phase(p);
    if (HasFatalFailure()) return;
  }
  // No pair routed here (every id out of range, so every pair skipped and reported): the kernel writes zeros.
  Case base{4, 64, 2048, 256, 8};
  Problem p;
  p.setup(base, devdata::fresh_seed() % 1000003);
  if (HasFatalFailure()) return;
  {
    std::vector<int32_t> ids = p.in.ids;
    for (int32_t& id : ids) id = static_cast<int32_t>(base.E);
    ASSERT_TRUE(p.ids.upload(ids));
    ASSERT_TRUE(plan_of(p.layer, 4, 0).direct_down);
    p.run_poisoned();
    if (HasFatalFailure()) return;
    const auto out = p.out.download<uint16_t>(static_cast<size_t>(base.T * base.H));
    for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i] & 0x7FFF, 0) << "element " << i << " of a step with no pair here";
    EXPECT_EQ(p.layer.check(p.ws.get(), nullptr).code(), StatusCode::kInvalidArgument) << "the bad ids are reported";
    ASSERT_TRUE(p.ids.upload(p.in.ids));
  }
  // Not planned: 40 pairs, a forced down split, I = 512 (two batches a chunk), the atomic finalize.
  EXPECT_TRUE(plan_of(p.layer, 4, 0).direct_down);
  EXPECT_FALSE(plan_of(p.layer, 5, 0).direct_down);
  MoeForwardArgs a;
  a.num_tokens = 4;
  a.down_k_splits = 1;
  MoeRunPlan forced;
  ASSERT_TRUE(p.layer.plan(a, &forced).is_ok());
  EXPECT_FALSE(forced.direct_down) << forced.to_string();
  for (Case other : {Case{4, 64, 2048, 256, 8, Routing::kUniform, 0, FinalizeMode::kAtomic}, Case{4, 64, 2048, 512, 8}}) {
    Problem o;
    o.setup(other, devdata::fresh_seed() % 1000003);
    if (HasFatalFailure()) return;
    EXPECT_FALSE(plan_of(o.layer, 4, 0).direct_down) << other.name();
  }
}

// Whether this build runs the sm_120 configs on this GPU (MoeLayerOptions::kernel_arch = 120: FP4MOE_SM120_ON_SM90 on
// an sm_90 part): a small layer's init with them. OK; kUnsupported where they do not run here; any other failure is a
// defect.
Status init_sm120_configs_here() {
  if (testing::compute_capability_major() != 9) return unsupported("the sm_120 configs run on sm_90 parts only");
  MoeLayerOptions o;
  o.kernel_arch = 120;
  o.tuning_cache = "none";
  testing::ExpertWeights w13, w2;
  if (!(w13.make(8, 512, 256, 1, false) && w2.make(8, 256, 256, 2, false)))
    return Status(StatusCode::kCudaError, "the probe's weights could not be made");
  MoeLayer probe;
  return probe.init(MoeShape{8, 256, 256, 2}, o, w13.device(), w2.device(), nullptr);
}

// The sm_120 configs (RTX 5090 / RTX PRO 6000: 101,376 B layouts, mma.sync, one block per SM) run on the H200 in
// the GPU test build (FP4MOE_SM120_ON_SM90): every block size, the TP8 and EP8 shards of GLM-5 scaled down, the
// small-K tiles, both finalize modes, fused routing; against the reference, outputs poisoned first.
TEST(MoeShards, Sm120ConfigsMatchTheReferenceOnTheH200) {
  FP4MOE_SKIP_WITHOUT_GPU();
  {
    const Status st = init_sm120_configs_here();
    if (st.code() == StatusCode::kUnsupported)
      GTEST_SKIP() << "this build or GPU does not run the sm_120 configs on sm_90 (FP4MOE_SM120_ON_SM90, an H100/H200): "
                   << st.to_string();
    ASSERT_TRUE(st.is_ok()) << st.to_string();
  }
  std::vector<testing::Case> cases;
  for (int bm : shipped_block_ms(120)) {
    cases.push_back(testing::Case{200, 16, 512, 256, 8, testing::Routing::kUniform, bm});  // a TP8-like I
    cases.push_back(testing::Case{64, 16, 512, 192, 4, testing::Routing::kSkewed, bm});    // small-K down
  }
  cases.push_back(testing::Case{1, 64, 512, 512, 8});  // fused routing, split down K
  cases.push_back(testing::Case{3, 64, 512, 512, 8, testing::Routing::kUniform, 0, FinalizeMode::kAtomic});
  // fused routing of 33-64 pairs (two keys a lane), on the 8- and (no warp-specialized tile on sm_120) 16-token tiles
  cases.push_back(testing::Case{8, 64, 512, 512, 8});
  cases.push_back(testing::Case{6, 64, 512, 256, 8, testing::Routing::kSkewed, 16});
  cases.push_back(testing::Case{512, 32, 512, 512, 8, testing::Routing::kUniform, 0});
  for (testing::Case c : cases) {
    c.kernel_arch = 120;
    c.direct_decode = false;  // (the sm_120 configs; the direct decode kernels are arch-neutral: test_moe_direct.cu)
    SCOPED_TRACE(c.name());
    testing::Problem p;
    p.setup(c, devdata::fresh_seed() % 1000003);
    if (HasFatalFailure()) return;
    const MoeRunPlan rp = testing::plan_of(p.layer, c.T, c.block_m);
    EXPECT_FALSE(rp.gate_up.wgmma || rp.down.wgmma) << rp.to_string();
    EXPECT_LE(rp.gate_up.smem_bytes, 101376) << rp.to_string();
    EXPECT_LE(rp.down.smem_bytes, 101376) << rp.to_string();
    if (c.T * c.k <= kMaxFusedRoutingPairs) EXPECT_TRUE(rp.fused_routing) << rp.to_string();
    int sms = 0;
    ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
    EXPECT_EQ(rp.gate_up.grid, sms) << "one block per SM, as on the 100 KB parts";
    p.run_poisoned();
    if (HasFatalFailure()) return;
    testing::check_against_reference(p);
  }
}

// gate_up's tail kernel (MoeRunPlan::gate_up_tail_pieces, sm_90): a decode step of the 8-token tile whose gate_up tiles
// fill one to three rounds of its persistent blocks runs the last, partial round's tiles as K pieces in a second
// kernel. Each case with the tail on and off on the same inputs: against the reference with poisoned outputs,
// bit-identical reruns and graph replays (the pieces' arrival counters zeroed by every call), phase by phase; and the
// tail kernel's work checked: where the call's routing left tiles past gate_up's whole rounds, its pieces wrote their
// partial sums into the workspace poisoned before the run; where it did not, they wrote none and the two outputs
// are identical bit for bit (the first kernel takes every tile, as without the tail kernel). (Whether the pieces'
// other summation order changes an output bit is chance: bf16 rounding hides it now and then.)
TEST(MoeShards, GateUpTailPiecesMatchTheReferenceAndAreDeterministic) {
  FP4MOE_SKIP_WITHOUT_GPU();
  if (testing::compute_capability_major() != 9) GTEST_SKIP() << "gate_up's tail kernel is built for sm_90 only";
  using testing::Case;
  using testing::Routing;
  Case ep{24, 32, 1024, 2048, 8, Routing::kUniform};  // an EP8-like rank: 32 of 256 experts, every pair local
  ep.global_experts = 256;
  int cases_with_pieces = 0;
  for (const Case& base : {Case{64, 256, 2048, 256, 8, Routing::kUniform},  // GLM-5 TP8-like: about 888 tiles
                           Case{32, 128, 2048, 384, 8, Routing::kSkewed},   // I = 384: 6 N tiles a chunk
                           ep}) {
    const uint64_t seed = devdata::fresh_seed() % 1000003;
    std::vector<uint16_t> out[2];
    int64_t tiles = 0, grid = 0, pieces_written = 0;
    for (bool tail : {true, false}) {
      Case c = base;
      c.gate_up_tail = tail;
      SCOPED_TRACE(c.name());
      testing::Problem p;
      p.setup(c, seed);
      if (HasFatalFailure()) return;
      MoeRunPlan rp;
      ASSERT_TRUE(p.layer.plan(p.args(), &rp).is_ok());
      if (tail) {
        ASSERT_GT(rp.gate_up_tail_pieces, 0) << "the case must take the tail kernel: " << rp.to_string();
        EXPECT_NE(rp.to_string().find("in a second kernel"), std::string::npos) << rp.to_string();
      } else {
        ASSERT_EQ(rp.gate_up_tail_pieces, 0) << rp.to_string();
      }
      EXPECT_EQ(rp.gate_up_k_splits, 1) << rp.to_string();
      p.run_poisoned();
      if (HasFatalFailure()) return;
      testing::check_against_reference(p);
      if (HasFatalFailure()) return;
      if (tail) {  // gate_up's tiles of this call: its chunks (block_m rows of an expert) x N tiles
        const testing::MoeWorkspaceView v = testing::workspace_view(p.layer, p.ws.get(), c.T);
        std::vector<int32_t> offsets(static_cast<size_t>(c.E + 1));
        ASSERT_EQ(cudaMemcpy(offsets.data(), v.expert_offsets, offsets.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
        int64_t chunks = 0;
        for (int64_t e = 0; e < c.E; ++e) chunks += (offsets[e + 1] - offsets[e] + rp.block_m - 1) / rp.block_m;
        tiles = chunks * (2 * c.I / rp.gate_up.block_n);
        grid = rp.gate_up.grid;
        // The pieces' partial sums written by this run (the workspace was 0xFF bytes, a NaN, before it).
        ASSERT_GT(v.gate_up_partial_floats, 0) << "a plan with the tail kernel has a partial-sum buffer";
        std::vector<uint32_t> part(static_cast<size_t>(v.gate_up_partial_floats));
        ASSERT_EQ(cudaMemcpy(part.data(), v.gate_up_partials, part.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
        pieces_written = std::count_if(part.begin(), part.end(), [](uint32_t w) { return w != 0xFFFFFFFFu; });
      }
      testing::expect_reruns_bit_identical(p, &out[tail ? 1 : 0]);
      if (HasFatalFailure()) return;
      testing::check_phase_by_phase(p);
      if (HasFatalFailure()) return;
    }
    const bool pieces = kernels::whole_gate_up_tiles(static_cast<int>(tiles), static_cast<int>(grid)) < tiles;
    cases_with_pieces += pieces;
    SCOPED_TRACE(base.name() + ": " + std::to_string(tiles) + " gate_up tiles on " + std::to_string(grid) + " blocks");
    if (pieces) {
      EXPECT_GT(pieces_written, 0) << "the last round's tiles go to the tail kernel's K pieces";
    } else {
      EXPECT_EQ(pieces_written, 0) << "no tile past the whole rounds: the tail kernel has no piece";
      EXPECT_EQ(out[1], out[0]) << "no tile past the whole rounds: the first kernel ran every tile, as without the tail";
    }
  }
  EXPECT_GE(cases_with_pieces, 2) << "the cases must leave tiles to the tail kernel";
}

// gate_up with its K split (a TP shard's decode step: few N tiles per expert, so few work items), the block that
// finishes a tile's last K range summing the partials in a fixed order before the SwiGLU: the layer's own choice
// at TP-like shapes (which must split), forced 2/4/8 at every multistage block size (mma.sync and, with
// warp_specialized off, wgmma at 32 and 64 tokens), fused and kernel routing, both finalize modes, a split down
// K too; each against the reference with poisoned outputs and workspace (the arrival counters included, which the
// layer must zero itself), then a bit-identical rerun and a graph replay (memset node + kernels).
TEST(MoeShards, GateUpSplitKMatchesTheReferenceAndIsDeterministic) {
  FP4MOE_SKIP_WITHOUT_GPU();
  using testing::Case;
  using testing::Routing;
  std::vector<Case> cases = {
      Case{1, 256, 2048, 256, 8},                  // GLM-5 TP8-like at T=1 (fused routing): the layer splits
      Case{4, 64, 2048, 256, 8},                   // 32 pairs, fused
      Case{16, 64, 2048, 256, 8},                  // the routing kernel
      Case{2, 32, 1024, 512, 8, Routing::kUniform, 0, FinalizeMode::kAtomic},
  };
  for (int splits : {2, 4, 8})
    for (int bm : {8, 16}) {  // (multistage 16-token kernels above 32 pairs: warp_specialized off)
      Case c{16, 16, 2048, 256, 4, Routing::kSkewed, bm};  // 64 pairs: the 8-token tile's deep config
      c.warp_specialized = false;
      c.gate_up_k_splits = splits;
      cases.push_back(c);
    }
  // Where the layer's own gate_up config has no split-K kernels (on the H200: the 8-token tile's 3-block config for 888
  // expected work items, the warp-specialized 16-token tile), a forced split takes the block_m's config that has them.
  {
    Case c{64, 256, 2048, 256, 8, Routing::kUniform, 8};  // 512 pairs on 256 experts
    c.gate_up_k_splits = 2;
    cases.push_back(c);
    Case d{24, 32, 2048, 256, 8, Routing::kUniform, 16};  // 192 pairs
    d.gate_up_k_splits = 4;
    cases.push_back(d);
  }
  {  // a split down K as well, fused routing, the up-first order, the small-K down tile (I = 192)
    Case c{3, 8, 1024, 192, 8, Routing::kUniform, 8, FinalizeMode::kDeterministic, false};
    c.gate_up_k_splits = 4;
    cases.push_back(c);
    Case d{2, 8, 1024, 512, 8, Routing::kUniform, 16, FinalizeMode::kDeterministic, true, false, 2};
    d.gate_up_k_splits = 2;
    cases.push_back(d);
  }
  int heuristic_split = 0;
  for (Case c : cases) {
    c.direct_decode = false;  // (the split-K tiled kernels, not the direct path that takes the small steps,
    c.cluster_decode = false;  //  nor the cluster decode kernel that takes TP8-like steps of 3 and 4 tokens)
    SCOPED_TRACE(c.name());
    testing::Problem p;
    p.setup(c, devdata::fresh_seed() % 1000003);
    if (HasFatalFailure()) return;
    MoeForwardArgs a = p.args();
    MoeRunPlan rp;
    ASSERT_TRUE(p.layer.plan(a, &rp).is_ok());
    if (c.gate_up_k_splits) {
      EXPECT_EQ(rp.gate_up_k_splits, c.gate_up_k_splits) << rp.to_string();
      // The swapped cases: on sm_90 the layer's own gate_up config has no split-K kernels there (the 3-block 8-token
      // config, the warp-specialized 16-token tile), so gate_up must run on another config than down.
      if (c.T == 64 && c.E == 256 && testing::compute_capability_major() == 9)
        EXPECT_LT(rp.gate_up.grid, rp.down.grid) << "the deep 8-token config for gate_up: " << rp.to_string();
      if (c.T == 24 && c.block_m == 16 && testing::compute_capability_major() == 9)
        EXPECT_NE(rp.gate_up.family, rp.down.family) << "multistage gate_up, warp-specialized down: " << rp.to_string();
    } else {
      heuristic_split += rp.gate_up_k_splits > 1;
    }
    p.run_poisoned();
    if (HasFatalFailure()) return;
    testing::check_against_reference(p);
    if (HasFatalFailure()) return;
    if (!finalize_is_deterministic(c.finalize)) continue;
    // A rerun and two graph replays (the arrival counters must be zero again for the second replay).
    testing::expect_reruns_bit_identical(p);
    if (HasFatalFailure()) return;
  }
  EXPECT_GE(heuristic_split, 3) << "the layer should split gate_up's K at the TP-like decode shapes";
  // A gate_up config without split-K kernels (warp-specialized, or the multistage 32-token tile): forcing a split
  // is rejected before anything runs.
  if (testing::compute_capability_major() == 9) {
    testing::Problem p;
    p.setup(Case{128, 8, 1024, 256, 8, Routing::kUniform, 32}, devdata::fresh_seed() % 1000003);
    if (HasFatalFailure()) return;
    MoeForwardArgs a = p.args();
    a.gate_up_k_splits = 2;
    ASSERT_TRUE(p.out.poison(0x5A));
    const Status st = p.layer.run(a, p.ws.get(), p.ws.bytes(), nullptr);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
    EXPECT_NE(st.message().find("without split-K kernels"), std::string::npos) << st.to_string();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto out = p.out.download<uint8_t>(static_cast<size_t>(128 * 1024 * 2));
    EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](uint8_t b) { return b == 0x5A; })) << "a rejected call wrote";
  }
}

// Every preset's tensor- and expert-parallel shards as `fp4moe plan --shards` derives them (shard_shape; EP: rank 0,
// experts [0, E / ep) of E), at their real E, H, I / tp and k: the layer plans every T the benches time, and a step
// runs against the fp64 reference (output and workspace poisoned, every element checked) at the layer's own plan,
// at the largest block_m the shard's tiles serve (the prefill tile where it fits) and, on the TP8 and EP8 shards (the
// RTX PRO 6000 deployment), on the sm_120 configs. EP ranks take ids over the model's experts: the other ranks'
// pairs are skipped, unreported; the sm_120 configs' plans keep to mma.sync and the arch table's 101,376 B a block. A
// shard the kernels do not serve is rejected by can_implement with the planner's reason; a shard shard_shape refuses
// (I / tp not a multiple of 64) is kUnsupported.
TEST(MoeShards, EveryPresetShardMatchesTheReference) {
  FP4MOE_SKIP_WITHOUT_GPU();
  const bool sm90 = testing::compute_capability_major() == 9;
  const Status sm120 = init_sm120_configs_here();
  if (sm120.code() != StatusCode::kUnsupported) ASSERT_TRUE(sm120.is_ok()) << sm120.to_string();
  const bool sm120_here = sm120.is_ok();
  if (!sm120_here) std::printf("no sm_120 runs: %s\n", sm120.message().c_str());
  const uint64_t seed0 = devdata::fresh_seed() % 1000003;
  int runnable = 0, refused = 0, unserved = 0, sm120_runs = 0;
  for (const ModelPreset& m : model_presets()) {
    for (const auto& [tp, ep] : std::vector<std::pair<int64_t, int64_t>>{{2, 1}, {4, 1}, {8, 1}, {1, 2}, {1, 4}, {1, 8}}) {
      const std::string name = std::string(m.key) + (tp > 1 ? " TP" + std::to_string(tp) : " EP" + std::to_string(ep));
      SCOPED_TRACE(name);
      MoeShape s;
      const Status ss = shard_shape(m.shape, tp, ep, 0, &s);
      if (!ss.is_ok()) {
        EXPECT_EQ(ss.code(), StatusCode::kUnsupported) << ss.to_string();
        std::printf("%-24s no shard: %s\n", name.c_str(), ss.message().c_str());
        ++refused;
        continue;
      }
      std::vector<ShardTiles> tiles90, tiles120;
      const Status t90 = shard_kernel_tiles(s, arch_info(90), &tiles90);
      const Status t120 = shard_kernel_tiles(s, arch_info(120), &tiles120);
      MoeLayerOptions o;
      const Status can = MoeLayer::can_implement(s, o);
      if (!t90.is_ok()) {
        EXPECT_FALSE(can.is_ok()) << "the planner does not serve this shard, the layer takes it";
        EXPECT_EQ(can.message(), t90.message());
        std::printf("%-24s not served: %s\n", name.c_str(), can.message().c_str());
        ++unserved;
        continue;
      }
      ASSERT_TRUE(can.is_ok()) << can.to_string();
      ASSERT_TRUE(t120.is_ok()) << t120.to_string();
      ASSERT_FALSE(tiles90.empty());
      ++runnable;
      testing::Case c{};
      c.T = ep > 1 ? 4 * ep : 5;  // (an EP rank gets about T k / ep of the pairs)
      c.E = s.num_experts, c.H = s.hidden, c.I = s.intermediate, c.k = s.top_k;
      c.global_experts = ep > 1 ? s.num_global_experts : 0;
      c.global_ids = ep > 1;
      c.routing = runnable % 2 ? testing::Routing::kSkewed : testing::Routing::kUniform;
      const uint64_t seed = seed0 + static_cast<uint64_t>(runnable);
      std::vector<std::pair<std::string, testing::Case>> runs{{"own plan", c}};
      if (sm90) {
        testing::Case big = c;
        big.block_m = tiles90.back().block_m;
        runs.push_back({"bm" + std::to_string(big.block_m), big});
        if (sm120_here && (tp == 8 || ep == 8)) {
          testing::Case rtx = c;
          rtx.kernel_arch = 120;
          rtx.direct_decode = false;
          runs.push_back({"sm_120 configs", rtx});
        }
      }
      for (const auto& [what, rc] : runs) {
        SCOPED_TRACE(what);
        if (rc.kernel_arch == 120) ++sm120_runs;
        testing::Problem p;
        p.setup(rc, seed);
        if (HasFatalFailure()) return;
        if (rc.kernel_arch == 120) {
          const MoeRunPlan rp = testing::plan_of(p.layer, rc.T);
          EXPECT_FALSE(rp.gate_up.wgmma || rp.down.wgmma) << rp.to_string();
          EXPECT_LE(rp.gate_up.smem_bytes, arch_info(120).smem_per_block) << rp.to_string();
          EXPECT_LE(rp.down.smem_bytes, arch_info(120).smem_per_block) << rp.to_string();
        }
        if (what == "own plan")  // (plan_of fails the test where a T does not plan)
          for (int64_t T : {1, 2, 8, 64, 512, 2048, 4096, 16384}) testing::plan_of(p.layer, T);
        p.run_poisoned();
        if (HasFatalFailure()) return;
        testing::check_against_reference(p);
        if (HasFatalFailure()) return;
        std::printf("%-24s %-16s %s\n", name.c_str(), what.c_str(), p.layer.describe(rc.T).c_str());
      }
    }
  }
  std::printf("preset shards: %d run, %d refused by shard_shape, %d not served by the kernels; %d sm_120 runs\n", runnable,
              refused, unserved, sm120_runs);
  EXPECT_GE(runnable, 30) << "most presets' shards should run";
  if (sm120_here) EXPECT_GT(sm120_runs, 0);
}

}  // namespace
}  // namespace fp4moe
