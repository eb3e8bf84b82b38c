// Probe: cycles per k64 group of m64nNk16 wgmmas (A from registers, B from shared memory) when each of 4 warpgroups
// an SM accumulates into one chain or two (alternate k16 steps), with the kernels' pattern of a commit and a
// wait_group<kBuf - 1> per group (kBuf A-register sets: 2 as the kernels, 3 for one more group in flight), and
// optionally some integer work a thread between groups (the conversion's stand-in).
// Build: nvcc -gencode arch=compute_90a,code=sm_90a -std=c++20 -O3 -I. probe_wgmma_chain.cu -o probe_wgmma_chain (from the repo root).
#include <cstdio>
#include <cstdint>
#include <cuda_runtime.h>
#include "kernels/wgmma.cuh"
using namespace fp4moe::kernels;

template <int N, int kChains, int kAlu, int kBuf = 2, bool kMma = true, int kSteps = 4, int kStagger = 0>
__global__ void __launch_bounds__(512, 1) probe(float* out, long long* cyc, int groups) {
  extern __shared__ __align__(1024) uint8_t smem[];
  for (int i = threadIdx.x; i < N * 64 / 2; i += blockDim.x) reinterpret_cast<uint32_t*>(smem)[i] = 0x3C003C00u;  // bf16 ~0.0078
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();
  const uint64_t desc0 = wgmma::desc_k_major_sw128(static_cast<uint32_t>(__cvta_generic_to_shared(smem)));
  float acc[kChains][N / 2];
#pragma unroll
  for (int c = 0; c < kChains; ++c)
#pragma unroll
    for (int i = 0; i < N / 2; ++i) acc[c][i] = 0.f;
  uint32_t a[kBuf][kSteps][4];
  uint32_t x = threadIdx.x * 2654435761u;
#pragma unroll
  for (int b = 0; b < kBuf; ++b)
#pragma unroll
    for (int s = 0; s < kSteps; ++s)
#pragma unroll
      for (int r = 0; r < 4; ++r) a[b][s][r] = 0x3C003C00u;
  __syncthreads();
  long long t0 = clock64();
  // kStagger: the odd warpgroups start with that many rounds of integer work on their A registers first, so that
  // their conversion falls while the even ones' wgmmas run (a ping-pong by offset).
  if (kStagger > 0 && (threadIdx.x / 128) % 2 == 1) {
#pragma unroll 1
    for (int i = 0; i < kStagger; ++i)
#pragma unroll
      for (int s = 0; s < kSteps; ++s)
#pragma unroll
        for (int r = 0; r < 4; ++r) a[0][s][r] = (a[0][s][r] ^ (x >> i)) & 0x3C3F3C3Fu | 0x3C003C00u;
  }
  for (int g = 0; g < groups; g += kBuf)
#pragma unroll
  for (int b = 0; b < kBuf; ++b) {
    // stand-in for the conversion: kAlu dependent-free integer ops per thread writing the A registers
#pragma unroll
    for (int s = 0; s < kSteps; ++s)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        uint32_t v = a[b][s][r];
#pragma unroll
        for (int k = 0; k < kAlu; ++k) v = (v ^ (x >> k)) & 0x3C3F3C3Fu | 0x3C003C00u;
        a[b][s][r] = v;
      }
    if constexpr (kMma) {
    wgmma::fence();
#pragma unroll
    for (int s = 0; s < kSteps; ++s) {
      const int c = kChains == 1 ? 0 : (s & 1);
      wgmma::WgmmaRs<N>::mma(acc[c], a[b][s], wgmma::desc_advance(desc0, (s % 4) * 32), 1);
    }
    wgmma::commit();
    wgmma::wait<kBuf - 1>();
    } else {  // the integer work alone: its results summed into the accumulators so that it is not dropped
#pragma unroll
      for (int s = 0; s < kSteps; ++s)
#pragma unroll
        for (int r = 0; r < 4; ++r) acc[0][(4 * s + r) % (N / 2)] += __uint_as_float(a[b][s][r] & 0x3F7FFFFFu);
    }
  }
  wgmma::wait<0>();
#pragma unroll
  for (int c = 0; c < kChains; ++c)
#pragma unroll
    for (int i = 0; i < N / 2; ++i) wgmma::fence_operand(acc[c][i]);
  long long t1 = clock64();
  float s = 0.f;
#pragma unroll
  for (int c = 0; c < kChains; ++c)
#pragma unroll
    for (int i = 0; i < N / 2; ++i) s += acc[c][i];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
  if (threadIdx.x == 0) cyc[blockIdx.x] = t1 - t0;
}

template <int N, int kChains, int kAlu, int kBuf = 2, bool kMma = true, int kSteps = 4, int kStagger = 0>
void run(int wgs, float* out, long long* cyc) {
  const int groups = 3996, smem = 1024 * ((N * 128 + 1023) / 1024);
  auto k = probe<N, kChains, kAlu, kBuf, kMma, kSteps, kStagger>;
  cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  k<<<132, 128 * wgs, smem>>>(out, cyc, groups);  // warm-up
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0); cudaEventCreate(&e1);
  cudaEventRecord(e0);
  k<<<132, 128 * wgs, smem>>>(out, cyc, groups);
  cudaEventRecord(e1);
  cudaError_t err = cudaDeviceSynchronize();
  float ms = 0; cudaEventElapsedTime(&ms, e0, e1);
  long long c[132]; cudaMemcpy(c, cyc, sizeof c, cudaMemcpyDeviceToHost);
  long long mx = 0; for (long long v : c) mx = v > mx ? v : mx;
  const double flops = 2.0 * 64 * N * 16 * kSteps * groups * wgs * 132;
  printf("N=%3d chains=%d alu=%2d buffers=%d mma=%d k16 steps a group=%d stagger=%d wgs=%d: %7.1f cycles a group a warpgroup (max over SMs), %.1f us, %.0f TFLOP/s %s\n", N,
         kChains, kAlu, kBuf, int(kMma), kSteps, kStagger, wgs, double(mx) / groups, ms * 1e3, flops / (ms * 1e-3) / 1e12, err ? cudaGetErrorString(err) : "");
}

int main() {
  float* out; long long* cyc;
  cudaMalloc(&out, 132 * 512 * 4); cudaMalloc(&cyc, 132 * 8);
  for (int wgs : {1, 4}) {
    run<16, 1, 0>(wgs, out, cyc); run<16, 2, 0>(wgs, out, cyc);
    run<32, 1, 0>(wgs, out, cyc); run<32, 2, 0>(wgs, out, cyc);
    run<64, 1, 0>(wgs, out, cyc); run<64, 2, 0>(wgs, out, cyc);
    run<128, 1, 0>(wgs, out, cyc);
  }
  for (int wgs : {4}) {
    run<16, 1, 4>(wgs, out, cyc); run<16, 2, 4>(wgs, out, cyc);
    run<32, 1, 4>(wgs, out, cyc); run<32, 2, 4>(wgs, out, cyc);
    run<32, 1, 8>(wgs, out, cyc); run<32, 2, 8>(wgs, out, cyc);
    run<16, 1, 2>(wgs, out, cyc); run<16, 1, 2, 3>(wgs, out, cyc);
    run<32, 1, 2>(wgs, out, cyc); run<32, 1, 2, 3>(wgs, out, cyc);
    run<16, 1, 4, 3>(wgs, out, cyc); run<32, 1, 4, 3>(wgs, out, cyc); run<32, 1, 8, 3>(wgs, out, cyc);
    run<32, 1, 2, 2, false>(wgs, out, cyc); run<32, 1, 4, 2, false>(wgs, out, cyc); run<32, 1, 8, 2, false>(wgs, out, cyc);
    // eight k16 steps a commit group (a k128 group: half the groups, the same work a wgmma)
    run<32, 1, 0, 2, true, 8>(wgs, out, cyc); run<32, 1, 2, 2, true, 8>(wgs, out, cyc); run<32, 1, 4, 2, true, 8>(wgs, out, cyc);
    run<16, 1, 2, 2, true, 8>(wgs, out, cyc); run<16, 1, 4, 2, true, 8>(wgs, out, cyc);
    run<32, 1, 2, 2, false, 8>(wgs, out, cyc); run<32, 1, 4, 2, false, 8>(wgs, out, cyc);
    // the odd warpgroups offset by about half a group's integer work, then a whole group's
    run<32, 1, 4, 2, true, 4, 2>(wgs, out, cyc); run<32, 1, 4, 2, true, 4, 4>(wgs, out, cyc);
    run<32, 1, 2, 2, true, 4, 1>(wgs, out, cyc); run<32, 1, 2, 2, true, 4, 2>(wgs, out, cyc);
  }
  return 0;
}
