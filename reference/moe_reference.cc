// CPU reference of the NVFP4 MoE layer (see moe_reference.h).
// SPDX-License-Identifier: Apache-2.0
#include "moe_reference.h"

#include <cmath>

#include "fp4moe/bf16.h"
#include "fp4moe/nvfp4.h"

namespace fp4moe::reference {

double decode_row(const ExpertWeightsView& w, int64_t e, int64_t row, float* out) {
  std::vector<uint8_t> packed(static_cast<size_t>(w.k / 2)), scales(static_cast<size_t>(w.k / 16));
  w.row_bytes(e, row, packed.data(), scales.data());
  for (int64_t b = 0; b < w.k / 16; ++b) {
    const float sf = e4m3_to_float(scales[static_cast<size_t>(b)]);
    for (int64_t j = 0; j < 8; ++j) {
      const uint8_t byte = packed[static_cast<size_t>(b * 8 + j)];
      out[b * 16 + 2 * j] = e2m1_to_float(byte & 0xF) * sf;
      out[b * 16 + 2 * j + 1] = e2m1_to_float(byte >> 4) * sf;
    }
  }
  return 1.0 / w.global_scale(e);
}

DecodedExperts::DecodedExperts(const ExpertWeightsView& w)
    : w_(w), data_(static_cast<size_t>(w.num_experts)), inv_(static_cast<size_t>(w.num_experts)),
      once_(static_cast<size_t>(w.num_experts)) {}

void DecodedExperts::ensure(int64_t e) const {
  std::call_once(once_[static_cast<size_t>(e)], [&] {
    auto& d = data_[static_cast<size_t>(e)];
    d.resize(static_cast<size_t>(w_.rows * w_.k));
    double inv = 0;
    for (int64_t r = 0; r < w_.rows; ++r) inv = decode_row(w_, e, r, d.data() + r * w_.k);
    inv_[static_cast<size_t>(e)] = inv;
  });
}

const float* DecodedExperts::row(int64_t e, int64_t r) const {
  ensure(e);
  return data_[static_cast<size_t>(e)].data() + r * w_.k;
}

double DecodedExperts::inv_global(int64_t e) const {
  ensure(e);
  return inv_[static_cast<size_t>(e)];
}

namespace {

// Exact fp64 dot product of a decoded weight row with an activation vector, and the sum of the terms'
// magnitudes (what the fp32 accumulation error of the kernels is bounded by).
struct Dot {
  double sum = 0, abs = 0;
};
Dot dot(const float* w, const double* x, int64_t n) {
  Dot d;
  for (int64_t i = 0; i < n; ++i) {
    const double p = static_cast<double>(w[i]) * x[i];
    d.sum += p;
    d.abs += std::fabs(p);
  }
  return d;
}

}  // namespace

PairActivation reference_gate_up(const MoeReferenceInput& in, int64_t t, int64_t s) {
  PairActivation r;
  const int32_t e = in.topk_ids[t * in.top_k + s];
  if (e < 0 || e >= in.num_experts) return r;
  const int64_t H = in.hidden, I = in.intermediate;
  std::vector<double> x(static_cast<size_t>(H));
  for (int64_t h = 0; h < H; ++h) x[static_cast<size_t>(h)] = bf16_to_float(in.hidden_bf16[t * H + h]);
  r.act.resize(static_cast<size_t>(I));
  r.act_tol.resize(static_cast<size_t>(I));
  const double eps32 = std::ldexp(1.0, -23) * static_cast<double>(H);  // fp32 accumulation over H terms
  for (int64_t j = 0; j < I; ++j) {
    double v[2], a[2];
    for (int half = 0; half < 2; ++half) {  // 0 gate, 1 up
      const bool gate = half == 0;
      const int64_t row = (gate == in.gate_first) ? j : I + j;
      const double inv = in.w13->inv_global(e);
      const Dot d = dot(in.w13->row(e, row), x.data(), H);
      v[half] = d.sum * inv;
      a[half] = d.abs * inv;
    }
    const double g = v[0], u = v[1];
    const double sig = 1.0 / (1.0 + std::exp(-g));
    const double silu = g * sig;
    const double act = (silu == 0.0 || u == 0.0) ? std::copysign(0.0, silu) * std::copysign(1.0, u) : silu * u;
    // d(silu)/dg = sig * (1 + g * (1 - sig)), bounded by 1.1 in magnitude.
    const double err = 1.1 * std::fabs(u) * eps32 * a[0] + std::fabs(silu) * eps32 * a[1];
    r.act[static_cast<size_t>(j)] = act;
    r.act_tol[static_cast<size_t>(j)] = std::ldexp(std::fabs(act), -8) + std::ldexp(std::fabs(act), -20) + err * 1.01;
  }
  return r;
}

LayerOutput reference_down(const MoeReferenceInput& in, const std::vector<std::vector<uint16_t>>& act_bf16) {
  const int64_t T = in.num_tokens, H = in.hidden, I = in.intermediate, K = in.top_k;
  LayerOutput o;
  o.out.assign(static_cast<size_t>(T * H), 0.0);
  std::vector<double> abs(static_cast<size_t>(T * H), 0.0);
  std::vector<double> terms_abs(in.bf16_partials ? static_cast<size_t>(T * H) : 0, 0.0);
  std::vector<double> a64(static_cast<size_t>(I));
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t s = 0; s < K; ++s) {
      const int64_t pair = t * K + s;
      const int32_t e = in.topk_ids[pair];
      const float rw = in.topk_weights[pair];
      if (e < 0 || e >= in.num_experts || !std::isfinite(rw)) continue;
      const auto& a = act_bf16[static_cast<size_t>(pair)];
      for (int64_t j = 0; j < I; ++j) a64[static_cast<size_t>(j)] = bf16_to_float(a[static_cast<size_t>(j)]);
      const double inv = in.w2->inv_global(e);
      for (int64_t h = 0; h < H; ++h) {
        const Dot d = dot(in.w2->row(e, h), a64.data(), I);
        o.out[static_cast<size_t>(t * H + h)] += rw * d.sum * inv;
        abs[static_cast<size_t>(t * H + h)] += std::fabs(rw) * d.abs * inv;
        if (in.bf16_partials) {  // each K range's partial is one rounded value
          const int64_t n = I / in.down_k_splits;
          for (int64_t q = 0; q < in.down_k_splits; ++q)
            terms_abs[static_cast<size_t>(t * H + h)] +=
                std::fabs(rw * dot(in.w2->row(e, h) + q * n, a64.data() + q * n, n).sum * inv);
        }
      }
    }
  }
  o.tol.resize(o.out.size());
  const double eps = std::ldexp(1.0, -23) * static_cast<double>(I + K);
  for (size_t i = 0; i < o.out.size(); ++i) {
    o.tol[i] = std::ldexp(std::fabs(o.out[i]), -8) + eps * abs[i] * 1.01 + 1e-30;
    if (in.bf16_partials) o.tol[i] += std::ldexp(terms_abs[i], -8) * 1.01;
  }
  return o;
}

}  // namespace fp4moe::reference
