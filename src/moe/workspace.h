// The MoE layer's workspace layout: where a forward pass's routing tables, activations and partial sums sit.
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>

#include "fp4moe/moe.h"

namespace fp4moe::detail {

inline constexpr int64_t kWorkspaceAlign = 256;

// Byte offsets of the workspace's parts for T tokens; the deterministic finalize's fp32 buffer holds `partial`
// rows of H (pairs x K splits), the atomic one T rows.
struct WorkspaceLayout {
  int64_t flags, offsets, perm, inv, nchunks, chunk_expert, chunk_start, chunk_rows, act, partial, total;
};
WorkspaceLayout workspace_layout(const MoeShape& s, FinalizeMode mode, int64_t tokens, int64_t partial_rows);

}  // namespace fp4moe::detail
