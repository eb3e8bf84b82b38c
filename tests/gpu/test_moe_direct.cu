// GPU tests of the direct decode path (kernels/moe_decode_direct.cuh): against the fp64 reference on shard-like and
// odd shapes with poisoned outputs and workspace, bit for bit against the tiled kernels where both sum in the same
// order, and bit-identical across reruns and CUDA-graph replays.
// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "fp4moe/moe.h"
#include "fp4moe/testing.h"
#include "kernels/moe_decode_direct_layout.h"
#include "tests/gpu/moe_check.h"

namespace fp4moe {
namespace {

using testing::Case;
using testing::Problem;
using testing::Routing;

// The call's routing chunks (at most kDirectChunkRows rows of one expert each), from the host's ids.
int64_t chunks_of(const Problem& p) {
  std::vector<int64_t> count(static_cast<size_t>(p.c.E), 0);
  for (int32_t id : p.in.ids)
    if (id >= 0 && id < p.c.E) ++count[static_cast<size_t>(id)];
  int64_t chunks = 0;
  for (int64_t n : count) chunks += (n + 7) / 8;
  return chunks;
}

// Every case runs the direct path (asserted from its plan) and matches the reference element by element: the TP8
// shard's decode steps (one chunk per warp; several chunks per warp at 32 pairs with a short down K), few chunks
// (the warps split down's K), a wide I (down in two weight batches per warp), an H whose K groups do not divide by the 8 warps, top-1
// with 32 tokens on 4 experts (experts of more than 8 rows: two chunks), both gate/up orders, the dequantize-kind
// global scales, every finalize mode, and bad ids (skipped and reported).
TEST(MoeDirect, MatchesTheReferenceOnShardAndOddShapes) {
  FP4MOE_SKIP_WITHOUT_GPU();
  std::vector<Case> cases = {
      Case{1, 256, 2048, 256, 8},                    // TP8-like T=1: 8 chunks, one per warp
      Case{2, 64, 2048, 256, 8, Routing::kSkewed},   // shared experts: chunks of 2 rows
      Case{4, 64, 1024, 64, 8},                      // 32 pairs, I = 64: several chunks per warp
      Case{1, 16, 512, 512, 2},                      // 2 chunks: 4 warps per chunk split down's K
      Case{1, 64, 1024, 2048, 2},                    // I = 2048, 2 chunks: 2 weight batches per down warp
      Case{2, 16, 768, 128, 4},                      // H = 768: 12 K groups over 8 warps (1 or 2 each)
      Case{32, 4, 512, 256, 1},                      // top-1: experts with more than 8 tokens
      Case{3, 16, 512, 192, 8, Routing::kUniform, 0, FinalizeMode::kDeterministic, false, true},  // up first, dequant kind
      Case{2, 32, 1024, 256, 8, Routing::kUniform, 0, FinalizeMode::kDeterministicBf16},
      Case{2, 32, 1024, 256, 8, Routing::kUniform, 0, FinalizeMode::kAtomic},
      Case{4, 64, 512, 64, 8, Routing::kWithBadIds},
      Case{1, 8, 256, 64, 8, Routing::kOneExpert},   // the smallest shape: H = 256, I = 64
      Case{32, 2, 256, 256, 1, Routing::kOneExpert},  // 4 chunks of expert 0 on 3 gate_up block rows: a block takes 2
      Case{2, 64, 6144, 256, 8},                     // 2 chunks a gate_up block; down keeps its weights in registers
      Case{1, 16, 6144, 2048, 2},                    // down in registers, its K split 4 ways, two batches a warp
  };
  int looping = 0;  // cases whose gate_up blocks take every n-th chunk (fewer block rows than pairs)
  int second_chunk = 0;  // cases where some gate_up block multiplies a second chunk
  int staged = 0, unstaged = 0;  // cases whose down kernel stages its weights in shared memory, and the others
  int unstaged_split = 0;        // of the others, those whose down warps split a chunk's K and stream two batches
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name());
    Problem p;
    p.setup(c, devdata::fresh_seed() % 1000003);
    if (HasFatalFailure()) return;
    const MoeRunPlan rp = testing::plan_of(p.layer, c.T);
    ASSERT_TRUE(rp.direct_decode) << rp.to_string();
    const int64_t ch = chunks_of(p);
    looping += direct_gate_up_loops(rp.direct.gate_up_chunk_blocks, c.T * c.k);
    second_chunk += ch > rp.direct.gate_up_chunk_blocks;
    (rp.direct.down_stages_weights ? staged : unstaged) += 1;
    unstaged_split += !rp.direct.down_stages_weights && ch > 0 && ch < kDirectWarps &&
                      direct_down_groups_per_warp(ch, c.I / 64) > kDirectDownBatch;
    p.run_poisoned();
    if (HasFatalFailure()) return;
    testing::check_against_reference(p);
    if (HasFatalFailure()) return;
  }
  EXPECT_GE(looping, 2) << "both gate_up kernels (one chunk per block, and blocks that loop over chunks) must run";
  EXPECT_GE(second_chunk, 1) << "a gate_up block must take a second chunk (the top-1 one-expert case)";
  // Which down kernel a case gets follows the GPU's SMs and shared memory; the cases are chosen for the H200's.
  int sms = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  if (sms == 132) {
    EXPECT_GE(staged, 1) << "the down kernel that stages its weights must run";
    EXPECT_GE(unstaged, 1) << "the down kernel that keeps its weights in registers must run";
    EXPECT_GE(unstaged_split, 1) << "... with its K split and two batches a warp";
  } else {
    std::printf("note: %d SMs (not the H200's 132): %d cases staged down's weights, %d kept them in registers, %d of "
                "those with K split and two batches\n", sms, staged, unstaged, unstaged_split);
  }
}

// A token that names one expert three times (bad input the tiled kernels also serve: three rows of that expert)
// gets every row (gate_up stages the tokens' rows, so both of its rows read that token's row).
TEST(MoeDirect, RepeatedIdsOfOneTokenGetTwoRows) {
  FP4MOE_SKIP_WITHOUT_GPU();
  Problem p;
  p.setup(Case{1, 16, 512, 256, 8}, devdata::fresh_seed() % 1000003);
  if (HasFatalFailure()) return;
  p.in.ids[1] = p.in.ids[0];
  p.in.ids[5] = p.in.ids[0];
  ASSERT_TRUE(p.ids.upload(p.in.ids));
  ASSERT_TRUE(testing::plan_of(p.layer, 1).direct_decode);
  p.run_poisoned();
  if (HasFatalFailure()) return;
  testing::check_against_reference(p);
}

// An expert-parallel rank's step of a few tokens: fewer chunks than warps, whose K down's warps split (16 K groups, four
// weight batches a warp, at I = 2048 over 2 warps), and room in down's shared memory for fewer SwiGLU rows than pairs
// (the plan sizes it by the rows uniform routing over 256 experts gives 32 of them). With every pair on this rank
// (ids in [0, E)) the rows past that room come from L2: the outputs match the reference, and a rerun gives the same bits.
TEST(MoeDirect, ExpertParallelRankReadsTheRowsPastItsRoomFromL2) {
  FP4MOE_SKIP_WITHOUT_GPU();
  struct EpCase {
    Case c;
    int64_t global_experts;
    bool rows_from_l2;  // the call has more rows than down stages
  };
  const EpCase cases[] = {
      {Case{3, 32, 1024, 2048, 8}, 256, true},   // 24 rows (8 to 24 chunks), room for 22
      {Case{4, 32, 1024, 2048, 8}, 256, true},   // 32 rows
      {Case{1, 16, 1024, 2048, 3}, 128, false},  // 3 chunks: 2 warps a chunk, 16 K groups each, the rows staged
  };
  for (EpCase ec : cases) {
    ec.c.global_experts = ec.global_experts;
    SCOPED_TRACE(ec.c.name());
    Problem p;
    p.setup(ec.c, devdata::fresh_seed() % 1000003);
    if (HasFatalFailure()) return;
    const MoeRunPlan rp = testing::plan_of(p.layer, ec.c.T);
    ASSERT_TRUE(rp.direct_decode) << rp.to_string();
    EXPECT_EQ(rp.direct.down_staged_rows < ec.c.T * ec.c.k, ec.rows_from_l2) << rp.to_string();
    if (!ec.rows_from_l2) EXPECT_EQ(chunks_of(p), 3) << "three distinct experts: 2 down warps a chunk";
    p.run_poisoned();
    if (HasFatalFailure()) return;
    testing::check_against_reference(p);
    if (HasFatalFailure()) return;
    testing::expect_reruns_bit_identical(p);
  }
}

// Where the tiled kernels add in the same order -- gate_up with K in 8 splits (the 8 warps' ranges), the 8-token
// tile, down unsplit with one K tile, at least 8 chunks -- the direct path's SwiGLU rows and outputs are the same
// bits, in both deterministic finalize modes, also with a non-finite router weight (skipped, reported by check()).
TEST(MoeDirect, BitIdenticalToTheTiledKernelsInTheSameOrder) {
  FP4MOE_SKIP_WITHOUT_GPU();
  for (FinalizeMode mode : {FinalizeMode::kDeterministic, FinalizeMode::kDeterministicBf16})
    for (int64_t T : {1, 2}) {
      Case c{T, 256, 2048, 256, 8, Routing::kUniform, 0, mode};
      c.gate_up_k_splits = 8;  // (for the workspace of the tiled call)
      SCOPED_TRACE(c.name());
      Problem p;
      p.setup(c, devdata::fresh_seed() % 1000003);
      if (HasFatalFailure()) return;
      MoeForwardArgs direct = p.args();
      direct.gate_up_k_splits = 0;
      MoeForwardArgs tiled = p.args();
      tiled.block_m = 8;
      tiled.gate_up_k_splits = 8;
      tiled.down_k_splits = 1;
      MoeRunPlan dp, tp;
      ASSERT_TRUE(p.layer.plan(direct, &dp).is_ok() && p.layer.plan(tiled, &tp).is_ok());
      ASSERT_TRUE(dp.direct_decode) << dp.to_string();
      ASSERT_FALSE(tp.direct_decode) << tp.to_string();
      ASSERT_EQ(tp.down.block_k, 256) << tp.to_string();
      for (bool nan_weight : {false, true}) {
        SCOPED_TRACE(nan_weight ? "a non-finite router weight (that pair skipped and reported)" : "valid weights");
        if (nan_weight) {
          p.in.weights[static_cast<size_t>(T * 8 - 1)] = std::nanf("");
          ASSERT_TRUE(p.weights.upload(p.in.weights));
        }
        std::vector<uint16_t> out_d, act_d, out_t, act_t;
        testing::run_and_download(p, direct, &out_d, &act_d);
        if (HasFatalFailure()) return;
        const StatusCode check_d = p.layer.check(p.ws.get(), nullptr).code();
        testing::run_and_download(p, tiled, &out_t, &act_t);
        if (HasFatalFailure()) return;
        const StatusCode check_t = p.layer.check(p.ws.get(), nullptr).code();
        // The routed pairs' SwiGLU rows (every id is valid here; the skipped pair has no row, the last one)
        const size_t rows = static_cast<size_t>(T * 8 - (nan_weight ? 1 : 0));
        act_d.resize(rows * 256);
        act_t.resize(rows * 256);
        EXPECT_EQ(act_d, act_t) << "SwiGLU rows differ";
        EXPECT_EQ(out_d, out_t) << "outputs differ";
        EXPECT_EQ(check_d, nan_weight ? StatusCode::kInvalidArgument : StatusCode::kOk);
        EXPECT_EQ(check_d, check_t);
      }
    }
}

// Two runs, two replays of a captured forward pass (two kernels, one a programmatic dependent) and a run with plain
// launches give the same bits; a poisoned output is fully rewritten each time.
TEST(MoeDirect, RerunsAndGraphReplaysAreBitIdentical) {
  FP4MOE_SKIP_WITHOUT_GPU();
  for (const Case& c : {Case{1, 256, 2048, 256, 8}, Case{3, 32, 1024, 128, 8, Routing::kSkewed}}) {
    SCOPED_TRACE(c.name());
    Problem p;
    p.setup(c, devdata::fresh_seed() % 1000003);
    if (HasFatalFailure()) return;
    ASSERT_TRUE(testing::plan_of(p.layer, c.T).direct_decode);
    p.run_poisoned();
    if (HasFatalFailure()) return;
    testing::check_against_reference(p);
    if (HasFatalFailure()) return;
    std::vector<uint16_t> first;
    testing::expect_reruns_bit_identical(p, &first);
    if (HasFatalFailure()) return;
    // Without programmatic launch (plain stream order): the same bits.
    MoeLayerOptions o = testing::options_for(c);
    o.programmatic_launch = false;
    MoeLayer plain;
    ASSERT_TRUE(plain.init(MoeShape{c.E, c.H, c.I, c.k}, o, p.w13.device(), p.w2.device(), nullptr).is_ok());
    MoeRunPlan pp;
    ASSERT_TRUE(plain.plan(p.args(), &pp).is_ok());
    ASSERT_TRUE(pp.direct_decode && !pp.programmatic_launch) << pp.to_string();
    ASSERT_TRUE(p.out.poison(0xFF) && p.ws.poison(0xFF));
    ASSERT_TRUE(plain.run(p.args(), p.ws.get(), p.ws.bytes(), nullptr).is_ok());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(p.out.download<uint16_t>(first.size()), first) << "plain launches differ";
  }
}

// The GLM-5 TP8 shard's one-token step keeps all of down's blocks resident beside gate_up's on a 132-SM sm_90 part
// with 228 KB of shared memory an SM (H100, H200): three down blocks of 48 registers an SM beside two of gate_up's,
// which holds only while gate_up's one-chunk kernel takes at most 56 registers (twice 256 threads x 56 leaves three
// times 256 x 48 of the 65,536). The plan reads the kernels' registers at init, so a kernel change that costs gate_up
// registers moves down to its register path; this catches it (the thirty-first session measured 0.5 us a step lost
// when extra registers left two down blocks an SM: docs/perf/shards.md, "T=1 is fixed cost").
TEST(MoeDirect, Tp8ShardStepOfOneTokenKeepsDownResidentBesideGateUp) {
  FP4MOE_SKIP_WITHOUT_GPU();
  int sms = 0, cc = 0, smem_per_sm = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&cc, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, 0), cudaSuccess);
  if (cc != 9 || sms != 132 || smem_per_sm < 233472)
    GTEST_SKIP() << "the residency this checks is an H100's or H200's (132 SMs, 228 KB an SM); this GPU: sm_" << cc
                 << "x, " << sms << " SMs, " << smem_per_sm << " B an SM";
  Problem p;
  p.setup(Case{1, 256, 6144, 256, 8}, devdata::fresh_seed() % 1000003);
  if (HasFatalFailure()) return;
  const MoeRunPlan rp = testing::plan_of(p.layer, 1);
  ASSERT_TRUE(rp.direct_decode) << rp.to_string();
  EXPECT_EQ(rp.direct.gate_up_blocks, 256) << rp.to_string();
  EXPECT_EQ(rp.direct.down_blocks, 384) << rp.to_string();
  EXPECT_TRUE(rp.direct.down_stages_weights)
      << "down's blocks no longer fit beside gate_up's (the direct kernels' registers grew?): " << rp.to_string();
}

}  // namespace
}  // namespace fp4moe
