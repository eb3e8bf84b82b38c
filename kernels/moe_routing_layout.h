// The routing kernels' sizes, for the kernels and the host (launch grid, shared memory, workspace) alike.
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

}  // namespace fp4moe::kernels
