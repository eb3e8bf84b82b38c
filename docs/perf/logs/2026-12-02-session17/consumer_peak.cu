// Microbenchmark: the prefill tiles' consumer loop alone (the kernels' own wgmma_group, LaneSlot and waits) over
// stages already in shared memory: no producer copies, no barriers. Its rate is the ceiling the consumers set.
#include <cstdio>
#include <cstdint>
#include <cuda_runtime.h>
#include "kernels/moe_gemm_layout.h"
#include "kernels/moe_gemm_mainloop.cuh"
using namespace fp4moe;
using namespace fp4moe::kernels;

template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, 1) consumer(float* out, int iters, DequantMul mul) {
  extern __shared__ __align__(1024) uint8_t smem[];
  constexpr int kStages = Cfg::kStages, kGroups = Cfg::kBlockK / pack::kGroupK;
  const int tid = threadIdx.x;
  // weights: random-ish bytes; scales: small UE4M3-like bytes; activations: bf16 1.0 / 0
  for (int i = tid; i < Cfg::kSmem.pipeline / 4; i += blockDim.x) {
    const int off = (i * 4) % Cfg::kSmem.stage_bytes;
    uint32_t v = 0x9e3779b9u * (i + 1);
    if (off >= Cfg::kSmem.scale_offset && off < Cfg::kSmem.act_offset) v = 0x38383838u;
    if (off >= Cfg::kSmem.act_offset) v = (i & 1) ? 0x3f803f80u : 0u;
    reinterpret_cast<uint32_t*>(smem)[i] = v;
  }
  __syncthreads();
  const int warpgroup = __shfl_sync(0xFFFFFFFFu, tid / 128, 0);
  if (warpgroup == 0) {
    if constexpr (Cfg::kRegs.producer != 0) ptx::setmaxnreg<false, Cfg::kRegs.producer>();
    return;
  }
  if constexpr (Cfg::kRegs.consumer != 0) ptx::setmaxnreg<true, Cfg::kRegs.consumer>();
  const int ctid = tid - Cfg::kProducerThreads, warp = ctid >> 5, lane = ctid & 31;
  float acc[Cfg::kNTiles8][4];
#pragma unroll
  for (int j = 0; j < Cfg::kNTiles8; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
  float(&accw)[Cfg::kBlockM / 2] = *reinterpret_cast<float(*)[Cfg::kBlockM / 2]>(&acc[0][0]);
  LaneSlot<Cfg> cur(smem, warp, lane);
  int slot = 0;
  constexpr int N = Cfg::kBlockM;
  for (int it = 0; it < iters; ++it) {
    wgmma::fence_proxy_async_shared();
    constexpr int kAhead = Cfg::kBlockM == 128 ? 1 : kGroups;
    uint4 wq[kGroups];
    uint2 sq[kGroups];
#pragma unroll
    for (int g = 0; g < kAhead; ++g) wq[g] = cur.weights(g), sq[g] = cur.scales(g);
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
      if (g >= kAhead) wq[g] = cur.weights(g), sq[g] = cur.scales(g);
      wgmma_group<Cfg, N>(wq[g], sq[g], cur.desc, g, accw, 1, mul);
      if constexpr (kGroups == 1 || Cfg::kBlockM == 128) wgmma::wait<0>();
      else wgmma::wait<1>();
    }
    cur.next();
    if (++slot == kStages) slot = 0, cur.wrap();
  }
  wgmma::wait<0>();
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < Cfg::kBlockM / 2; ++i) s += accw[i];
  out[blockIdx.x * blockDim.x + tid] = s;
}

template <class Cfg>
void run(const char* name, float* out, int sms) {
  const int iters = 4000;
  auto k = consumer<Cfg>;
  cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)Cfg::kSmem.total);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  k<<<sms, Cfg::kThreads, Cfg::kSmem.total>>>(out, 10, kDequantMul);
  float best = 1e30f;
  for (int rep = 0; rep < 5; ++rep) {
    cudaEventRecord(e0);
    k<<<sms, Cfg::kThreads, Cfg::kSmem.total>>>(out, iters, kDequantMul);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms;
    cudaEventElapsedTime(&ms, e0, e1);
    if (ms < best) best = ms;
  }
  const double flop = 2.0 * sms * double(iters) * Cfg::kBlockM * Cfg::kBlockN * Cfg::kBlockK;
  std::printf("%s: %.1f TFLOP/s (%s)\n", name, flop / best / 1e9, cudaGetErrorString(cudaGetLastError()));
}

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  float* out;
  cudaMalloc(&out, sms * 1024 * sizeof(float));
  run<MoeGemmWsConfig<128, 256, 128, 4>>("consumers of the 128x256x128 tile (4 warpgroups, 104 regs)", out, sms);
  run<MoeGemmWsConfig<256, 128, 128, 3>>("consumers of the 256x128x128 tile (2 warpgroups, 224 regs)", out, sms);
  run<MoeGemmWsConfig<64, 256, 128, 6>>("consumers of the 64x256x128 tile (4 warpgroups, 96 regs)", out, sms);
  return 0;
}
