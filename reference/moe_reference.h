// CPU reference of the NVFP4 MoE layer: exact NVFP4 decode, fp64 accumulation, bf16 rounding only where
// the layer itself rounds (the SwiGLU output and the layer output).
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

namespace fp4moe::reference {

// Expert weights in the checkpoint layout, read through callbacks so that huge tensors can be generated
// on demand: row_bytes(e, row, packed, scales) fills one row's k/2 packed bytes and k/16 UE4M3 scales.
struct ExpertWeightsView {
  int64_t num_experts = 0, rows = 0, k = 0;
  std::function<void(int64_t e, int64_t row, uint8_t* packed, uint8_t* scales)> row_bytes;
  std::function<double(int64_t e)> global_scale;  // x = e2m1 * scale / global_scale
};

// Decodes row `row` of expert e into w[k] = e2m1 * scale (exact in float); returns 1 / global_scale.
double decode_row(const ExpertWeightsView& w, int64_t e, int64_t row, float* out);

// Each expert decoded once, on first use (thread-safe), then shared by every (token, slot) pair routed to it.
class DecodedExperts {
 public:
  explicit DecodedExperts(const ExpertWeightsView& w);
  const float* row(int64_t e, int64_t r) const;  // [k] values e2m1 * scale
  double inv_global(int64_t e) const;            // 1 / global_scale

 private:
  void ensure(int64_t e) const;
  const ExpertWeightsView& w_;
  mutable std::vector<std::vector<float>> data_;
  mutable std::vector<double> inv_;
  mutable std::vector<std::once_flag> once_;
};

struct MoeReferenceInput {
  int64_t num_tokens = 0, hidden = 0, intermediate = 0, top_k = 0, num_experts = 0;
  bool gate_first = true;                // w13 = [gate; up] (else [up; gate])
  const uint16_t* hidden_bf16 = nullptr;  // [T, H]
  const int32_t* topk_ids = nullptr;      // [T, k]
  const float* topk_weights = nullptr;    // [T, k]
  const DecodedExperts* w13 = nullptr;  // [E, 2I, H]
  const DecodedExperts* w2 = nullptr;   // [E, H, I]
  // The layer rounds each (token, slot) term of the output to bf16 before its fp32 sum
  // (FinalizeMode::kDeterministicBf16), each of its down_k_splits K ranges separately: reference_down's tolerance
  // then adds 2^-8 x the sum of those rounded values' magnitudes.
  bool bf16_partials = false;
  int down_k_splits = 1;
};

// Per (token, slot) pair: the SwiGLU output before rounding and its error budget for an fp32 GPU path.
struct PairActivation {
  std::vector<double> act;      // [I] silu(gate) * up, exact
  std::vector<double> act_tol;  // [I] tolerance of a bf16 result computed with fp32 accumulation over H
};

// gate_up + SwiGLU for one pair (t, s); skipped (empty) when the id is out of range.
PairActivation reference_gate_up(const MoeReferenceInput& in, int64_t t, int64_t s);

// Layer output [T, H] (exact) from given SwiGLU outputs act_bf16[pair] (bf16 bits, [I] each; pass the
// reference's own rounded values or the GPU's), with the element-wise tolerance of an fp32-accumulating
// GPU path whose result is rounded to bf16: 2^-8 |out| + (I + k) 2^-23 * sum |products| (+ 2^-8 * sum |terms|
// with bf16_partials: each term's own rounding).
struct LayerOutput {
  std::vector<double> out, tol;
};
LayerOutput reference_down(const MoeReferenceInput& in, const std::vector<std::vector<uint16_t>>& act_bf16);

}  // namespace fp4moe::reference
