// The MoE layer's weight preparation (src/moe/prepack.h): allocation and the prepack launches.
// SPDX-License-Identifier: Apache-2.0
#include "src/moe/prepack.h"

#include <string>

#include "fp4moe/scale_layout.h"
#include "kernels/moe_prepack.cuh"
#include "src/cuda/cuda_util.h"
#include "src/moe/workspace.h"

namespace fp4moe::detail {
namespace {

Status prepack(const Nvfp4ExpertWeights& w, bool global_is_multiplier, int64_t E, int64_t n, int64_t k,
               kernels::RowInterleave il, uint8_t* dw, uint8_t* ds, float* da, uint32_t* flags, cudaStream_t stream) {
  kernels::PrepackParams p{};
  p.src_packed = static_cast<const uint8_t*>(w.packed);
  p.src_scales = static_cast<const uint8_t*>(w.scales);
  p.src_global = w.global_scale;
  p.global_is_multiplier = global_is_multiplier;
  p.num_experts = E;
  p.n = n;
  p.k = k;
  p.interleave = il;
  p.dst_weights = dw;
  p.dst_scales = ds;
  p.dst_alpha = da;
  p.error_flags = flags;
  const int64_t words = E * n * k / 8, sbytes = E * n * k / 16;
  kernels::prepack_weights_kernel<<<static_cast<unsigned>(ceil_div(words, 256)), 256, 0, stream>>>(p);
  FP4MOE_CHECK_LAUNCH("prepack_weights_kernel");
  kernels::prepack_scales_kernel<<<static_cast<unsigned>(ceil_div(sbytes, 256)), 256, 0, stream>>>(p);
  FP4MOE_CHECK_LAUNCH("prepack_scales_kernel");
  kernels::prepack_alpha_kernel<<<static_cast<unsigned>(ceil_div(E, 256)), 256, 0, stream>>>(p);
  FP4MOE_CHECK_LAUNCH("prepack_alpha_kernel");
  return Status::ok();
}

Status prepare_into(const MoeShape& shape, const MoeLayerOptions& options, const Nvfp4ExpertWeights& w13,
                    const Nvfp4ExpertWeights& w2, cudaStream_t stream, PreparedWeights* pw) {
  const int64_t E = shape.num_experts, H = shape.hidden, I = shape.intermediate;
  const size_t w13_bytes = static_cast<size_t>(E * 2 * I * H / 2), s13_bytes = static_cast<size_t>(E * 2 * I * H / 16);
  const size_t w2_bytes = static_cast<size_t>(E * H * I / 2), s2_bytes = static_cast<size_t>(E * H * I / 16);
  const size_t alpha_bytes = static_cast<size_t>((E * 4 + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign);
  pw->total_bytes = w13_bytes + s13_bytes + w2_bytes + s2_bytes + 2 * alpha_bytes + kWorkspaceAlign;
  FP4MOE_CUDA_TRY(cudaMalloc(&pw->storage, pw->total_bytes));
  uint8_t* base = static_cast<uint8_t*>(pw->storage);
  pw->w13 = base;
  pw->s13 = pw->w13 + w13_bytes;
  pw->w2 = pw->s13 + s13_bytes;
  pw->s2 = pw->w2 + w2_bytes;
  pw->alpha13 = reinterpret_cast<float*>(pw->s2 + s2_bytes);
  pw->alpha2 = pw->alpha13 + alpha_bytes / 4;
  uint32_t* flags = reinterpret_cast<uint32_t*>(reinterpret_cast<uint8_t*>(pw->alpha2) + alpha_bytes);
  FP4MOE_CUDA_TRY(cudaMemsetAsync(flags, 0, 4, stream));
  const bool mult = options.global_scale_kind == GlobalScaleKind::kDequantize;
  const auto il = options.gate_up_order == GateUpOrder::kGateFirst ? kernels::RowInterleave::kGateFirst
                                                                  : kernels::RowInterleave::kUpFirst;
  FP4MOE_RETURN_IF_ERROR(prepack(w13, mult, E, 2 * I, H, il, pw->w13, pw->s13, pw->alpha13, flags, stream));
  FP4MOE_RETURN_IF_ERROR(prepack(w2, mult, E, H, I, kernels::RowInterleave::kNone, pw->w2, pw->s2, pw->alpha2, flags, stream));
  uint32_t h_flags = 0;
  FP4MOE_RETURN_IF_ERROR(detail::read_error_word(flags, stream, &h_flags));
  if (h_flags & kernels::kErrBadScale)
    return invalid_argument("a block scale is negative or NaN (UE4M3 scales must be finite and >= 0)");
  if (h_flags & kernels::kErrBadGlobalScale) return invalid_argument("a per-expert global scale is not finite and > 0");
  return Status::ok();
}

}  // namespace

Status prepare_weights(const MoeShape& shape, const MoeLayerOptions& options, const Nvfp4ExpertWeights& w13,
                       const Nvfp4ExpertWeights& w2, cudaStream_t stream, PreparedWeights* out) {
  PreparedWeights pw;
  const Status s = prepare_into(shape, options, w13, w2, stream, &pw);
  if (!s.is_ok()) {
    if (pw.storage) cudaFree(pw.storage);
    return s;
  }
  *out = pw;
  return Status::ok();
}

}  // namespace fp4moe::detail
