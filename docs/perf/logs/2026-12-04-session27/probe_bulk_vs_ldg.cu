// Session 27 probe: how fast a one-shot read of a decode step's bytes lands on the H200 when every warp puts its share
// in flight at once, by bulk copies into shared memory (the direct gate_up's way) or by per-lane 16-byte loads.
// A record of the measurement, not part of the library. Build: nvcc -O3 -arch=sm_90a -std=c++17 probe_bulk_vs_ldg.cu
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#define CK(x)                                                                               \
  do {                                                                                      \
    cudaError_t e_ = (x);                                                                   \
    if (e_ != cudaSuccess) {                                                                \
      std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
      return 1;                                                                             \
    }                                                                                       \
  } while (0)

__device__ __forceinline__ uint32_t smem_addr(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

// Each warp reads `per_warp` bytes at src + warp_id * stride (stride >= per_warp, so that the step's bytes are
// `warps x per_warp` spread like experts' slabs), in `pieces` bulk copies on as many mbarriers, all issued at once by
// lane 0, then waits for all of them; one sum of a word per piece keeps the copies live.
__global__ void bulk_kernel(const uint8_t* src, int64_t stride, int per_warp, int pieces, unsigned long long* sink) {
  extern __shared__ __align__(128) uint8_t smem[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nwarps = blockDim.x >> 5;
  const int64_t gw = static_cast<int64_t>(blockIdx.x) * nwarps + warp;
  uint8_t* dst = smem + warp * per_warp;
  uint64_t* bars = reinterpret_cast<uint64_t*>(smem + nwarps * per_warp) + warp * pieces;
  const int piece = per_warp / pieces;
  if (lane == 0) {
    for (int q = 0; q < pieces; ++q)
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(bars + q)));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    for (int q = 0; q < pieces; ++q) {
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bars + q)), "r"(piece) : "memory");
      asm volatile(
          "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
              smem_addr(dst + q * piece)),
          "l"(src + gw * stride + q * piece), "r"(piece), "r"(smem_addr(bars + q))
          : "memory");
    }
  }
  __syncwarp();
  unsigned long long acc = 0;
  for (int q = 0; q < pieces; ++q) {
    uint32_t done = 0;
    while (!done)
      asm volatile(
          "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0; selp.u32 %0, 1, 0, p; }"
          : "=r"(done)
          : "r"(smem_addr(bars + q))
          : "memory");
    acc += dst[q * piece + lane];
  }
  if (acc == 0x123456789ull) *sink = acc;  // (never: keeps the reads)
}

// The same bytes by per-lane 16-byte loads, up to kMax of a lane's loads issued before any is used (more in batches).
template <int kMax>
__global__ void ldg_kernel(const uint8_t* src, int64_t stride, int per_warp, unsigned long long* sink) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nwarps = blockDim.x >> 5;
  const int64_t gw = static_cast<int64_t>(blockIdx.x) * nwarps + warp;
  const uint4* p = reinterpret_cast<const uint4*>(src + gw * stride);
  const int n = per_warp / 16 / 32;  // loads per lane
  unsigned long long acc = 0;
  for (int i0 = 0; i0 < n; i0 += kMax) {
    uint4 v[kMax];
#pragma unroll
    for (int i = 0; i < kMax; ++i)
      if (i0 + i < n) v[i] = __ldcs(p + (i0 + i) * 32 + lane);
#pragma unroll
    for (int i = 0; i < kMax; ++i)
      if (i0 + i < n) acc += v[i].x ^ v[i].w;
  }
  if (acc == 0x123456789ull) *sink = acc;
}

int main() {
  const int64_t total_buf = int64_t{4} << 30;  // 4 GiB: each timed launch reads a fresh region (L2 cold)
  uint8_t* buf = nullptr;
  unsigned long long* sink = nullptr;
  CK(cudaMalloc(&buf, total_buf));
  CK(cudaMalloc(&sink, 8));
  CK(cudaMemset(buf, 1, total_buf));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  std::printf("SMs %d\n", sms);
  // Shapes: blocks, warps a block, bytes a warp (TP8 T=1's gate_up: 256 blocks x 8 warps x 6,912 B of weights and
  // scales = 14.2 MB; the step's 21.2 MB as 384 more blocks x 8 warps x 2,304 B).
  struct Shape { int blocks, warps, per_warp; const char* name; };
  const Shape shapes[] = {{256, 8, 6912, "TP8 T=1 gate_up (14.2 MB)"},
                          {256, 8, 13824, "2x the bytes a warp (28.3 MB)"},
                          {132, 8, 27648, "1 block an SM, 27 KB a warp (29.2 MB)"},
                          {1056, 8, 6912, "4x the blocks (58.4 MB, 8 an SM over time)"}};
  // Median over 20 launches after one warm-up, between an event pair; each launch reads a fresh `span` of the buffer
  // (L2 cold). Returns a negative time on a CUDA error (printed).
  int64_t offset = 0;
  auto median_us = [&](int64_t span, auto&& launch) -> double {
    std::vector<float> t;
    for (int it = 0; it < 21; ++it) {
      if (offset + span > total_buf) offset = 0;
      cudaError_t e = cudaEventRecord(a);
      if (e == cudaSuccess) launch(buf + offset), e = cudaGetLastError();
      if (e == cudaSuccess) e = cudaEventRecord(b);
      if (e == cudaSuccess) e = cudaEventSynchronize(b);
      float ms = 0;
      if (e == cudaSuccess) e = cudaEventElapsedTime(&ms, a, b);
      if (e != cudaSuccess) {
        std::printf("CUDA error %s\n", cudaGetErrorString(e));
        return -1.0;
      }
      if (it > 0) t.push_back(ms);
      offset += span;
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2] * 1e3;
  };
  for (const Shape& s : shapes) {
    const int64_t stride = (s.per_warp + 4095) / 4096 * 4096;
    const int64_t span = static_cast<int64_t>(s.blocks) * s.warps * stride;
    const double bytes = static_cast<double>(s.blocks) * s.warps * s.per_warp;
    for (int pieces : {1, 2, 4}) {
      const size_t smem = static_cast<size_t>(s.warps) * s.per_warp + s.warps * pieces * 8;
      if (smem > 227 * 1024) continue;
      CK(cudaFuncSetAttribute(bulk_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
      const double us = median_us(span, [&](const uint8_t* src) {
        bulk_kernel<<<s.blocks, s.warps * 32, smem>>>(src, stride, s.per_warp, pieces, sink);
      });
      if (us < 0) return 1;
      std::printf("bulk %-44s pieces %d: %7.2f us  %6.0f GB/s\n", s.name, pieces, us, bytes / us * 1e-3);
    }
    const double us = median_us(span, [&](const uint8_t* src) {
      ldg_kernel<28><<<s.blocks, s.warps * 32>>>(src, stride, s.per_warp, sink);
    });
    if (us < 0) return 1;
    std::printf("ldg  %-44s         : %7.2f us  %6.0f GB/s\n", s.name, us, bytes / us * 1e-3);
  }
  // An empty launch, for the fixed cost inside the event pair.
  const double empty = median_us(0, [&](const uint8_t* src) { ldg_kernel<1><<<256, 256>>>(src, 0, 0, sink); });
  if (empty < 0) return 1;
  std::printf("empty launch: %.2f us\n", empty);
  return 0;
}
