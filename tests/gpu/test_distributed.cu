// GPU tests of the MoE layer across ranks over NCCL (fp4moe/distributed.h): one rank against the plain layer bit for
// bit (any GPU), and on 2-4 GPUs the TP and EP layers against the fp64 reference of the whole layer, identical
// outputs on every rank, bit-identical reruns, a rank none of whose experts is chosen, uneven routing.
// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "fp4moe/bf16.h"
#include "fp4moe/distributed.h"
#include "fp4moe/moe.h"
#include "fp4moe/shard.h"
#include "fp4moe/testing.h"
#include "tests/gpu/moe_check.h"

namespace fp4moe {
namespace {

using testing::DeviceBuffer;
using testing::ExpertWeights;
using testing::RoutingInputs;
using testing::reference_input;

#define NCCL_OK(expr) ASSERT_EQ((expr), ncclSuccess) << #expr

int gpu_count() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

// One rank's device buffers for a forward pass of T tokens.
struct RankBuffers {
  DeviceBuffer hidden, ids, weights, out, ws;
  bool make(const RoutingInputs& in, int64_t T, int64_t H, size_t ws_bytes) {
    hidden.alloc(in.hidden.size() * 2);
    ids.alloc(in.ids.size() * 4);
    weights.alloc(in.weights.size() * 4);
    out.alloc(static_cast<size_t>(T * H * 2));
    ws.alloc(ws_bytes);
    return hidden.upload(in.hidden) && ids.upload(in.ids) && weights.upload(in.weights) && out.poison(0xFF) &&
           ws.poison(0xFF);
  }
  MoeForwardArgs args(int64_t T) const {
    MoeForwardArgs a;
    a.hidden = hidden.get();
    a.num_tokens = T;
    a.topk_ids = ids.as<int32_t>();
    a.topk_weights = weights.as<float>();
    a.output = out.get();
    return a;
  }
};

MoeLayerOptions deterministic_options() {
  MoeLayerOptions o;
  o.tuning_cache = "none";
  return o;
}

// One rank: its distributed layer equals the plain layer bit for bit, with tokens replicated and sharded, direct
// and replayed from a CUDA graph; a rejected call writes nothing.
TEST(Distributed, OneRankEqualsThePlainLayer) {
  FP4MOE_SKIP_WITHOUT_GPU();
  CUDA_OK(cudaSetDevice(0));
  ncclComm_t comm = nullptr;
  const int dev0 = 0;
  NCCL_OK(ncclCommInitAll(&comm, 1, &dev0));
  const int64_t E = 16, H = 512, I = 256, k = 4;
  const uint64_t seed = devdata::fresh_seed() % 1000003;
  ExpertWeights w13, w2;
  ASSERT_TRUE(testing::make_weights(MoeShape{E, H, I, k}, seed, false, &w13, &w2));
  MoeLayer plain;
  ASSERT_TRUE(plain.init(MoeShape{E, H, I, k}, deterministic_options(), w13.device(), w2.device(), nullptr).is_ok());
  for (TokenLayout tl : {TokenLayout::kReplicated, TokenLayout::kSharded}) {
    DistributedMoeLayer d;
    const Status st = d.init(comm, MoeShape{E, H, I, k}, deterministic_options(), DistributedMoeOptions{tl}, w13.device(),
                             w2.device(), nullptr);
    ASSERT_TRUE(st.is_ok()) << st.to_string();
    EXPECT_EQ(d.world_size(), 1);
    EXPECT_EQ(d.rank(), 0);
    for (int64_t T : {3, 40}) {
      SCOPED_TRACE("T=" + std::to_string(T) + (tl == TokenLayout::kSharded ? " sharded" : " replicated"));
      RoutingInputs in;
      in.make(T, H, E, k, testing::Routing::kSkewed, seed + static_cast<uint64_t>(T));
      RankBuffers a, b;
      ASSERT_TRUE(a.make(in, T, H, plain.workspace_size(T)) && b.make(in, T, H, d.workspace_size(T)));
      ASSERT_TRUE(plain.run(a.args(T), a.ws.get(), a.ws.bytes(), nullptr).is_ok());
      const Status r = d.run(b.args(T), b.ws.get(), b.ws.bytes(), nullptr);
      ASSERT_TRUE(r.is_ok()) << r.to_string();
      CUDA_OK(cudaDeviceSynchronize());
      const auto want = a.out.download<uint16_t>(static_cast<size_t>(T * H));
      EXPECT_EQ(b.out.download<uint16_t>(want.size()), want) << "one rank differs from the plain layer";
      // Graph capture of the collectives and the kernels, replayed twice.
      cudaStream_t s;
      CUDA_OK(cudaStreamCreate(&s));
      cudaGraph_t g;
      cudaGraphExec_t ge;
      ASSERT_TRUE(b.out.poison(0xFF));
      CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
      const Status cap = d.run(b.args(T), b.ws.get(), b.ws.bytes(), s);
      CUDA_OK(cudaStreamEndCapture(s, &g));
      ASSERT_TRUE(cap.is_ok()) << cap.to_string();
      CUDA_OK(cudaGraphInstantiate(&ge, g, 0));
      for (int i = 0; i < 2; ++i) CUDA_OK(cudaGraphLaunch(ge, s));
      CUDA_OK(cudaStreamSynchronize(s));
      EXPECT_EQ(b.out.download<uint16_t>(want.size()), want) << "graph replay differs";
      cudaGraphExecDestroy(ge);
      cudaGraphDestroy(g);
      cudaStreamDestroy(s);
      // A workspace one byte short of this call's need and a null output are rejected before anything is
      // enqueued. (workspace_size(T) covers every call of up to T tokens, which can need more than this one.)
      ASSERT_TRUE(b.out.poison(0x5A));
      const size_t need = d.workspace_size(b.args(T));
      ASSERT_GT(need, 0u);
      EXPECT_LE(need, d.workspace_size(T));
      EXPECT_EQ(d.run(b.args(T), b.ws.get(), need - 1, nullptr).code(), StatusCode::kResourceExhausted);
      MoeForwardArgs bad = b.args(T);
      bad.output = nullptr;
      EXPECT_EQ(d.run(bad, b.ws.get(), b.ws.bytes(), nullptr).code(), StatusCode::kInvalidArgument);
      // A misaligned workspace is the distributed layer's own rejection too (before its all-gathers are queued), and
      // so is a negative T; workspace_size of a T whose gathered count is out of range is 0.
      const Status mis = d.run(b.args(T), static_cast<uint8_t*>(b.ws.get()) + 16, b.ws.bytes() - 16, nullptr);
      EXPECT_EQ(mis.code(), StatusCode::kMisaligned) << mis.to_string();
      bad = b.args(T);
      bad.num_tokens = -1;
      EXPECT_EQ(d.run(bad, b.ws.get(), b.ws.bytes(), nullptr).code(), StatusCode::kInvalidArgument);
      EXPECT_EQ(d.workspace_size((int64_t{1} << 40) + 1), 0u);
      CUDA_OK(cudaDeviceSynchronize());
      const auto untouched = b.out.download<uint8_t>(static_cast<size_t>(T * H * 2));
      EXPECT_TRUE(std::all_of(untouched.begin(), untouched.end(), [](uint8_t x) { return x == 0x5A; }));
    }
  }
  DistributedMoeLayer none;
  EXPECT_EQ(none.init(nullptr, MoeShape{E, H, I, k}, deterministic_options(), {}, w13.device(), w2.device(), nullptr).code(),
            StatusCode::kInvalidArgument);
  ncclCommDestroy(comm);
}

// ---- several GPUs, one process (ncclCommInitAll) ------------------------------------------------------------------

struct Ranks {
  int world = 0;
  std::vector<ncclComm_t> comms;
  std::vector<cudaStream_t> streams;
  bool init(int n) {
    world = n;
    std::vector<int> devs(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) devs[static_cast<size_t>(i)] = i;
    comms.resize(static_cast<size_t>(n));
    if (ncclCommInitAll(comms.data(), n, devs.data()) != ncclSuccess) return false;
    streams.resize(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i)
      if (cudaSetDevice(i) != cudaSuccess || cudaStreamCreate(&streams[static_cast<size_t>(i)]) != cudaSuccess) return false;
    return cudaSetDevice(0) == cudaSuccess;
  }
  ~Ranks() {
    for (size_t i = 0; i < comms.size(); ++i) {
      cudaSetDevice(static_cast<int>(i));
      if (i < streams.size() && streams[i]) cudaStreamDestroy(streams[i]);
      if (comms[i]) ncclCommDestroy(comms[i]);
    }
    cudaSetDevice(0);
  }
};

// The distributed outputs (fp64 of bf16) against the full layer's reference of the same tokens: within the
// reference's tolerance plus the bf16 roundings of the ranks' partial sums and of NCCL's bf16 additions (at most
// world of them, each half an ulp of a partial sum's magnitude): world * 2^-8 * sum |partials|.
void expect_matches(const std::vector<uint16_t>& got, const std::vector<std::vector<uint16_t>>& partials,
                    const reference::LayerOutput& ref, size_t offset, int world) {
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = bf16_to_float(got[i]);
    ASSERT_TRUE(std::isfinite(g)) << "output " << i << " not written";
    double mag = 0;
    for (const auto& p : partials) mag += std::fabs(bf16_to_float(p[offset + i]));
    const double tol = ref.tol[offset + i] + world * std::ldexp(mag, -8) + std::ldexp(std::fabs(g), -8);
    if (std::fabs(g - ref.out[offset + i]) > tol && bad++ < 5)
      ADD_FAILURE() << "out[" << i << "]: got " << g << ", the full layer is " << ref.out[offset + i] << " (tol " << tol << ")";
  }
  EXPECT_EQ(bad, 0);
}

// Runs `layers` (one per rank) with run_group on per-rank inputs `ins` (T tokens each); returns each rank's output.
void run_all(const std::vector<DistributedMoeLayer>& layers, const std::vector<RoutingInputs>& ins, int64_t T, int64_t H,
             const Ranks& r, std::vector<std::vector<uint16_t>>* outs) {
  std::vector<RankBuffers> bufs(layers.size());
  std::vector<const DistributedMoeLayer*> lp;
  std::vector<MoeForwardArgs> args;
  std::vector<void*> ws;
  std::vector<size_t> wsb;
  for (size_t i = 0; i < layers.size(); ++i) {
    CUDA_OK(cudaSetDevice(static_cast<int>(i)));
    ASSERT_TRUE(bufs[i].make(ins[i], T, H, layers[i].workspace_size(T)));
    lp.push_back(&layers[i]);
    args.push_back(bufs[i].args(T));
    ws.push_back(bufs[i].ws.get());
    wsb.push_back(bufs[i].ws.bytes());
  }
  const Status st = DistributedMoeLayer::run_group(lp, args, ws, wsb, r.streams);
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  outs->clear();
  for (size_t i = 0; i < layers.size(); ++i) {
    CUDA_OK(cudaSetDevice(static_cast<int>(i)));
    CUDA_OK(cudaStreamSynchronize(r.streams[i]));
    outs->push_back(bufs[i].out.download<uint16_t>(static_cast<size_t>(T * H)));
  }
  CUDA_OK(cudaSetDevice(0));
}

// A rank's shard alone (its partial sums; the SwiGLU rows of the pairs it owns, by pair index) on `in` (T tokens).
void run_partial(const MoeLayer& l, int dev, const RoutingInputs& in, int64_t T, int64_t H, int64_t I, int64_t k,
                 std::vector<uint16_t>* out, std::map<int64_t, std::vector<uint16_t>>* act) {
  CUDA_OK(cudaSetDevice(dev));
  RankBuffers b;
  ASSERT_TRUE(b.make(in, T, H, l.workspace_size(T)));
  ASSERT_TRUE(l.run(b.args(T), b.ws.get(), b.ws.bytes(), nullptr).is_ok());
  CUDA_OK(cudaDeviceSynchronize());
  *out = b.out.download<uint16_t>(static_cast<size_t>(T * H));
  const auto v = testing::workspace_view(l, b.ws.get(), T);
  std::vector<int32_t> offsets(static_cast<size_t>(l.shape().num_experts + 1)), perm(static_cast<size_t>(T * k));
  CUDA_OK(cudaMemcpy(offsets.data(), v.expert_offsets, offsets.size() * 4, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(perm.data(), v.perm_pair, perm.size() * 4, cudaMemcpyDeviceToHost));
  std::vector<uint16_t> a(static_cast<size_t>(offsets.back() * I));
  CUDA_OK(cudaMemcpy(a.data(), v.act, a.size() * 2, cudaMemcpyDeviceToHost));
  for (int64_t row = 0; row < offsets.back(); ++row)
    (*act)[perm[static_cast<size_t>(row)]].assign(a.begin() + row * I, a.begin() + (row + 1) * I);
  CUDA_OK(cudaSetDevice(0));
}

// Pair p's SwiGLU row as a rank computed it (columns first .. first + got.size() of the full layer's) matches the
// reference's gate_up of that pair within its tolerance: the reference's down below is built from these rows, so a
// wrong row would otherwise move the reference with the output.
void expect_act_matches(const reference::MoeReferenceInput& ri, int64_t p, int64_t k, const std::vector<uint16_t>& got,
                        int64_t first) {
  const reference::PairActivation ref = reference::reference_gate_up(ri, p / k, p % k);
  for (size_t j = 0; j < got.size(); ++j) {
    const size_t c = static_cast<size_t>(first) + j;
    ASSERT_TRUE(testing::matches(bf16_to_float(got[j]), ref.act[c], ref.act_tol[c]))
        << "pair " << p << ", SwiGLU column " << c << ": " << bf16_to_float(got[j]) << " against " << ref.act[c];
  }
}

// Tensor parallelism over 2-4 GPUs, tokens replicated (all-reduce): every rank ends with the same output, which
// matches the full layer; a rerun is bit-identical.
TEST(Distributed, TensorParallelRanksMatchTheFullLayer) {
  FP4MOE_SKIP_WITHOUT_GPU();
  if (gpu_count() < 2) GTEST_SKIP() << "needs two GPUs; this machine has " << gpu_count();
  const int world = std::min(gpu_count(), 4);
  Ranks r;
  ASSERT_TRUE(r.init(world));
  const int64_t E = 16, H = 512, I = 256 * world, k = 4, Is = I / world;
  for (int64_t T : {2, 64}) {
    SCOPED_TRACE("tp=" + std::to_string(world) + " T=" + std::to_string(T));
    const uint64_t seed = devdata::fresh_seed() % 1000003;
    RoutingInputs in;
    testing::make_inputs(MoeShape{E, H, I, k}, T, testing::Routing::kSkewed, seed, &in);  // uneven routing
    std::vector<ExpertWeights> w13(static_cast<size_t>(world)), w2(static_cast<size_t>(world));
    std::vector<DistributedMoeLayer> layers(static_cast<size_t>(world));
    struct Slice {
      DeviceBuffer b[6];  // w13 packed, scales, global; w2 packed, scales, global
    };
    std::vector<Slice> slices(static_cast<size_t>(world));
    for (int i = 0; i < world; ++i) {
      CUDA_OK(cudaSetDevice(i));
      auto& w13i = w13[static_cast<size_t>(i)];
      auto& w2i = w2[static_cast<size_t>(i)];
      ASSERT_TRUE(testing::make_weights(MoeShape{E, H, I, k}, seed, false, &w13i, &w2i));
      auto& b = slices[static_cast<size_t>(i)].b;
      const size_t sz[6] = {size_t(E * 2 * Is * H / 2), size_t(E * 2 * Is * H / 16), size_t(E * 4),
                            size_t(E * H * Is / 2), size_t(E * H * Is / 16), size_t(E * 4)};
      for (int j = 0; j < 6; ++j) b[j].alloc(sz[j]);
      const Nvfp4ExpertWeightsOut o13{b[0].get(), b[1].get(), b[2].as<float>()}, o2{b[3].get(), b[4].get(), b[5].as<float>()};
      ASSERT_TRUE(shard_tp_weights(MoeShape{E, H, I, k}, world, i, w13i.device(), w2i.device(), o13, o2, nullptr).is_ok());
      const Status st = layers[static_cast<size_t>(i)].init(
          r.comms[static_cast<size_t>(i)], MoeShape{E, H, Is, k}, deterministic_options(), {TokenLayout::kReplicated},
          Nvfp4ExpertWeights{b[0].get(), b[1].get(), b[2].as<float>()}, Nvfp4ExpertWeights{b[3].get(), b[4].get(), b[5].as<float>()},
          nullptr);
      ASSERT_TRUE(st.is_ok()) << st.to_string();
    }
    std::vector<std::vector<uint16_t>> outs, again;
    run_all(layers, std::vector<RoutingInputs>(static_cast<size_t>(world), in), T, H, r, &outs);
    if (HasFatalFailure()) return;
    run_all(layers, std::vector<RoutingInputs>(static_cast<size_t>(world), in), T, H, r, &again);
    if (HasFatalFailure()) return;
    for (int i = 0; i < world; ++i) {
      EXPECT_EQ(outs[static_cast<size_t>(i)], outs[0]) << "rank " << i << " ends with another output";
      EXPECT_EQ(again[static_cast<size_t>(i)], outs[static_cast<size_t>(i)]) << "rank " << i << ": rerun differs";
    }
    // The reference from each rank's SwiGLU columns, and the ranks' partial sums for the rounding bound.
    const reference::ExpertWeightsView v13 = w13[0].view(), v2 = w2[0].view();
    const reference::DecodedExperts d13(v13), d2(v2);
    const reference::MoeReferenceInput ri = reference_input(in, T, MoeShape{E, H, I, k}, &d13, &d2);
    std::vector<std::vector<uint16_t>> act(static_cast<size_t>(T * k), std::vector<uint16_t>(static_cast<size_t>(I)));
    std::vector<std::vector<uint16_t>> partials(static_cast<size_t>(world));
    for (int i = 0; i < world; ++i) {
      std::map<int64_t, std::vector<uint16_t>> a;
      run_partial(layers[static_cast<size_t>(i)].local(), i, in, T, H, Is, k, &partials[static_cast<size_t>(i)], &a);
      if (HasFatalFailure()) return;
      EXPECT_EQ(static_cast<int64_t>(a.size()), T * k) << "rank " << i << " holds every pair's slice";
      for (const auto& [p, v] : a) {
        // The rank's SwiGLU columns against the full layer's reference (its slice i * Is ..), before they feed it.
        expect_act_matches(ri, p, k, v, i * Is);
        if (HasFatalFailure()) return;
        std::copy(v.begin(), v.end(), act[static_cast<size_t>(p)].begin() + i * Is);
      }
    }
    expect_matches(outs[0], partials, reference::reference_down(ri, act), 0, world);
  }
}

// Expert parallelism over 2-4 GPUs, tokens sharded (all-gather, reduce-scatter): rank r's output is the full
// layer's output of its own tokens; a rank none of whose experts is chosen adds exact zeros.
TEST(Distributed, ExpertParallelRanksMatchTheFullLayer) {
  FP4MOE_SKIP_WITHOUT_GPU();
  if (gpu_count() < 2) GTEST_SKIP() << "needs two GPUs; this machine has " << gpu_count();
  const int world = std::min(gpu_count(), 4);
  Ranks r;
  ASSERT_TRUE(r.init(world));
  const int64_t El = 8, E = El * world, H = 512, I = 256, k = 4;
  for (bool only_rank0 : {false, true}) {
    const int64_t T = only_rank0 ? 16 : 24;
    SCOPED_TRACE("ep=" + std::to_string(world) + (only_rank0 ? " every id on rank 0's experts" : " uniform"));
    const uint64_t seed = devdata::fresh_seed() % 1000003;
    std::vector<RoutingInputs> ins(static_cast<size_t>(world));
    RoutingInputs all;  // the gathered tokens, rank-major
    for (int i = 0; i < world; ++i) {
      ins[static_cast<size_t>(i)].make(T, H, only_rank0 ? El : E, k, testing::Routing::kUniform, seed * 11 + static_cast<uint64_t>(i));
      const auto& x = ins[static_cast<size_t>(i)];
      all.hidden.insert(all.hidden.end(), x.hidden.begin(), x.hidden.end());
      all.ids.insert(all.ids.end(), x.ids.begin(), x.ids.end());
      all.weights.insert(all.weights.end(), x.weights.begin(), x.weights.end());
    }
    std::vector<ExpertWeights> w13(static_cast<size_t>(world)), w2(static_cast<size_t>(world));
    std::vector<DistributedMoeLayer> layers(static_cast<size_t>(world));
    for (int i = 0; i < world; ++i) {
      CUDA_OK(cudaSetDevice(i));
      auto& w13i = w13[static_cast<size_t>(i)];
      auto& w2i = w2[static_cast<size_t>(i)];
      ASSERT_TRUE(testing::make_weights(MoeShape{E, H, I, k}, seed, false, &w13i, &w2i));
      Nvfp4ExpertWeights r13, r2;
      ASSERT_TRUE(expert_range(w13i.device(), E, 2 * I, H, i * El, El, &r13).is_ok());
      ASSERT_TRUE(expert_range(w2i.device(), E, H, I, i * El, El, &r2).is_ok());
      const Status st = layers[static_cast<size_t>(i)].init(r.comms[static_cast<size_t>(i)], MoeShape{El, H, I, k, E, i * El},
                                                           deterministic_options(), {TokenLayout::kSharded}, r13, r2, nullptr);
      ASSERT_TRUE(st.is_ok()) << st.to_string();
    }
    std::vector<std::vector<uint16_t>> outs, again;
    run_all(layers, ins, T, H, r, &outs);
    if (HasFatalFailure()) return;
    run_all(layers, ins, T, H, r, &again);
    if (HasFatalFailure()) return;
    for (int i = 0; i < world; ++i) EXPECT_EQ(again[static_cast<size_t>(i)], outs[static_cast<size_t>(i)]) << "rerun differs";
    const int64_t Tall = T * world;
    const reference::ExpertWeightsView v13 = w13[0].view(), v2 = w2[0].view();
    const reference::DecodedExperts d13(v13), d2(v2);
    const reference::MoeReferenceInput ri = reference_input(all, Tall, MoeShape{E, H, I, k}, &d13, &d2);
    std::vector<std::vector<uint16_t>> act(static_cast<size_t>(Tall * k));
    std::vector<std::vector<uint16_t>> partials(static_cast<size_t>(world));
    for (int i = 0; i < world; ++i) {
      std::map<int64_t, std::vector<uint16_t>> a;
      run_partial(layers[static_cast<size_t>(i)].local(), i, all, Tall, H, I, k, &partials[static_cast<size_t>(i)], &a);
      if (HasFatalFailure()) return;
      for (auto& [p, v] : a) {
        expect_act_matches(ri, p, k, v, 0);  // the rank's own pairs' SwiGLU rows against the reference
        if (HasFatalFailure()) return;
        act[static_cast<size_t>(p)] = v;
      }
      if (only_rank0 && i > 0)
        for (uint16_t b : partials[static_cast<size_t>(i)]) ASSERT_EQ(b & 0x7FFF, 0) << "rank " << i << " must add zeros";
    }
    const reference::LayerOutput ref = reference::reference_down(ri, act);
    for (int i = 0; i < world; ++i) {
      SCOPED_TRACE("rank " + std::to_string(i));
      expect_matches(outs[static_cast<size_t>(i)], partials, ref, static_cast<size_t>(i * T * H), world);
      if (only_rank0) {  // rank 0's partial plus exact zeros: the same bits
        const auto& p0 = partials[0];
        EXPECT_TRUE(std::equal(outs[static_cast<size_t>(i)].begin(), outs[static_cast<size_t>(i)].end(), p0.begin() + i * T * H));
      }
    }
  }
}

}  // namespace
}  // namespace fp4moe
