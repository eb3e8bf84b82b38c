// Unit tests of the CPU MoE reference itself, against an independent path through the NVFP4 codec.
// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "fp4moe/bf16.h"
#include "fp4moe/nvfp4.h"
#include "moe_reference.h"
#include "random_data.h"

namespace fp4moe {
namespace {

// Experts as quantized matrices (linear scales), viewed through the reference's row callback.
struct Experts {
  std::vector<Nvfp4Matrix> m;
  reference::ExpertWeightsView view() const {
    reference::ExpertWeightsView v;
    v.num_experts = static_cast<int64_t>(m.size());
    v.rows = m[0].rows;
    v.k = m[0].k;
    v.row_bytes = [this](int64_t e, int64_t row, uint8_t* packed, uint8_t* scales) {
      const Nvfp4Matrix& x = m[static_cast<size_t>(e)];
      for (int64_t b = 0; b < x.k / 2; ++b) packed[b] = x.packed[static_cast<size_t>(row * x.k / 2 + b)];
      for (int64_t b = 0; b < x.k / 16; ++b) scales[b] = x.scale(row, b);
    };
    v.global_scale = [this](int64_t e) { return static_cast<double>(m[static_cast<size_t>(e)].global_scale); };
    return v;
  }
};

Experts make_experts(int64_t E, int64_t rows, int64_t k, uint64_t seed) {
  Experts x;
  for (int64_t e = 0; e < E; ++e) {
    const auto bits = devdata::random_bf16_matrix(rows, k, seed + static_cast<uint64_t>(e), 2);
    Nvfp4Matrix q;
    EXPECT_TRUE(quantize_nvfp4_bf16(bits.data(), rows, k, std::nullopt, ScaleLayout::kLinear, &q).is_ok());
    x.m.push_back(std::move(q));
  }
  return x;
}

// The reference's input over these buffers (kept alive by the caller): T tokens of H, E experts, top-K.
reference::MoeReferenceInput reference_input(int64_t T, int64_t H, int64_t I, int64_t K, int64_t E,
                                             const std::vector<uint16_t>& hid, const std::vector<int32_t>& ids,
                                             const std::vector<float>& wts, const reference::DecodedExperts& d13,
                                             const reference::DecodedExperts& d2, bool gate_first = true) {
  reference::MoeReferenceInput in;
  in.num_tokens = T, in.hidden = H, in.intermediate = I, in.top_k = K, in.num_experts = E;
  in.gate_first = gate_first;
  in.hidden_bf16 = hid.data();
  in.topk_ids = ids.data();
  in.topk_weights = wts.data();
  in.w13 = &d13;
  in.w2 = &d2;
  return in;
}

TEST(MoeReference, DecodeMatchesTheCodec) {
  const Experts x = make_experts(3, 32, 64, devdata::fresh_seed());
  const auto v = x.view();
  const reference::DecodedExperts d(v);
  for (int64_t e = 0; e < 3; ++e) {
    std::vector<float> deq;
    ASSERT_TRUE(dequantize_nvfp4(x.m[static_cast<size_t>(e)], &deq).is_ok());
    for (int64_t r = 0; r < 32; ++r)
      for (int64_t c = 0; c < 64; ++c) {
        // decode gives e2m1 * scale; the codec multiplies by 1/gs in fp32 afterwards.
        const double got = static_cast<double>(d.row(e, r)[c]) * d.inv_global(e);
        ASSERT_NEAR(got, deq[static_cast<size_t>(r * 64 + c)], 1e-6 * std::fabs(got) + 1e-30) << e << " " << r << " " << c;
      }
  }
}

TEST(MoeReference, LayerMatchesADirectComputation) {
  const uint64_t seed = devdata::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const int64_t E = 4, H = 32, I = 16, K = 2, T = 3;
  for (bool gate_first : {true, false}) {
    const Experts w13 = make_experts(E, 2 * I, H, seed), w2 = make_experts(E, H, I, seed + 100);
    const auto v13 = w13.view(), v2 = w2.view();
    const reference::DecodedExperts d13(v13), d2(v2);
    const auto hid = devdata::random_bf16_matrix(T, H, seed + 7, 1);
    const std::vector<int32_t> ids = {0, 3, 2, 1, 3, 0};
    const std::vector<float> wts = {0.7f, 0.3f, 0.5f, 0.5f, 0.9f, 0.1f};
    const reference::MoeReferenceInput in = reference_input(T, H, I, K, E, hid, ids, wts, d13, d2, gate_first);
    std::vector<std::vector<uint16_t>> act(static_cast<size_t>(T * K));
    // The direct path goes through the codec's fp32 dequantization (one rounding per weight), so it agrees
    // to about 2^-23 of the sum of |terms|, which is what the comparisons allow.
    std::vector<double> want(static_cast<size_t>(T * H), 0.0), want_abs(static_cast<size_t>(T * H), 0.0);
    // With bf16 partials, the sum of the rounded values' magnitudes: whole terms, and the two K halves apart.
    std::vector<double> terms1(static_cast<size_t>(T * H), 0.0), terms2(static_cast<size_t>(T * H), 0.0);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t s = 0; s < K; ++s) {
        const int32_t e = ids[static_cast<size_t>(t * K + s)];
        std::vector<float> g13, g2;
        ASSERT_TRUE(dequantize_nvfp4(w13.m[static_cast<size_t>(e)], &g13).is_ok());
        ASSERT_TRUE(dequantize_nvfp4(w2.m[static_cast<size_t>(e)], &g2).is_ok());
        const auto r = reference::reference_gate_up(in, t, s);
        ASSERT_EQ(static_cast<int64_t>(r.act.size()), I);
        auto& a = act[static_cast<size_t>(t * K + s)];
        for (int64_t j = 0; j < I; ++j) {
          double gate = 0, up = 0, gabs = 0, uabs = 0;
          for (int64_t h = 0; h < H; ++h) {
            const double x = bf16_to_float(hid[static_cast<size_t>(t * H + h)]);
            const double wg = g13[static_cast<size_t>((gate_first ? j : I + j) * H + h)];
            const double wu = g13[static_cast<size_t>((gate_first ? I + j : j) * H + h)];
            gate += x * wg;
            up += x * wu;
            gabs += std::fabs(x * wg);
            uabs += std::fabs(x * wu);
          }
          const double direct = gate / (1.0 + std::exp(-gate)) * up;
          const double allow = 1e-6 * (1.1 * std::fabs(up) * gabs + std::fabs(gate) * uabs) + 1e-12;
          EXPECT_NEAR(r.act[static_cast<size_t>(j)], direct, allow) << t << " " << s << " " << j;
          a.push_back(float_to_bf16(static_cast<float>(r.act[static_cast<size_t>(j)])));
        }
        for (int64_t h = 0; h < H; ++h) {
          double y = 0, yabs = 0, half[2] = {0, 0};
          for (int64_t j = 0; j < I; ++j) {
            const double term = g2[static_cast<size_t>(h * I + j)] * bf16_to_float(a[static_cast<size_t>(j)]);
            y += term;
            yabs += std::fabs(term);
            half[j < I / 2 ? 0 : 1] += term;
          }
          const double rw = wts[static_cast<size_t>(t * K + s)];
          want[static_cast<size_t>(t * H + h)] += rw * y;
          want_abs[static_cast<size_t>(t * H + h)] += std::fabs(rw) * yabs;
          terms1[static_cast<size_t>(t * H + h)] += std::fabs(rw * y);
          terms2[static_cast<size_t>(t * H + h)] += std::fabs(rw * half[0]) + std::fabs(rw * half[1]);
        }
      }
    const auto out = reference::reference_down(in, act);
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_NEAR(out.out[i], want[i], 1e-6 * want_abs[i] + 1e-12) << i;
      // tol = 2^-8 |out| + (I + k) 2^-23 sum |terms| (the GPU's fp32 accumulation and bf16 output rounding).
      const double expect_tol = std::ldexp(std::fabs(out.out[i]), -8) + std::ldexp(1.0, -23) * (I + K) * want_abs[i];
      EXPECT_NEAR(out.tol[i], expect_tol, 0.02 * expect_tol + 1e-12) << i;
    }
    // bf16 partials (FinalizeMode::kDeterministicBf16): the same output, the tolerance plus 2^-8 of the rounded
    // values, per K split when the down GEMM splits its K.
    for (int splits : {1, 2}) {
      reference::MoeReferenceInput b = in;
      b.bf16_partials = true;
      b.down_k_splits = splits;
      const auto ob = reference::reference_down(b, act);
      const std::vector<double>& terms = splits == 1 ? terms1 : terms2;
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ(ob.out[i], out.out[i]) << i;
        const double extra = std::ldexp(terms[i], -8);
        EXPECT_NEAR(ob.tol[i] - out.tol[i], extra, 0.02 * extra + 1e-12) << "splits " << splits << " " << i;
      }
    }
  }
}

// The down tolerance covers what a GPU path computes, derived here independently of the formula: each pair's row
// dot product accumulated in fp32 (bf16 x bf16 products are exact in fp32; the sums round), in K order and in
// reverse, scaled by 1 / global_scale and the router weight in fp32, the slots summed in fp32 and the result rounded
// to bf16. Every element of both simulations must lie within the reference's tolerance of its exact output, and the
// tolerance must not be loose beyond reason (under 2^-6 |out| + 2^-12 sum |terms| on every element).
TEST(MoeReference, DownToleranceCoversFp32AccumulationRoundedToBf16) {
  const uint64_t seed = devdata::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const int64_t E = 4, H = 64, I = 512, K = 3, T = 6;
  const Experts w13 = make_experts(E, 2 * I, H, seed), w2 = make_experts(E, H, I, seed + 100);
  const auto v13 = w13.view(), v2 = w2.view();
  const reference::DecodedExperts d13(v13), d2(v2);
  const auto hid = devdata::random_bf16_matrix(T, H, seed + 7, 1);
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::vector<int32_t> ids(static_cast<size_t>(T * K));
  std::vector<float> wts(static_cast<size_t>(T * K));
  for (size_t i = 0; i < ids.size(); ++i) {
    ids[i] = static_cast<int32_t>(rng() % E);
    wts[i] = 0.05f + static_cast<float>(rng() % 1000) / 1000.0f;
  }
  const reference::MoeReferenceInput in = reference_input(T, H, I, K, E, hid, ids, wts, d13, d2);
  // SwiGLU rows as bf16 with random signs scaled up (so that the sums cancel and round as a real layer's do).
  std::vector<std::vector<uint16_t>> act(static_cast<size_t>(T * K));
  for (auto& a : act) {
    a.resize(static_cast<size_t>(I));
    for (auto& v : a) v = float_to_bf16(static_cast<float>((static_cast<int>(rng() % 2001) - 1000) * 0.37));
  }
  const reference::LayerOutput ref = reference::reference_down(in, act);
  for (bool reverse : {false, true}) {
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h) {
        float out = 0.0f;
        double terms = 0.0;
        for (int64_t s = 0; s < K; ++s) {
          const int32_t e = ids[static_cast<size_t>(t * K + s)];
          const float* w = d2.row(e, h);
          const auto& a = act[static_cast<size_t>(t * K + s)];
          float acc = 0.0f;
          for (int64_t jj = 0; jj < I; ++jj) {
            const int64_t j = reverse ? I - 1 - jj : jj;
            acc += w[j] * bf16_to_float(a[static_cast<size_t>(j)]);  // (exact product, rounded sum)
            terms += std::fabs(static_cast<double>(w[j]) * bf16_to_float(a[static_cast<size_t>(j)]) *
                               d2.inv_global(e) * wts[static_cast<size_t>(t * K + s)]);
          }
          out += static_cast<float>(d2.inv_global(e)) * wts[static_cast<size_t>(t * K + s)] * acc;
        }
        const size_t i = static_cast<size_t>(t * H + h);
        const double got = bf16_to_float(float_to_bf16(out));
        ASSERT_LE(std::fabs(got - ref.out[i]), ref.tol[i])
            << "t " << t << " h " << h << (reverse ? " (reverse K)" : "") << ": " << got << " against " << ref.out[i];
        ASSERT_LE(ref.tol[i], std::ldexp(std::fabs(ref.out[i]), -6) + std::ldexp(terms, -12)) << "a loose tolerance";
      }
  }
}

TEST(MoeReference, SkipsOutOfRangeIdsAndNonFiniteWeights) {
  const Experts w13 = make_experts(2, 32, 32, 5), w2 = make_experts(2, 32, 16, 6);
  const auto v13 = w13.view(), v2 = w2.view();
  const reference::DecodedExperts d13(v13), d2(v2);
  const auto hid = devdata::random_bf16_matrix(1, 32, 9, 1);
  const std::vector<int32_t> ids = {5, 1};
  const std::vector<float> wts = {1.0f, NAN};
  const reference::MoeReferenceInput in = reference_input(1, 32, 16, 2, 2, hid, ids, wts, d13, d2);
  EXPECT_TRUE(reference::reference_gate_up(in, 0, 0).act.empty()) << "id 5 of 2 experts is skipped";
  std::vector<std::vector<uint16_t>> act(2, std::vector<uint16_t>(16, float_to_bf16(1.0f)));
  const auto out = reference::reference_down(in, act);
  for (double v : out.out) EXPECT_EQ(v, 0.0) << "both pairs skipped: nothing added";
}

}  // namespace
}  // namespace fp4moe
