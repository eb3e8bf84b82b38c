// Robustness of the MoE layer: every bad argument gets a clear Status and writes nothing; bad routing is
// skipped and reported; a fuzz over random shapes and routings against the fp64 reference; numeric edges.
// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <random>

#include "fp4moe/moe.h"
#include "tests/gpu/moe_check.h"

namespace fp4moe {
namespace {

using testing::Case;
using testing::DeviceBuffer;
using testing::Problem;
using testing::Routing;

struct BadArg {
  const char* what;
  std::function<void(MoeForwardArgs&, void*& ws, size_t& ws_bytes)> mutate;
  StatusCode code;
  const char* message;  // a substring the message must contain
};

TEST(MoeRobustness, EveryBadForwardArgumentIsRejectedAndNothingIsWritten) {
  FP4MOE_SKIP_WITHOUT_GPU();
  Problem p;
  p.setup(Case{16, 8, 256, 256, 2}, devdata::fresh_seed() % 1000003);
  if (HasFatalFailure()) return;
  char* hid = static_cast<char*>(p.hidden.get());
  char* out = static_cast<char*>(p.out.get());
  const std::vector<BadArg> table = {
      {"hidden null", [](MoeForwardArgs& a, void*&, size_t&) { a.hidden = nullptr; }, StatusCode::kInvalidArgument, "hidden is null"},
      {"hidden misaligned", [&](MoeForwardArgs& a, void*&, size_t&) { a.hidden = hid + 2; }, StatusCode::kMisaligned, "hidden must be 16-byte aligned"},
      {"output null", [](MoeForwardArgs& a, void*&, size_t&) { a.output = nullptr; }, StatusCode::kInvalidArgument, "output is null"},
      {"output misaligned", [&](MoeForwardArgs& a, void*&, size_t&) { a.output = out + 8; }, StatusCode::kMisaligned, "output must be 16-byte aligned"},
      {"topk_ids null", [](MoeForwardArgs& a, void*&, size_t&) { a.topk_ids = nullptr; }, StatusCode::kInvalidArgument, "topk_ids is null"},
      {"topk_ids misaligned", [](MoeForwardArgs& a, void*&, size_t&) { a.topk_ids = reinterpret_cast<const int32_t*>(reinterpret_cast<const char*>(a.topk_ids) + 2); }, StatusCode::kMisaligned, "topk_ids must be 4-byte aligned"},
      {"topk_weights null", [](MoeForwardArgs& a, void*&, size_t&) { a.topk_weights = nullptr; }, StatusCode::kInvalidArgument, "topk_weights is null"},
      {"negative tokens", [](MoeForwardArgs& a, void*&, size_t&) { a.num_tokens = -1; }, StatusCode::kInvalidArgument, "num_tokens must be >= 0"},
      {"T*k past 2^30", [](MoeForwardArgs& a, void*&, size_t&) { a.num_tokens = int64_t{1} << 30; }, StatusCode::kInvalidArgument, "below 2^30"},
      {"unknown block_m", [](MoeForwardArgs& a, void*&, size_t&) { a.block_m = 24; }, StatusCode::kInvalidArgument, "block_m 24"},
      {"down_k_splits not a power of two", [](MoeForwardArgs& a, void*&, size_t&) { a.down_k_splits = 3; }, StatusCode::kInvalidArgument, "down_k_splits must be"},
      {"down_k_splits not dividing the K tiles", [](MoeForwardArgs& a, void*&, size_t&) { a.down_k_splits = 2; }, StatusCode::kInvalidArgument, "does not divide the down GEMM's 1 K tiles of 256"},
      // (one byte less than this call needs: less than workspace_size(T), which covers every plan up to T)
      {"workspace too small", [&](MoeForwardArgs& a, void*&, size_t& b) { b = p.layer.workspace_size(a) - 1; }, StatusCode::kResourceExhausted, "workspace_size"},
      {"workspace null", [](MoeForwardArgs&, void*& w, size_t&) { w = nullptr; }, StatusCode::kInvalidArgument, "workspace is null"},
      // (the size stays as allocated: the call is rejected before anything touches the buffer)
      {"workspace misaligned", [](MoeForwardArgs&, void*& w, size_t&) { w = static_cast<char*>(w) + 16; }, StatusCode::kMisaligned, "workspace must be 256-byte aligned"},
  };
  for (const BadArg& t : table) {
    SCOPED_TRACE(t.what);
    ASSERT_TRUE(p.out.poison(0x5A));
    MoeForwardArgs a = p.args();
    void* ws = p.ws.get();
    size_t bytes = p.ws.bytes();
    t.mutate(a, ws, bytes);
    const Status s = p.layer.run(a, ws, bytes, nullptr);
    EXPECT_EQ(s.code(), t.code) << s.to_string();
    EXPECT_NE(s.message().find(t.message), std::string::npos) << s.to_string();
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    for (uint16_t v : p.out.download<uint16_t>(static_cast<size_t>(16 * 256))) ASSERT_EQ(v, 0x5A5A) << "output written";
  }
  // An uninitialised layer.
  MoeLayer none;
  EXPECT_NE(none.run(p.args(), p.ws.get(), p.ws.bytes(), nullptr).message().find("not initialised"), std::string::npos);
}

// A layer lives on the device it was initialised on: a call from another current device, or on another
// device's stream, is refused and writes nothing. Needs two GPUs (the single-GPU machines skip it).
TEST(MoeRobustness, AStreamOrCurrentDeviceOfAnotherGpuIsRejected) {
  FP4MOE_SKIP_WITHOUT_GPU();
  int n = 0;
  CUDA_OK(cudaGetDeviceCount(&n));
  if (n < 2) GTEST_SKIP() << "needs two GPUs; this machine has " << n;
  CUDA_OK(cudaSetDevice(0));
  Problem p;
  p.setup(Case{8, 8, 256, 256, 2}, devdata::fresh_seed() % 1000003);
  if (HasFatalFailure()) return;
  ASSERT_TRUE(p.out.poison(0x5A));
  cudaStream_t other = nullptr;
  CUDA_OK(cudaSetDevice(1));
  CUDA_OK(cudaStreamCreate(&other));
  // Current device 1: refused before the stream is looked at.
  const Status s = p.layer.run(p.args(), p.ws.get(), p.ws.bytes(), nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find("the current device (1) is not the one the layer was initialised on (0)"), std::string::npos)
      << s.to_string();
  // Current device 0, a stream of device 1.
  CUDA_OK(cudaSetDevice(0));
  const Status s2 = p.layer.run(p.args(), p.ws.get(), p.ws.bytes(), other);
  EXPECT_EQ(s2.code(), StatusCode::kInvalidArgument) << s2.to_string();
  EXPECT_NE(s2.message().find("the stream belongs to device 1"), std::string::npos) << s2.to_string();
  CUDA_OK(cudaDeviceSynchronize());
  for (uint16_t v : p.out.download<uint16_t>(static_cast<size_t>(8 * 256))) ASSERT_EQ(v, 0x5A5A) << "output written";
  // And the same layer still runs on its own device.
  p.run_poisoned();
  if (HasFatalFailure()) return;
  testing::check_against_reference(p);
  CUDA_OK(cudaSetDevice(1));
  CUDA_OK(cudaStreamDestroy(other));
  CUDA_OK(cudaSetDevice(0));
}

TEST(MoeRobustness, BadWeightsAreRejectedAtInit) {
  FP4MOE_SKIP_WITHOUT_GPU();
  testing::ExpertWeights w13, w2;
  ASSERT_TRUE(w13.make(4, 512, 256, 3, false));
  ASSERT_TRUE(w2.make(4, 256, 256, 5, false));
  const MoeShape shape{4, 256, 256, 2};
  MoeLayer layer;
  Nvfp4ExpertWeights bad = w13.device();
  bad.packed = nullptr;
  EXPECT_NE(layer.init(shape, {}, bad, w2.device(), nullptr).message().find("w13"), std::string::npos);
  // A NaN global scale, then a negative block scale.
  ASSERT_TRUE(w2.global.upload(std::vector<float>{1.0f, NAN, 2.0f, 3.0f}));
  const Status s1 = layer.init(shape, {}, w13.device(), w2.device(), nullptr);
  EXPECT_NE(s1.message().find("global scale"), std::string::npos) << s1.to_string();
  ASSERT_TRUE(w2.global.upload(std::vector<float>{1.0f, 1.0f, 2.0f, 3.0f}));
  ASSERT_EQ(cudaMemset(w13.scales.get(), 0xB8, 1), cudaSuccess);  // -1.0 as UE4M3
  const Status s2 = layer.init(shape, {}, w13.device(), w2.device(), nullptr);
  EXPECT_NE(s2.message().find("negative or NaN"), std::string::npos) << s2.to_string();
  ASSERT_EQ(cudaMemset(w13.scales.get(), 0x7F, 1), cudaSuccess);  // NaN
  EXPECT_FALSE(layer.init(shape, {}, w13.device(), w2.device(), nullptr).is_ok());
  ASSERT_EQ(cudaMemset(w13.scales.get(), 0x38, 1), cudaSuccess);  // 1.0: fine again
  const Status s3 = layer.init(shape, {}, w13.device(), w2.device(), nullptr);
  EXPECT_TRUE(s3.is_ok()) << s3.to_string();
}

TEST(MoeRobustness, FuzzAgainstReference) {
  FP4MOE_SKIP_WITHOUT_GPU();
  const char* env = std::getenv("FP4MOE_FUZZ_CASES");
  char* end = nullptr;
  const long parsed = env ? std::strtol(env, &end, 10) : 500;
  ASSERT_TRUE(env == nullptr || (end != env && *end == '\0' && parsed > 0 && parsed <= 1000000))
      << "FP4MOE_FUZZ_CASES must be a positive number of cases, not \"" << env << "\"";
  const int cases = static_cast<int>(parsed);
  const uint64_t base = devdata::fresh_seed() % 100000000;
  const auto t0 = std::chrono::steady_clock::now();
  int done = 0;
  for (int i = 0; i < cases; ++i) {
    const uint64_t seed = base + static_cast<uint64_t>(i);
    std::mt19937_64 rng(seed);
    auto pick = [&](int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1)); };
    Case c{};
    c.E = pick(1, 384);
    c.k = pick(1, std::min<int64_t>(10, c.E));
    // H and I: the smallest sizes the kernels take, 512 in one case of ten (the host reference's cost grows
    // with E * H * I, and 500 cases should fit in two minutes).
    c.H = pick(0, 9) == 0 ? 512 : 256;
    c.I = pick(0, 9) == 0 ? 512 : 256;
    // The down GEMM's K splits: the layer's choice, or any valid forced count (I = 512 allows 2).
    c.down_k_splits = static_cast<int>(pick(0, 2)) == 0 ? static_cast<int>(pick(1, c.I / 256)) : 0;
    c.pdl = pick(0, 3) != 0;
    c.T = pick(0, 9) == 0 ? pick(0, 2) : pick(0, 600);
    const int r = static_cast<int>(pick(0, 3));
    c.routing = r == 0 ? Routing::kSkewed : r == 1 ? Routing::kOneExpert : Routing::kUniform;
    const int bms[] = {0, 8, 16, 32, 64, 128};
    c.block_m = bms[pick(0, 5)];
    // (the bf16-partial draw, added in the ninth session, moved the stream: older logged seeds replay other cases)
    c.finalize = pick(0, 3) == 0 ? FinalizeMode::kAtomic : pick(0, 2) == 0 ? FinalizeMode::kDeterministicBf16 : FinalizeMode::kDeterministic;
    c.gate_first = pick(0, 1) == 0;
    c.dequant_kind = pick(0, 1) == 0;
    SCOPED_TRACE("fuzz case " + std::to_string(i) + ", replay with seed " + std::to_string(seed) + ": " + c.name());
    Problem p;
    p.setup(c, seed);
    if (HasFatalFailure()) return;
    p.run_poisoned();
    if (HasFatalFailure()) return;
    if (c.T > 0) testing::check_against_reference(p);
    if (HasFatalFailure()) return;
    ++done;
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(done, cases) << "every drawn case ran";
  RecordProperty("fuzz_cases", done);
  RecordProperty("fuzz_seconds", std::to_string(s));
  std::printf("fuzz: %d cases against the fp64 reference in %.1f s (seeds %llu..%llu)\n", done, s,
              static_cast<unsigned long long>(base), static_cast<unsigned long long>(base + cases - 1));
}

TEST(MoeRobustness, LargeActivationsStayFiniteWhereTheReferenceIs) {
  FP4MOE_SKIP_WITHOUT_GPU();
  Problem p;
  // A fixed seed, unlike the other checks against the reference: the claim below (every output finite) is about how
  // far these inputs' largest SwiGLU products and down sums stay from fp32's range, which a fresh draw's tail
  // would move.
  p.setup(Case{32, 8, 256, 256, 2}, 21);
  if (HasFatalFailure()) return;
  // |x| about 1e18: products and sums stay far inside fp32 and bf16 range, SwiGLU outputs near 1e36.
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1e18f);
  for (auto& h : p.in.hidden) h = float_to_bf16(nd(rng));
  ASSERT_TRUE(p.hidden.upload(p.in.hidden));
  p.run_poisoned();
  if (HasFatalFailure()) return;
  check_against_reference(p);
  for (uint16_t v : p.out.download<uint16_t>(static_cast<size_t>(32 * 256))) ASSERT_TRUE(std::isfinite(bf16_to_float(v)));
}

TEST(MoeRobustness, NearBf16MaxGivesInfOrNanOnlyWhereTheReferenceDoes) {
  FP4MOE_SKIP_WITHOUT_GPU();
  Problem p;
  // A fixed seed: where the tiled kernels' fp32 accumulators overflow is a property of these inputs (below).
  p.setup(Case{16, 8, 256, 256, 2}, 22);
  if (HasFatalFailure()) return;
  // Every 37th activation at 3e38 (bf16's max is 3.39e38) with small weights (global scale 1e6, so
  // |w| <= 6 * 448 / 1e6): SwiGLU products overflow bf16 (and fp32), and the down projection then sees inf: every
  // non-finite output must be where the reference has one. The tiled kernels: their accumulators hold the weights
  // before the global scale (up to 6 * 448 / 2^9) times 3e38 and can overflow; summed in one pass over K they give
  // an inf of the exact sum's sign here. The direct decode path sums 8 K ranges, which can meet both signs and give
  // NaN where the exact result is finite (docs/perf/shards.md says so), so it is not this test's subject.
  for (auto* w : {&p.w13, &p.w2}) {
    for (auto& g : w->host_global) g = 1.0e6f;
    ASSERT_TRUE(w->global.upload(w->host_global));
  }
  for (size_t i = 0; i < p.in.hidden.size(); i += 37) p.in.hidden[i] = float_to_bf16(3.0e38f);
  ASSERT_TRUE(p.hidden.upload(p.in.hidden));
  MoeLayerOptions o;
  o.direct_decode = false;
  ASSERT_TRUE(p.layer.init(MoeShape{8, 256, 256, 2}, o, p.w13.device(), p.w2.device(), nullptr).is_ok());
  p.run_poisoned();
  if (HasFatalFailure()) return;
  check_against_reference(p);
}

TEST(MoeRobustness, AnExpertWithAllZeroScalesContributesZero) {
  FP4MOE_SKIP_WITHOUT_GPU();
  Problem p;
  Case c{8, 4, 256, 256, 1, Routing::kOneExpert};
  p.setup(c, devdata::fresh_seed() % 1000003);
  if (HasFatalFailure()) return;
  SCOPED_TRACE("seed " + std::to_string(p.seed));
  // Zero every block scale of expert 0 of w2 and re-init: its outputs must be exactly zero.
  ASSERT_EQ(cudaMemset(p.w2.scales.get(), 0, static_cast<size_t>(256 * 256 / 16)), cudaSuccess);
  MoeLayerOptions o;
  ASSERT_TRUE(p.layer.init(MoeShape{4, 256, 256, 1}, o, p.w13.device(), p.w2.device(), nullptr).is_ok());
  p.run_poisoned();
  if (HasFatalFailure()) return;
  const auto out = p.out.download<uint16_t>(static_cast<size_t>(8 * 256));
  ASSERT_EQ(out.size(), static_cast<size_t>(8 * 256));
  // One-expert routing with k = 1 sends every token to expert 0. (The reference's weight view still
  // describes the scales before the memset, so no reference comparison here.)
  for (int64_t t = 0; t < 8; ++t) {
    ASSERT_EQ(p.in.ids[static_cast<size_t>(t)], 0);
    for (int64_t h = 0; h < 256; ++h) ASSERT_EQ(bf16_to_float(out[static_cast<size_t>(t * 256 + h)]), 0.0f);
  }
}

}  // namespace
}  // namespace fp4moe
