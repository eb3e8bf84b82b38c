// The routing kernels' sizes and the GEMMs' in-block routing tables, for the kernels and the host (launch grid,
// shared memory, workspace) alike.
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>

namespace fp4moe::kernels {

// moe_routing_kernel: one block of 1024 threads; dynamic shared memory (2E + 32) int32 + 32 E uint16.
constexpr int64_t routing_smem_bytes(int64_t num_experts) { return (2 * num_experts + 32) * 4 + 32 * num_experts * 2; }

// Above this many pairs, moe_routing_count_kernel + moe_routing_place_kernel, one block per kRoutingRange pairs
// (kernels/moe_routing.cuh says why): the count kernel's shared memory and the counts they pass in the workspace.
inline constexpr int64_t kRoutingOneBlockMaxPairs = 2048;
inline constexpr int64_t kRoutingRange = 1024;  // = the kernels' block size: one placement round per block
constexpr bool routing_multi_block(int64_t num_pairs) { return num_pairs > kRoutingOneBlockMaxPairs; }
constexpr int64_t routing_blocks(int64_t num_pairs) { return (num_pairs + kRoutingRange - 1) / kRoutingRange; }
constexpr int64_t routing_count_smem_bytes(int64_t num_experts) { return (num_experts + 1) * 4; }
// Workspace of the two kernels: counts [blocks][E] int32, then one uint32 of error flags per block.
constexpr int64_t routing_counts_bytes(int64_t num_pairs, int64_t num_experts) {
  return routing_multi_block(num_pairs) ? routing_blocks(num_pairs) * (num_experts + 1) * 4 : 0;
}

// The routing of at most kBlockRoutingMaxPairs pairs that the decode tiles' GEMM kernels compute themselves
// (kernels/moe_routing_warp.cuh, block_routing), in their shared memory after the stages (MoeGemmSmemLayout::
// routing_offset): the permutation and the chunk table, read by every thread of the block.
inline constexpr int kBlockRoutingMaxPairs = 64;
struct BlockRoutingTables {
  int32_t perm[kBlockRoutingMaxPairs];          // pair index at permuted row r (rows sorted by (expert, pair index))
  float weight[kBlockRoutingMaxPairs];          // that pair's router weight
  int32_t chunk_expert[kBlockRoutingMaxPairs];  // chunk c: local expert, first row, rows (1..block_m)
  int32_t chunk_start[kBlockRoutingMaxPairs];
  int32_t chunk_rows[kBlockRoutingMaxPairs];
  int32_t row_expert[kBlockRoutingMaxPairs];    // local expert of row r (gate_up's block 0: the expert offsets)
  int32_t num_chunks, num_valid;                // chunks; rows (the pairs on this layer's experts)
  int32_t pad[2];                               // (a multiple of 16 bytes)
};
static_assert(sizeof(BlockRoutingTables) % 16 == 0, "the tables are a 16-byte multiple: what follows stays aligned");

}  // namespace fp4moe::kernels
