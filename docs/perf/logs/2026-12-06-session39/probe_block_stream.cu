// Session 39 probe: how fast one persistent block streams an item's bytes through a multistage shared-memory ring (the
// 8-token tile's stage: 16 KB of weights and 2 KB of scales), alone on the GPU or beside others, by per-thread 16-byte
// cp.async (the multistage kernels' copies) or by one bulk copy a warp (cp.async.bulk with an mbarrier per slot), with
// a chosen amount of ALU work per thread and stage standing in for the E2M1 conversion.
// A record of the measurement, not part of the library. Build: nvcc -O3 -arch=sm_90a -std=c++17 probe_block_stream.cu
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

constexpr int kStageBytes = 18432;  // 16 KB weights + 2 KB scales (the 8-token tile's stage without its activations)
constexpr int kThreads = 256;

__device__ __forceinline__ uint32_t smem_addr(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

// Bulk mode: one bulk copy a warp and stage (kStageBytes / 8 bytes), all completing on the slot's mbarrier.
template <int kStages, bool kBulk>
__global__ void __launch_bounds__(kThreads) stream_kernel(const uint8_t* src, int steps, int work,
                                                          unsigned long long* sink) {
  extern __shared__ __align__(128) uint8_t smem[];
  uint64_t* bars = reinterpret_cast<uint64_t*>(smem + kStages * kStageBytes);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const uint8_t* base = src + static_cast<int64_t>(blockIdx.x) * steps * kStageBytes;
  if (kBulk && tid == 0) {
    for (int s = 0; s < kStages; ++s) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(bars + s)));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  auto produce = [&](int step, int slot) {
    const uint8_t* g = base + static_cast<int64_t>(step) * kStageBytes;
    uint8_t* d = smem + slot * kStageBytes;
    if constexpr (kBulk) {
      constexpr int kPiece = kStageBytes / (kThreads / 32);
      if (tid == 0)
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bars + slot)),
                     "r"(kStageBytes)
                     : "memory");
      __syncwarp();
      if (lane == 0)
        asm volatile(
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                smem_addr(d + warp * kPiece)),
            "l"(g + warp * kPiece), "r"(kPiece), "r"(smem_addr(bars + slot))
            : "memory");
    } else {
      for (int c = tid; c < kStageBytes / 16; c += kThreads)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_addr(d + c * 16)), "l"(g + c * 16)
                     : "memory");
    }
  };
  constexpr int kAhead = kStages - 1;
  for (int s = 0; s < kAhead; ++s) {
    if (s < steps) produce(s, s);
    if (!kBulk) asm volatile("cp.async.commit_group;" ::: "memory");
  }
  uint32_t acc = 0;
  int slot = 0;
  uint32_t phase = 0;  // (bulk) the parity of slot `slot`'s current fill
  for (int st = 0; st < steps; ++st) {
    if constexpr (kBulk) {
      uint32_t done = 0;
      while (!done)
        asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                     : "=r"(done)
                     : "r"(smem_addr(bars + slot)), "r"(phase)
                     : "memory");
      __syncthreads();
    } else {
      asm volatile("cp.async.wait_group %0;" ::"n"(kAhead - 1) : "memory");
      __syncthreads();
    }
    if (st + kAhead < steps) produce(st + kAhead, slot == 0 ? kStages - 1 : slot - 1);
    if (!kBulk) asm volatile("cp.async.commit_group;" ::: "memory");
    // Consume: each thread reads its 72 bytes of the slot (4 x 16 B, as the kernels' weight and scale reads), then
    // `work` dependent integer steps on them (the conversion's stand-in: LOP3/IMAD chains, 4 independent).
    const uint4* w = reinterpret_cast<const uint4*>(smem + slot * kStageBytes);
    uint32_t x0 = 0, x1 = 0, x2 = 0, x3 = 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint4 v = w[tid + i * kThreads];
      x0 ^= v.x, x1 += v.y, x2 ^= v.z, x3 += v.w;
    }
    for (int i = 0; i < work; ++i) {
      x0 = x0 * 0x9E3779B1u + x1;
      x1 = (x1 ^ x2) * 3u + 7u;
      x2 = x2 * 0x85EBCA6Bu + x3;
      x3 = (x3 ^ x0) * 5u + 11u;
    }
    acc += x0 ^ x1 ^ x2 ^ x3;
    if (++slot == kStages) {
      slot = 0;
      phase ^= 1u;
    }
  }
  if (!kBulk) asm volatile("cp.async.wait_group 0;" ::: "memory");
  if (acc == 0x12345678u) *sink = acc;  // (never: keeps the reads)
}

template <int kStages, bool kBulk>
int run(const uint8_t* buf, int64_t buf_bytes, unsigned long long* sink, int grid, int steps, int work,
        cudaEvent_t e0, cudaEvent_t e1, int sms) {
  const int smem = kStages * kStageBytes + kStages * 8;
  CK(cudaFuncSetAttribute(stream_kernel<kStages, kBulk>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  int per_sm = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, stream_kernel<kStages, kBulk>, kThreads, smem));
  if (grid > per_sm * sms) return 0;
  const int64_t bytes = static_cast<int64_t>(grid) * steps * kStageBytes;
  const int64_t regions = std::max<int64_t>(1, buf_bytes / std::max<int64_t>(bytes, 1));
  std::vector<float> t;
  for (int it = 0; it < 25; ++it) {
    const uint8_t* src = buf + (it % regions) * bytes;  // a region not read in the last launches (past L2)
    CK(cudaEventRecord(e0));
    stream_kernel<kStages, kBulk><<<grid, kThreads, smem>>>(src, steps, work, sink);
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    CK(cudaGetLastError());
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    if (it >= 5) t.push_back(ms * 1000.0f);
  }
  std::sort(t.begin(), t.end());
  const float us = t[t.size() / 2];
  std::printf("%-8s stages %d grid %4d (%d/SM max) steps %3d work %4d: %8.1f us, %7.2f GB/s a block, %7.1f GB/s in all\n",
              kBulk ? "bulk" : "cp.async", kStages, grid, per_sm, steps, work, us,
              steps * kStageBytes / (us * 1e3), bytes / (us * 1e3));
  return 0;
}

int main() {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int64_t buf_bytes = int64_t{4} << 30;
  uint8_t* buf = nullptr;
  unsigned long long* sink = nullptr;
  CK(cudaMalloc(&buf, buf_bytes));
  CK(cudaMemset(buf, 1, buf_bytes));
  CK(cudaMalloc(&sink, 8));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  // An item of the TP8 gate_up: 24 stages (K = 6144); the lone block streams 8 items back to back to amortize the
  // launch, the grids one item a block (as a round).
  for (int work : {0, 8, 16, 32}) {
    for (int grid : {1, 96, 132, 264, 396}) {
      const int steps = grid == 1 ? 192 : 24;
      if (run<3, false>(buf, buf_bytes, sink, grid, steps, work, e0, e1, sms)) return 1;
      if (run<5, false>(buf, buf_bytes, sink, grid, steps, work, e0, e1, sms)) return 1;
      if (run<3, true>(buf, buf_bytes, sink, grid, steps, work, e0, e1, sms)) return 1;
      if (run<5, true>(buf, buf_bytes, sink, grid, steps, work, e0, e1, sms)) return 1;
    }
  }
  if (run<3, false>(buf, buf_bytes, sink, 1, 0, 0, e0, e1, sms)) return 1;  // an empty launch
  std::printf("done\n");
  return 0;
}
