// Slicing a checkpoint's NVFP4 expert weights for one tensor-parallel or expert-parallel rank (ModelOpt layout).
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "fp4moe/moe.h"
#include "fp4moe/status.h"

namespace fp4moe {

// Device buffers a slice is written to, in the checkpoint layout (as Nvfp4ExpertWeights, writable).
struct Nvfp4ExpertWeightsOut {
  void* packed = nullptr;        // uint8 [E, N, K/2]
  void* scales = nullptr;        // UE4M3 [E, N, K/16]
  float* global_scale = nullptr;  // fp32 [E]
};

// The layer one rank runs under tp_size-way tensor and ep_size-way expert parallelism (1: none): I / tp_size of every
// expert, and of those experts [ep_rank E / ep_size, (ep_rank + 1) E / ep_size) of E (global ids kept). kUnsupported
// where I / tp_size is not a whole multiple of 64 (the kernels' smallest K tile), kInvalidArgument where E does not
// split into ep_size or a size or rank is out of range. The one rule shard_tp_weights, the CLI and the benches use.
Status shard_shape(const MoeShape& full, int64_t tp_size, int64_t ep_size, int64_t ep_rank, MoeShape* out);

// Tensor parallelism: rank `tp_rank` of `tp_size` holds intermediate columns [r I/tp, (r+1) I/tp) of every expert.
// Its w13 [E, 2I/tp, H] is the slice of each half of [E, 2I, H] (gate and up alike, whichever comes first: the
// order is kept), its w2 [E, H, I/tp] the columns of [E, H, I]; block scales follow their weights, global scales
// are copied. I/tp must be a multiple of 64 (the kernels' smallest K tile; 16 for the scales). The layer of the
// rank is then MoeShape{E, H, I/tp, k}; the ranks' outputs sum to the full layer's. Device-to-device copies on
// `stream`; nothing is written when the arguments are rejected.
Status shard_tp_weights(const MoeShape& full, int64_t tp_size, int64_t tp_rank, const Nvfp4ExpertWeights& w13,
                        const Nvfp4ExpertWeights& w2, const Nvfp4ExpertWeightsOut& w13_out,
                        const Nvfp4ExpertWeightsOut& w2_out, cudaStream_t stream);

// Expert parallelism: experts [first, first + count) of weights [E, N, K] are contiguous, so a rank's weights are
// views into the full tensors (no copy). The layer of the rank is MoeShape{count, H, I, k, E, first}.
Status expert_range(const Nvfp4ExpertWeights& w, int64_t num_experts, int64_t n, int64_t k, int64_t first,
                    int64_t count, Nvfp4ExpertWeights* out);

}  // namespace fp4moe
