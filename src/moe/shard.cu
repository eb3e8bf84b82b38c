// Tensor- and expert-parallel slices of a checkpoint's NVFP4 expert weights (include/fp4moe/shard.h).
// SPDX-License-Identifier: Apache-2.0
#include "fp4moe/shard.h"

#include <cstdint>
#include <string>
#include <tuple>

#include "src/cuda/cuda_util.h"
#include "src/moe/run_plan.h"

namespace fp4moe {

Status shard_tp_weights(const MoeShape& full, int64_t tp_size, int64_t tp_rank, const Nvfp4ExpertWeights& w13,
                        const Nvfp4ExpertWeights& w2, const Nvfp4ExpertWeightsOut& w13_out,
                        const Nvfp4ExpertWeightsOut& w2_out, cudaStream_t stream) {
  if (tp_size < 1 || tp_rank < 0 || tp_rank >= tp_size)
    return invalid_argument("tp_rank must be in [0, tp_size), got rank " + std::to_string(tp_rank) + " of " +
                            std::to_string(tp_size));
  MoeShape rank_shape;
  FP4MOE_RETURN_IF_ERROR(shard_shape(full, tp_size, 1, 0, &rank_shape));
  FP4MOE_RETURN_IF_ERROR(detail::check_shape(full, MoeLayerOptions{}));  // (I/tp a multiple of 64: so is I)
  const void* in[] = {w13.packed, w13.scales, w13.global_scale, w2.packed, w2.scales, w2.global_scale};
  const void* out[] = {w13_out.packed, w13_out.scales, w13_out.global_scale, w2_out.packed, w2_out.scales,
                       w2_out.global_scale};
  for (const void* p : in)
    if (p == nullptr) return invalid_argument("shard_tp_weights: an input pointer is null");
  for (const void* p : out)
    if (p == nullptr) return invalid_argument("shard_tp_weights: an output pointer is null");
  const size_t E = static_cast<size_t>(full.num_experts), H = static_cast<size_t>(full.hidden);
  const size_t I = static_cast<size_t>(full.intermediate), Is = I / static_cast<size_t>(tp_size);
  const size_t r = static_cast<size_t>(tp_rank);
  // Everything the copies could fail on is checked before the first one is queued (a later copy's failure would
  // leave the earlier outputs written): every buffer is device memory (or managed) of the current device, and no
  // output overlaps an input or another output (the extents from the shape; check_shape bounds them to 2^40).
  int current = -1;
  FP4MOE_CUDA_TRY(cudaGetDevice(&current));
  const char* names[] = {"w13.packed", "w13.scales", "w13.global_scale", "w2.packed", "w2.scales", "w2.global_scale"};
  const size_t in_bytes[] = {E * 2 * I * H / 2, E * 2 * I * H / 16, E * 4, E * H * I / 2, E * H * I / 16, E * 4};
  const size_t out_bytes[] = {E * 2 * Is * H / 2, E * 2 * Is * H / 16, E * 4, E * H * Is / 2, E * H * Is / 16, E * 4};
  for (int side = 0; side < 2; ++side)
    for (int i = 0; i < 6; ++i) {
      const void* p = side == 0 ? in[i] : out[i];
      cudaPointerAttributes attr{};
      if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
        cudaGetLastError();  // (clears the error the query left)
        attr.type = cudaMemoryTypeUnregistered;
      }
      if ((attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged) ||
          (attr.type == cudaMemoryTypeDevice && attr.device != current))
        return invalid_argument(std::string("shard_tp_weights: ") + (side == 0 ? "" : "the output's ") + names[i] +
                                " is not device memory of the current device (" + std::to_string(current) + ")");
    }
  auto overlap = [](const void* a, size_t na, const void* b, size_t nb) {
    const auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
    return x < y + nb && y < x + na;
  };
  for (int i = 0; i < 6; ++i) {
    for (int j = 0; j < 6; ++j)
      if (overlap(out[i], out_bytes[i], in[j], in_bytes[j]))
        return invalid_argument(std::string("shard_tp_weights: the output's ") + names[i] + " overlaps the input's " +
                                names[j]);
    for (int j = 0; j < i; ++j)
      if (overlap(out[i], out_bytes[i], out[j], out_bytes[j]))
        return invalid_argument(std::string("shard_tp_weights: the output's ") + names[i] + " overlaps its " + names[j]);
  }
  auto copy2d = [&](void* dst, size_t dpitch, const void* src, size_t spitch, size_t width, size_t height) {
    return cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, cudaMemcpyDeviceToDevice, stream);
  };
  // w13: per expert, rows [r Is, (r+1) Is) of each half; a row is H/2 packed bytes and H/16 scale bytes.
  for (size_t half = 0; half < 2; ++half) {
    for (const auto& [src, dst, row] : {std::tuple<const void*, void*, size_t>{w13.packed, w13_out.packed, H / 2},
                                        std::tuple<const void*, void*, size_t>{w13.scales, w13_out.scales, H / 16}}) {
      const auto* s = static_cast<const uint8_t*>(src) + (half * I + r * Is) * row;
      auto* d = static_cast<uint8_t*>(dst) + half * Is * row;
      FP4MOE_CUDA_TRY(copy2d(d, 2 * Is * row, s, 2 * I * row, Is * row, E));
    }
  }
  // w2: every row of every expert, columns [r Is, (r+1) Is): Is/2 packed bytes and Is/16 scale bytes per row.
  FP4MOE_CUDA_TRY(copy2d(w2_out.packed, Is / 2, static_cast<const uint8_t*>(w2.packed) + r * Is / 2, I / 2, Is / 2, E * H));
  FP4MOE_CUDA_TRY(copy2d(w2_out.scales, Is / 16, static_cast<const uint8_t*>(w2.scales) + r * Is / 16, I / 16, Is / 16, E * H));
  FP4MOE_CUDA_TRY(cudaMemcpyAsync(w13_out.global_scale, w13.global_scale, E * 4, cudaMemcpyDeviceToDevice, stream));
  FP4MOE_CUDA_TRY(cudaMemcpyAsync(w2_out.global_scale, w2.global_scale, E * 4, cudaMemcpyDeviceToDevice, stream));
  return Status::ok();
}

Status expert_range(const Nvfp4ExpertWeights& w, int64_t num_experts, int64_t n, int64_t k, int64_t first,
                    int64_t count, Nvfp4ExpertWeights* out) {
  if (out == nullptr) return invalid_argument("expert_range: output is null");
  if (w.packed == nullptr || w.scales == nullptr || w.global_scale == nullptr)
    return invalid_argument("expert_range: packed, scales and global_scale must all be set");
  if (n <= 0 || k <= 0 || k % 16 != 0 || n > (int64_t{1} << 30) || k > (int64_t{1} << 30))
    return invalid_argument("expert_range: N must be positive and K a positive multiple of 16");
  // Whole experts of n x k elements each, the stack at most 2^40 elements (so every offset below is representable).
  if (num_experts < 1 || num_experts > (int64_t{1} << 20) || num_experts * n > (int64_t{1} << 40) / k)
    return invalid_argument("expert_range: num_experts must be in [1, 2^20] and num_experts x N x K at most 2^40, got " +
                            std::to_string(num_experts) + " x " + std::to_string(n) + " x " + std::to_string(k));
  if (count < 1 || first < 0 || first > num_experts - count)
    return invalid_argument("expert_range: experts [" + std::to_string(first) + ", " + std::to_string(first + count) +
                            ") are not within [0, " + std::to_string(num_experts) + ")");
  Nvfp4ExpertWeights v;
  v.packed = static_cast<const uint8_t*>(w.packed) + first * n * (k / 2);
  v.scales = static_cast<const uint8_t*>(w.scales) + first * n * (k / 16);
  v.global_scale = w.global_scale + first;
  *out = v;
  return Status::ok();
}

}  // namespace fp4moe
