// Instantiates the grouped-GEMM kernels of every catalogue config (kernels/moe_gemm_catalogue.h) on each arch.
// SPDX-License-Identifier: Apache-2.0
#include "src/moe/kernel_registry.h"

#include <iterator>
#include <utility>

#include "kernels/moe_cluster_decode_sm90.cuh"
#include "kernels/moe_gemm_multistage.cuh"
#include "kernels/moe_gemm_warpspecialized_sm90.cuh"

namespace fp4moe::detail {
namespace {

using kernels::MoeEpilogue;

template <size_t I, int Arch>
MoeKernelSet make_set() {
  constexpr catalogue::ShippedTile t = catalogue::kTiles[I];
  constexpr catalogue::ShippedConfig c = catalogue::config_on(I, Arch);
  MoeKernelSet s{c, I};
  if constexpr (t.family == KernelFamily::kWarpSpecialized) {
    using C = MoeGemmWsConfig<t.block_m, t.block_n, t.block_k, c.stages>;
    static_assert(C::kSmemBytes == c.smem_bytes && C::kThreads == c.threads, "catalogue and kernel config disagree");
    s.gate_up = kernels::moe_gemm_ws_kernel<C, MoeEpilogue::kSwiGLU>;
    s.down_store = kernels::moe_gemm_ws_kernel<C, MoeEpilogue::kFinalizeStore>;
    s.down_store_bf16 = kernels::moe_gemm_ws_kernel<C, MoeEpilogue::kFinalizeStoreBf16>;
    s.down_atomic = kernels::moe_gemm_ws_kernel<C, MoeEpilogue::kFinalizeAtomic>;
  } else {
    using C = MoeGemmConfig<t.block_m, t.block_n, t.block_k, c.stages, Arch, t.target_blocks>;
    static_assert(C::kSmemBytes == c.smem_bytes && C::kThreads == c.threads && C::kMinBlocksPerSm == c.blocks_per_sm,
                  "catalogue and kernel config disagree");
    s.gate_up = kernels::moe_gemm_kernel<C, MoeEpilogue::kSwiGLU>;
    s.down_store = kernels::moe_gemm_kernel<C, MoeEpilogue::kFinalizeStore>;
    s.down_store_bf16 = kernels::moe_gemm_kernel<C, MoeEpilogue::kFinalizeStoreBf16>;
    s.down_atomic = kernels::moe_gemm_kernel<C, MoeEpilogue::kFinalizeAtomic>;
    static_assert(t.fused_routing() == C::kRoutesPairs, "the kernels that route pairs need the layout's tables");
    if constexpr (t.fused_routing()) {
      s.gate_up_fused = kernels::moe_gemm_kernel<C, MoeEpilogue::kSwiGLU, true>;
      s.down_store_fused = kernels::moe_gemm_kernel<C, MoeEpilogue::kFinalizeStore, true>;
      s.down_store_bf16_fused = kernels::moe_gemm_kernel<C, MoeEpilogue::kFinalizeStoreBf16, true>;
      s.down_atomic_fused = kernels::moe_gemm_kernel<C, MoeEpilogue::kFinalizeAtomic, true>;
    }
    if constexpr (t.cluster_decode && Arch == 90) {
      static_assert(C::kRoutesPairs && !C::kWgmma, "the cluster decode kernel: a decode tile on mma.sync");
      s.cluster_decode = kernels::moe_cluster_decode_kernel<C>;
    }
    if constexpr (catalogue::builds_gate_up_tail(t, Arch))
      s.gate_up_tail = kernels::moe_gemm_kernel<C, MoeEpilogue::kSwiGLU, false, true, true>;
    if constexpr (t.split_k) {
      s.gate_up_split = kernels::moe_gemm_kernel<C, MoeEpilogue::kSwiGLU, false, true>;
      s.gate_up_split_fused = kernels::moe_gemm_kernel<C, MoeEpilogue::kSwiGLU, true, true>;
    }
  }
  return s;
}

template <int Arch, size_t... I>
void add_sets(std::vector<MoeKernelSet>* v, std::index_sequence<I...>) {
  // Only the tiles the catalogue has on Arch are instantiated (a warp-specialized tile on sm_120 is not).
  auto add = [&](auto index) {
    constexpr size_t i = decltype(index)::value;
    if constexpr (catalogue::tile_on(i, Arch)) v->push_back(make_set<i, Arch>());
  };
  (add(std::integral_constant<size_t, I>{}), ...);
}

template <size_t... A>
void add_archs(std::vector<MoeKernelSet>* v, std::index_sequence<A...>) {
  (add_sets<catalogue::kKernelArchs[A]>(v, std::make_index_sequence<catalogue::kNumTiles>{}), ...);
}

}  // namespace

const std::vector<MoeKernelSet>& moe_kernel_sets() {
  static const std::vector<MoeKernelSet> sets = [] {
    std::vector<MoeKernelSet> v;
    add_archs(&v, std::make_index_sequence<std::size(catalogue::kKernelArchs)>{});
    return v;
  }();
  return sets;
}

}  // namespace fp4moe::detail
