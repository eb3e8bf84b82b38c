// probe_builders.cu -- ground truth for CUTLASS's collective-builder stage counts (sm_90 dense TMA
// warp-specialized, sm_100 and sm_120 block-scaled NVFP4), read from the real builder templates.
//
// Host-only like probe_sm120.cu: builder class templates are instantiated so that their static
// members can be read; no kernel is instantiated or launched and no GPU is needed. Works with the
// CUTLASS shipped in flashinfer-python 0.6.3 (4.2.1) and 0.7.4 (4.5.0); run_truth.sh builds it
// with the same flags as probe_sm120.cu.
//
// For every builder configuration it prints one machine-readable line
//   TRUTH kind=<sm90|blockscaled> cutlass=X.Y.Z key=value ...
// with the builder's own capacity and stage count, and the stage count the builder's stage-count
// function returns for several epilogue carve-outs (stages_at_<carveout>=N), so that the fp4moe
// model (src/cutlass_model.cc) can be compared against every term, not just one data point.
// SPDX-License-Identifier: Apache-2.0

#if !defined(__CUDA_ARCH__)

#include <cstdio>
#include <type_traits>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/version.h"

namespace probe {

// Members that only some CUTLASS versions have; -1 when absent.
#define PROBE_OPTIONAL_MEMBER(NAME)                                                        \
  template <class B, class = void>                                                         \
  struct opt_##NAME {                                                                      \
    static constexpr long value = -1;                                                      \
  };                                                                                       \
  template <class B>                                                                       \
  struct opt_##NAME<B, std::void_t<decltype(B::NAME)>> {                                   \
    static constexpr long value = static_cast<long>(B::NAME);                              \
  };
PROBE_OPTIONAL_MEMBER(ReducedSmemCapacityBytes)        // sm_100 (4.4+) and sm_120 (4.4+)
PROBE_OPTIONAL_MEMBER(Sm100ReducedSmemCapacityBytes)   // sm_100 before 4.4
PROBE_OPTIONAL_MEMBER(Sm90ReducedSmemCapacityBytes)    // sm_90
PROBE_OPTIONAL_MEMBER(KernelSmemCarveout)
PROBE_OPTIONAL_MEMBER(SchedulerPipelineStorage)
PROBE_OPTIONAL_MEMBER(CLCResponseStorage)
PROBE_OPTIONAL_MEMBER(TensorMapStorage)
PROBE_OPTIONAL_MEMBER(TensorMapReadyPipelineStorage)
PROBE_OPTIONAL_MEMBER(AccumulatorPipelineStorage)
PROBE_OPTIONAL_MEMBER(CLCPipelineStorage)
PROBE_OPTIONAL_MEMBER(LoadOrderBarrierStorage)
PROBE_OPTIONAL_MEMBER(CLCThrottlePipelineStorage)
PROBE_OPTIONAL_MEMBER(TmemDeallocStorage)
PROBE_OPTIONAL_MEMBER(TmemBasePtrsStorage)
#undef PROBE_OPTIONAL_MEMBER

// A member absent in this CUTLASS version is printed as 0: the builder subtracts nothing for it.
constexpr long present_or_zero(long v) { return v < 0 ? 0 : v; }

// Epilogue carve-outs at which the builders' stage-count functions are evaluated.
#define PROBE_CARVEOUTS(X) X(0) X(1000) X(13312) X(17408) X(40000) X(100000)

// ------------------------------------------------------------------------------------------------
// sm_90: GMMA_TMA_WS_SS builder (sm90_gmma_builder.inl), dense or ptr-array grouped.
template <class ElementA, class ElementB, int M, int N, int K, bool Grouped, bool Cooperative>
void sm90(const char* type_name) {
  using LayoutA = cutlass::layout::RowMajor;
  using LayoutB = cutlass::layout::ColumnMajor;
  using GLayoutA = std::conditional_t<Grouped, LayoutA*, LayoutA>;
  using GLayoutB = std::conditional_t<Grouped, LayoutB*, LayoutB>;
  constexpr int kAlignA = 128 / cutlass::sizeof_bits<ElementA>::value;
  constexpr int kAlignB = 128 / cutlass::sizeof_bits<ElementB>::value;
  using Schedule = std::conditional_t<
      Grouped, cutlass::gemm::KernelPtrArrayTmaWarpSpecializedCooperative,
      std::conditional_t<Cooperative, cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                         cutlass::gemm::KernelTmaWarpSpecialized>>;
  using Tile = cute::Shape<cute::Int<M>, cute::Int<N>, cute::Int<K>>;
  using Builder = cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, ElementA, GLayoutA, kAlignA, ElementB,
      GLayoutB, kAlignB, float, Tile, cute::Shape<cute::_1, cute::_1, cute::_1>,
      cutlass::gemm::collective::StageCountAutoCarveout<0>, Schedule>;
  constexpr long cap = opt_Sm90ReducedSmemCapacityBytes<Builder>::value;
  static_assert(cap > 0, "sm90 builder without Sm90ReducedSmemCapacityBytes");
  std::printf(
      "TRUTH kind=sm90 cutlass=%d.%d.%d type=%s m=%d n=%d k=%d a_bits=%d b_bits=%d grouped=%d "
      "cap=%ld kernel_carveout=%ld tmaps=%ld sched_pipe=%ld pipeline_1stage=%d builder_stages=%d",
      CUTLASS_MAJOR, CUTLASS_MINOR, CUTLASS_PATCH, type_name, M, N, K,
      (int)cute::sizeof_bits_v<typename Builder::ElementAMma>,
      (int)cute::sizeof_bits_v<typename Builder::ElementBMma>, (int)Grouped, cap,
      opt_KernelSmemCarveout<Builder>::value, opt_TensorMapStorage<Builder>::value,
      opt_SchedulerPipelineStorage<Builder>::value,
      (int)sizeof(typename cutlass::PipelineTmaAsync<1>::SharedStorage), Builder::PipelineStages);
#define PROBE_SM90_AT(C)                                                                       \
  std::printf(" stages_at_%d=%d", C,                                                           \
              cutlass::gemm::collective::detail::compute_stage_count_or_override<              \
                  (int)cap, typename Builder::ElementAMma, typename Builder::ElementBMma, Tile>( \
                  cutlass::gemm::collective::StageCountAutoCarveout<C>{}));
  PROBE_CARVEOUTS(PROBE_SM90_AT)
#undef PROBE_SM90_AT
  std::printf("\n");
}

// ------------------------------------------------------------------------------------------------
// Block-scaled NVFP4 (e2m1 data, ue4m3 scales per 16 elements): sm_100 and sm_120 builders.
using Nvf4 = cutlass::nv_float4_t<cutlass::float_e2m1_t>;

// The builder's per-stage bytes, found from its own stage-count function: f(cap = s) == 1 and
// f(cap = s - 1) == 0 for carve-out 0 hold for exactly one s.
template <class Builder, class ElemA, class ElemB, class Tile, int Candidate>
constexpr bool stage_bytes_is() {
  namespace cgc = cutlass::gemm::collective;
  return cgc::detail::sm100_compute_stage_count_or_override_blockscaled<
             Candidate, ElemA, ElemB, Tile, typename Builder::SmemLayoutAtomSFA,
             typename Builder::SmemLayoutAtomSFB>(cgc::StageCountAutoCarveout<0>{}) == 1 &&
         cgc::detail::sm100_compute_stage_count_or_override_blockscaled<
             Candidate - 1, ElemA, ElemB, Tile, typename Builder::SmemLayoutAtomSFA,
             typename Builder::SmemLayoutAtomSFB>(cgc::StageCountAutoCarveout<0>{}) == 0;
}

template <class Builder, class ElemA, class ElemB, class Tile, int ABytes, int BBytes, long cap>
void print_blockscaled(int arch, int m, int n, int k, bool two_sm, bool grouped) {
  constexpr int sfa = (int)cute::size(cute::filter_zeros(typename Builder::SmemLayoutAtomSFA{}));
  constexpr int sfb = (int)cute::size(cute::filter_zeros(typename Builder::SmemLayoutAtomSFB{}));
  constexpr int base = ABytes + BBytes + sfa + sfb;
  // The mainloop pipeline's per-stage barrier storage is 16 B; newer builders round it to 128.
  constexpr int stage = stage_bytes_is<Builder, ElemA, ElemB, Tile, base + 128>() ? base + 128
                        : stage_bytes_is<Builder, ElemA, ElemB, Tile, base + 16>() ? base + 16
                                                                                   : -1;
  std::printf(
      "TRUTH kind=blockscaled cutlass=%d.%d.%d arch=%d m=%d n=%d k=%d two_sm=%d grouped=%d cap=%ld",
      CUTLASS_MAJOR, CUTLASS_MINOR, CUTLASS_PATCH, arch, m, n, k, (int)two_sm, (int)grouped, cap);
  if (arch == 120) {
    // The sm_120 builder's own capacity terms (absent before 4.4: it subtracts nothing, printed 0).
    std::printf(" sched_pipe=%ld clc_response=%ld tmaps=%ld tmap_ready_pipe=%ld",
                present_or_zero(opt_SchedulerPipelineStorage<Builder>::value),
                present_or_zero(opt_CLCResponseStorage<Builder>::value),
                present_or_zero(opt_TensorMapStorage<Builder>::value),
                present_or_zero(opt_TensorMapReadyPipelineStorage<Builder>::value));
  } else {
    // sm_100: one sum; its terms follow in the kind=sm100carveout line.
    std::printf(" kernel_carveout=%ld", opt_KernelSmemCarveout<Builder>::value);
  }
  std::printf(" a=%d b=%d sfa=%d sfb=%d stage=%d builder_stages=%d", ABytes, BBytes, sfa, sfb, stage,
              Builder::PipelineStages);
#define PROBE_BS_AT(C)                                                                          \
  std::printf(" stages_at_%d=%d", C,                                                            \
              cutlass::gemm::collective::detail::sm100_compute_stage_count_or_override_blockscaled< \
                  (int)cap, ElemA, ElemB, Tile, typename Builder::SmemLayoutAtomSFA,              \
                  typename Builder::SmemLayoutAtomSFB>(                                          \
                  cutlass::gemm::collective::StageCountAutoCarveout<C>{}));
  PROBE_CARVEOUTS(PROBE_BS_AT)
#undef PROBE_BS_AT
  std::printf("\n");
}

template <int M, int N, int K, bool Grouped>
void sm120() {
  using LayoutA = std::conditional_t<Grouped, cutlass::layout::RowMajor*, cutlass::layout::RowMajor>;
  using LayoutB =
      std::conditional_t<Grouped, cutlass::layout::ColumnMajor*, cutlass::layout::ColumnMajor>;
  using Tile = cute::Shape<cute::Int<M>, cute::Int<N>, cute::Int<K>>;
  using Builder = cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm120, cutlass::arch::OpClassBlockScaledTensorOp, Nvf4, LayoutA, 32, Nvf4,
      LayoutB, 32, float, Tile, cute::Shape<cute::_1, cute::_1, cute::_1>,
      cutlass::gemm::collective::StageCountAutoCarveout<0>,
      cutlass::gemm::collective::KernelScheduleAuto>;
  // 4.4+: ReducedSmemCapacityBytes; before: the builder passes sm120_smem_capacity_bytes itself.
  constexpr long reduced = opt_ReducedSmemCapacityBytes<Builder>::value;
  constexpr long cap = reduced > 0 ? reduced : cutlass::gemm::collective::detail::sm120_smem_capacity_bytes;
  using EA = typename Builder::SmemAllocTypeA;
  using EB = typename Builder::SmemAllocTypeB;
  constexpr int a = (int)cutlass::bits_to_bytes(cute::sizeof_bits_v<EA> * M * K);
  constexpr int b = (int)cutlass::bits_to_bytes(cute::sizeof_bits_v<EB> * N * K);
  print_blockscaled<Builder, EA, EB, Tile, a, b, cap>(120, M, N, K, false, Grouped);
}

template <int M, int N, int K, bool TwoSm, bool Grouped>
void sm100() {
  using LayoutA = std::conditional_t<Grouped, cutlass::layout::RowMajor*, cutlass::layout::RowMajor>;
  using LayoutB =
      std::conditional_t<Grouped, cutlass::layout::ColumnMajor*, cutlass::layout::ColumnMajor>;
  using Tile = cute::Shape<cute::Int<M>, cute::Int<N>, cute::Int<K>>;
  using Cluster = cute::Shape<cute::Int<TwoSm ? 2 : 1>, cute::_1, cute::_1>;
  using Schedule = std::conditional_t<
      Grouped,
      std::conditional_t<TwoSm, cutlass::gemm::KernelPtrArrayTmaWarpSpecialized2SmNvf4Sm100,
                         cutlass::gemm::KernelPtrArrayTmaWarpSpecialized1SmNvf4Sm100>,
      std::conditional_t<TwoSm, cutlass::gemm::KernelTmaWarpSpecialized2SmNvf4Sm100,
                         cutlass::gemm::KernelTmaWarpSpecialized1SmNvf4Sm100>>;
  using Builder = cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm100, cutlass::arch::OpClassBlockScaledTensorOp, Nvf4, LayoutA, 32, Nvf4,
      LayoutB, 32, float, Tile, Cluster, cutlass::gemm::collective::StageCountAutoCarveout<0>,
      Schedule>;
  constexpr long r45 = opt_ReducedSmemCapacityBytes<Builder>::value;
  constexpr long cap = r45 > 0 ? r45 : opt_Sm100ReducedSmemCapacityBytes<Builder>::value;
  static_assert(cap > 0, "sm100 builder without a reduced capacity member");
  using EA = typename Builder::ElementAMma_SmemAllocType;
  using EB = typename Builder::ElementBMma_SmemAllocType;
  using ST = typename Builder::SmemTileShape;  // per-SM A rows, per-SM B rows, K
  constexpr int a = (int)cutlass::bits_to_bytes(cute::sizeof_bits_v<EA> * cute::size<0>(ST{}) *
                                                cute::size<2>(ST{}));
  constexpr int b = (int)cutlass::bits_to_bytes(cute::sizeof_bits_v<EB> * cute::size<1>(ST{}) *
                                                cute::size<2>(ST{}));
  print_blockscaled<Builder, EA, EB, ST, a, b, cap>(100, M, N, K, TwoSm, Grouped);

  // The kernel carve-out's terms, from the same helper the builder uses.
  using Carve = cutlass::gemm::collective::detail::Sm100DenseGemmTmaUmmaCarveout<
      Cluster, Builder::AccumulatorPipelineStageCount, Builder::SchedulerPipelineStageCount,
      cutlass::gemm::collective::detail::CLCResponseSize, Builder::IsArrayOfPointersGemm, 4>;
  std::printf(
      "TRUTH kind=sm100carveout cutlass=%d.%d.%d m=%d n=%d k=%d two_sm=%d grouped=%d acc_pipe=%ld "
      "clc_pipe=%ld load_order=%ld clc_response=%ld clc_throttle=%ld tmem_dealloc=%ld "
      "tmem_ptrs=%ld tmaps=%ld tmap_ready_pipe=%ld total=%ld\n",
      CUTLASS_MAJOR, CUTLASS_MINOR, CUTLASS_PATCH, M, N, K, (int)TwoSm, (int)Grouped,
      opt_AccumulatorPipelineStorage<Carve>::value, opt_CLCPipelineStorage<Carve>::value,
      opt_LoadOrderBarrierStorage<Carve>::value, opt_CLCResponseStorage<Carve>::value,
      opt_CLCThrottlePipelineStorage<Carve>::value, opt_TmemDeallocStorage<Carve>::value,
      opt_TmemBasePtrsStorage<Carve>::value, opt_TensorMapStorage<Carve>::value,
      present_or_zero(opt_TensorMapReadyPipelineStorage<Carve>::value), (long)Carve::KernelSmemCarveout);
}

}  // namespace probe

int main() {
  using namespace probe;
  std::printf("CUTLASS %d.%d.%d collective builders (host-only probe)\n", CUTLASS_MAJOR,
              CUTLASS_MINOR, CUTLASS_PATCH);
  // sm_90 dense / grouped, 16-bit, 8-bit and tf32 inputs.
  sm90<cutlass::bfloat16_t, cutlass::bfloat16_t, 128, 128, 64, false, true>("bf16");
  sm90<cutlass::bfloat16_t, cutlass::bfloat16_t, 128, 256, 64, false, true>("bf16");
  sm90<cutlass::half_t, cutlass::half_t, 64, 128, 64, false, false>("fp16");
  sm90<cutlass::float_e4m3_t, cutlass::float_e4m3_t, 128, 128, 128, false, true>("e4m3");
  sm90<cutlass::float_e4m3_t, cutlass::float_e4m3_t, 128, 256, 128, false, true>("e4m3");
  sm90<float, float, 128, 128, 32, false, true>("tf32");
  sm90<cutlass::bfloat16_t, cutlass::bfloat16_t, 128, 128, 64, true, true>("bf16");
  sm90<cutlass::bfloat16_t, cutlass::bfloat16_t, 128, 256, 64, true, true>("bf16");
  sm90<cutlass::float_e4m3_t, cutlass::float_e4m3_t, 128, 128, 128, true, true>("e4m3");

  // sm_120 block-scaled: grouped (the MoE tiles) and dense.
  sm120<128, 32, 128, true>();
  sm120<128, 64, 256, true>();
  sm120<128, 128, 128, true>();
  sm120<128, 256, 128, true>();
  sm120<256, 128, 128, true>();
  sm120<128, 128, 256, false>();
  sm120<256, 128, 128, false>();
  sm120<128, 64, 128, false>();

  // sm_100 block-scaled: 1-SM and 2-SM, dense and grouped.
  sm100<128, 64, 256, false, false>();
  sm100<128, 128, 256, false, false>();
  sm100<128, 192, 256, false, false>();
  sm100<128, 256, 256, false, false>();
  sm100<256, 128, 256, true, false>();
  sm100<256, 256, 256, true, false>();
  sm100<128, 128, 256, false, true>();
  sm100<128, 256, 256, false, true>();
  sm100<256, 128, 256, true, true>();
  sm100<256, 192, 256, true, true>();
  sm100<128, 128, 128, false, true>();
  return 0;
}

#endif  // !defined(__CUDA_ARCH__)
