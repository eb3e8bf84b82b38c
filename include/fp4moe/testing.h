// Hooks for benchmarks and tests: run parts of a forward pass, and look at its intermediate results.
// SPDX-License-Identifier: Apache-2.0
//
// Not for serving: these expose the layer's workspace layout and phase order, which may change between versions.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "fp4moe/moe.h"

namespace fp4moe::testing {

// Which parts of a forward pass to enqueue. Running gate_up or down alone reuses the routing tables and
// activations an earlier call with the same arguments left in the same workspace.
enum MoePhase : unsigned { kPhaseRouting = 1, kPhaseGateUp = 2, kPhaseDown = 4, kPhaseAll = 7 };

// MoeLayer::run limited to `phases` (kPhaseAll is run()).
Status run_phases(const MoeLayer& layer, const MoeForwardArgs& args, void* workspace, size_t workspace_bytes,
                  cudaStream_t stream, unsigned phases);

// Where a run's intermediate results sit inside its workspace (device pointers).
struct MoeWorkspaceView {
  const int32_t* expert_offsets = nullptr;  // [E + 1] permuted rows of expert e: [offsets[e], offsets[e+1])
  const int32_t* perm_pair = nullptr;       // [T * k] pair index (t * k + s) of each permuted row
  const int32_t* inv_perm = nullptr;        // [T * k] permuted row of each pair, -1 if the pair was skipped
  const void* act = nullptr;                // bf16 [T * k, I] SwiGLU output in permuted row order
  // gate_up's split-K partial sums (its K splits, or its tail kernel's K pieces) under the layer's own plan for T
  // tokens (nothing forced); gate_up_partial_floats 0 where that plan has none.
  const float* gate_up_partials = nullptr;
  int64_t gate_up_partial_floats = 0;
};
MoeWorkspaceView workspace_view(const MoeLayer& layer, const void* workspace, int64_t num_tokens);

}  // namespace fp4moe::testing
