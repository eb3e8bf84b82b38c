// Session 28 probe: how long a grid takes to read one line that every warp (or every block) of it reads at once, on the
// H200: the direct decode kernels' ids and router weights (one 32-byte sector each, read by every warp of 640 blocks)
// and the down kernel's SwiGLU rows (4 KB, read by each of 384 blocks), against the same number of reads spread over
// distinct lines. A record of the measurement, not part of the library.
// Build: nvcc -O3 -arch=sm_90a -std=c++17 probe_hot_line.cu -o probe_hot_line
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

__device__ __forceinline__ unsigned long long now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
// The direct kernels' load of a pair (kernels/ptx.cuh ld_global_u32): strong at CTA scope, so L1 may serve it.
__device__ __forceinline__ uint32_t ld_cta(const void* p) {
  uint32_t v;
  asm volatile("ld.relaxed.cta.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p));
  return v;
}

// mode 0: every warp's lanes 0..7 read ids[lane] and w[lane] (the same two sectors for the whole grid);
// mode 1: warp 0 of each block reads them and the block shares them through shared memory after a barrier;
// mode 2: every warp reads two sectors of its own (distinct lines), the same count of requests without the hot lines.
// Stamps: t[block * 8 + warp] = when that warp has its values (0 is the kernel's start stamp of block 0's warp 0 slot).
__global__ void ids_kernel(const uint32_t* ids, const uint32_t* w, int mode, unsigned long long* t, unsigned long long* t0,
                           uint32_t* sink) {
  __shared__ uint32_t sh[64];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const unsigned long long start = now();
  if (threadIdx.x == 0) t0[blockIdx.x] = start;
  uint32_t a = 0, b = 0;
  if (mode == 0) {
    if (lane < 8) {
      a = ld_cta(ids + lane);
      b = ld_cta(w + lane);
    }
  } else if (mode == 1) {
    if (warp == 0 && lane < 8) {
      sh[lane] = ld_cta(ids + lane);
      sh[32 + lane] = ld_cta(w + lane);
    }
    __syncthreads();
    if (lane < 8) {
      a = sh[lane];
      b = sh[32 + lane];
    }
  } else {
    const int64_t gw = static_cast<int64_t>(blockIdx.x) * 8 + warp;
    if (lane < 8) {
      a = ld_cta(ids + gw * 64 + lane);  // 256 B apart: distinct lines
      b = ld_cta(w + gw * 64 + lane);
    }
  }
  const uint32_t v = __reduce_add_sync(0xFFFFFFFFu, a + b);  // waits for the values
  const unsigned long long done = now();
  if (lane == 0) t[blockIdx.x * 8 + warp] = done + (v == 0xFFFFFFFFu ? 1 : 0);
  if (v == 0x12345u) *sink = v;
}

// Every block reads `bytes` of rows by 16-byte __ldcg loads (the direct down kernel's direct_stage_rows) at
// rows + (distinct ? blockIdx.x * bytes : 0), then stamps after its barrier.
__global__ void rows_kernel(const uint4* rows, int bytes, int distinct, unsigned long long* t, unsigned long long* t0,
                            uint32_t* sink) {
  __shared__ uint4 sh[512];
  const unsigned long long start = now();
  if (threadIdx.x == 0) t0[blockIdx.x] = start;
  const uint4* src = rows + (distinct ? static_cast<int64_t>(blockIdx.x) * (bytes / 16) : 0);
  for (int i = threadIdx.x; i < bytes / 16; i += blockDim.x) sh[i % 512] = __ldcg(src + i);
  __syncthreads();
  const unsigned long long done = now();
  if (threadIdx.x == 0) t[blockIdx.x] = done;
  if (sh[threadIdx.x % 512].x == 0x12345u) *sink = 1;
}

__global__ void fill_kernel(uint4* p, int64_t n, uint32_t salt) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += gridDim.x * static_cast<int64_t>(blockDim.x))
    p[i] = make_uint4(static_cast<uint32_t>(i) ^ salt, 1u, 2u, 3u);
}

static void report(const char* name, const std::vector<unsigned long long>& t, const std::vector<unsigned long long>& t0) {
  unsigned long long base = ~0ull;
  for (auto x : t0)
    if (x != 0) base = std::min(base, x);
  std::vector<double> v;
  for (auto x : t)
    if (x != 0 && x >= base) v.push_back((x - base) * 1e-3);
  std::sort(v.begin(), v.end());
  if (v.empty()) return;
  std::printf("%-44s n=%5zu min %6.2f p50 %6.2f p90 %6.2f max %6.2f us\n", name, v.size(), v[0], v[v.size() / 2],
              v[v.size() * 9 / 10], v.back());
}

int main() {
  const int64_t flush_bytes = 512ll << 20;  // past the 50 MB L2: the ids come from DRAM, as in the bench
  uint4* flush = nullptr;
  uint32_t *ids = nullptr, *w = nullptr, *sink = nullptr;
  unsigned long long *t = nullptr, *t0 = nullptr;
  CK(cudaMalloc(&flush, flush_bytes));
  CK(cudaMalloc(&ids, 64 << 20));
  CK(cudaMalloc(&w, 64 << 20));
  CK(cudaMalloc(&sink, 4));
  CK(cudaMalloc(&t, 8192 * 8 * 8));
  CK(cudaMalloc(&t0, 8192 * 8));
  CK(cudaMemset(ids, 1, 64 << 20));
  CK(cudaMemset(w, 1, 64 << 20));
  const char* names[3] = {"every warp reads the two sectors", "warp 0 reads them, shared by a barrier",
                          "every warp reads two sectors of its own"};
  for (int blocks : {256, 640}) {
    for (int mode = 0; mode < 3; ++mode) {
      for (int rep = 0; rep < 3; ++rep) {
        fill_kernel<<<528, 512>>>(flush, flush_bytes / 16, rep);
        CK(cudaGetLastError());
        CK(cudaMemset(t, 0, 8192 * 8 * 8));
        CK(cudaMemset(t0, 0, 8192 * 8));
        CK(cudaDeviceSynchronize());
        ids_kernel<<<blocks, 256>>>(ids, w, mode, t, t0, sink);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        std::vector<unsigned long long> h(blocks * 8), h0(blocks);
        CK(cudaMemcpy(h.data(), t, h.size() * 8, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(h0.data(), t0, h0.size() * 8, cudaMemcpyDeviceToHost));
        char label[96];
        std::snprintf(label, sizeof(label), "ids %d blocks: %s", blocks, names[mode]);
        if (rep > 0) report(label, h, h0);  // (the first is a warm-up)
      }
    }
  }
  // Rows: 4 KB (TP8 T=1: 8 rows of I = 256 bf16) written just before, so in L2 as gate_up leaves them.
  for (int bytes : {4096, 8192}) {
    for (int distinct = 0; distinct < 2; ++distinct) {
      for (int rep = 0; rep < 3; ++rep) {
        fill_kernel<<<528, 512>>>(flush, flush_bytes / 16, rep);
        fill_kernel<<<384, 256>>>(reinterpret_cast<uint4*>(ids), 384ll * bytes / 16, rep);  // into L2
        CK(cudaGetLastError());
        CK(cudaMemset(t, 0, 8192 * 8));
        CK(cudaMemset(t0, 0, 8192 * 8));
        CK(cudaDeviceSynchronize());
        rows_kernel<<<384, 256>>>(reinterpret_cast<const uint4*>(ids), bytes, distinct, t, t0, sink);
        CK(cudaGetLastError());
        CK(cudaDeviceSynchronize());
        std::vector<unsigned long long> h(384), h0(384);
        CK(cudaMemcpy(h.data(), t, h.size() * 8, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(h0.data(), t0, h0.size() * 8, cudaMemcpyDeviceToHost));
        char label[96];
        std::snprintf(label, sizeof(label), "rows %d B, 384 blocks: %s", bytes, distinct ? "each its own" : "all the same");
        if (rep > 0) report(label, h, h0);
      }
    }
  }
  std::printf("done\n");
  return 0;
}
