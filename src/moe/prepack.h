// The MoE layer's weights on the device: one allocation holding both GEMMs' prepacked weights, scales and alphas.
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "fp4moe/moe.h"

namespace fp4moe::detail {

struct PreparedWeights {
  void* storage = nullptr;  // owned by the caller (cudaFree); null until prepare_weights succeeds
  size_t total_bytes = 0;
  uint8_t *w13 = nullptr, *s13 = nullptr, *w2 = nullptr, *s2 = nullptr;
  float *alpha13 = nullptr, *alpha2 = nullptr;
};

// Allocates the storage on the current device and converts w13 [E, 2I, H] and w2 [E, H, I] from the checkpoint
// layout into the kernels' layout (kernels/weight_pack.h) on `stream`; synchronises once to report bad scales.
// On failure nothing stays allocated.
Status prepare_weights(const MoeShape& shape, const MoeLayerOptions& options, const Nvfp4ExpertWeights& w13,
                       const Nvfp4ExpertWeights& w2, cudaStream_t stream, PreparedWeights* out);

}  // namespace fp4moe::detail
