// The MoE layer's workspace layout: where a forward pass's routing tables, activations and partial sums sit.
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>

#include "fp4moe/moe.h"

namespace fp4moe::detail {

inline constexpr int64_t kWorkspaceAlign = 256;

// Byte offsets of the workspace's parts for T tokens; the deterministic finalize's buffer holds `partial` rows of
// H (pairs x K splits) of fp32 (kDeterministic) or bf16 (kDeterministicBf16), the atomic one T rows of fp32.
// gate_up's split-K buffer (gu_split, when gate_up_split_floats > 0) holds that many fp32 partial sums and, right
// after them (where the kernels find them: kernels/moe_gemm_epilogue.cuh), the int32 arrival counters at gu_counters,
// gu_counter_bytes of them (one per chunk and N tile of 64 or more rows), which each call zeroes.
struct WorkspaceLayout {
  int64_t flags, offsets, perm, inv, nchunks, chunk_expert, chunk_start, chunk_rows, act, partial, gu_split,
      route_counts, total;  // route_counts: the multi-block routing's counts and flags (kernels/moe_routing_layout.h)
  int64_t gu_counters, gu_counter_bytes;
};
WorkspaceLayout workspace_layout(const MoeShape& s, FinalizeMode mode, int64_t tokens, int64_t partial_rows,
                                 int64_t gate_up_split_floats = 0);

}  // namespace fp4moe::detail
