// The MoE layer's workspace layout (src/moe/workspace.h).
// SPDX-License-Identifier: Apache-2.0
#include "src/moe/workspace.h"

#include <algorithm>

#include "kernels/moe_routing_layout.h"

namespace fp4moe::detail {

WorkspaceLayout workspace_layout(const MoeShape& s, FinalizeMode mode, int64_t tokens, int64_t partial_rows,
                                 int64_t gate_up_split_floats) {
  const int64_t pairs = tokens * s.top_k;
  // Chunks of at most 8 rows (the smallest block_m) per expert: bounds every config's chunk table.
  const int64_t max_chunks = (pairs + 7) / 8 + std::min(s.num_experts, pairs) + 1;
  WorkspaceLayout w{};
  int64_t o = 0;
  auto take = [&](int64_t bytes) {
    const int64_t at = o;
    o += (bytes + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign;
    return at;
  };
  w.flags = take(4);
  w.offsets = take((s.num_experts + 1) * 4);
  w.perm = take(pairs * 4);
  w.inv = take(pairs * 4);
  w.nchunks = take(4);
  w.chunk_expert = take(max_chunks * 4);
  w.chunk_start = take(max_chunks * 4);
  w.chunk_rows = take(max_chunks * 4);
  w.act = take(pairs * s.intermediate * 2);
  w.partial = take(mode == FinalizeMode::kAtomic ? tokens * s.hidden * 4
                                                 : partial_rows * s.hidden * (mode == FinalizeMode::kDeterministicBf16 ? 2 : 4));
  w.gu_counter_bytes = gate_up_split_floats > 0 ? max_chunks * (2 * s.intermediate / 64) * 4 : 0;
  w.gu_split = take(gate_up_split_floats * 4 + w.gu_counter_bytes);
  w.gu_counters = w.gu_split + gate_up_split_floats * 4;
  w.route_counts = take(kernels::routing_counts_bytes(pairs, s.num_experts));
  w.total = o;
  return w;
}

}  // namespace fp4moe::detail
