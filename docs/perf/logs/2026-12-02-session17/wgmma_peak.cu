// Microbenchmark: the H200's wgmma rate for bf16 m64nNk16 with A from registers (RS) and from shared memory (SS),
// W warpgroups per block, one block per SM, no conversion and no copies: the ceiling of the prefill tiles' MMAs.
#include <cstdio>
#include <cstdint>
#include <cuda_runtime.h>
#include "kernels/wgmma.cuh"
using namespace fp4moe::kernels;

template <int N>
__device__ __forceinline__ void ss256(float (&d)[128], uint64_t da, uint64_t db) {
  static_assert(N == 256, "");
#define R(i) "+f"(d[i])
  asm volatile(
      "{\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, 1, 1, 1, 0, 0;\n}\n"
      : R(0), R(1), R(2), R(3), R(4), R(5), R(6), R(7), R(8), R(9), R(10), R(11), R(12), R(13), R(14), R(15),
        R(16), R(17), R(18), R(19), R(20), R(21), R(22), R(23), R(24), R(25), R(26), R(27), R(28), R(29), R(30), R(31),
        R(32), R(33), R(34), R(35), R(36), R(37), R(38), R(39), R(40), R(41), R(42), R(43), R(44), R(45), R(46), R(47),
        R(48), R(49), R(50), R(51), R(52), R(53), R(54), R(55), R(56), R(57), R(58), R(59), R(60), R(61), R(62), R(63),
        R(64), R(65), R(66), R(67), R(68), R(69), R(70), R(71), R(72), R(73), R(74), R(75), R(76), R(77), R(78), R(79),
        R(80), R(81), R(82), R(83), R(84), R(85), R(86), R(87), R(88), R(89), R(90), R(91), R(92), R(93), R(94), R(95),
        R(96), R(97), R(98), R(99), R(100), R(101), R(102), R(103), R(104), R(105), R(106), R(107), R(108), R(109), R(110), R(111),
        R(112), R(113), R(114), R(115), R(116), R(117), R(118), R(119), R(120), R(121), R(122), R(123), R(124), R(125), R(126), R(127)
      : "l"(da), "l"(db));
#undef R
}

// kMode 0: RS; 1: SS (N = 256 only). Each warpgroup: iters x 4 k16 wgmmas per commit group, wait<1>.
template <int N, int kMode, int kWgs>
__global__ void __launch_bounds__(128 * kWgs, 1) peak(float* out, int iters) {
  extern __shared__ __align__(1024) uint8_t smem[];
  const int tid = threadIdx.x;
  for (int i = tid; i < (N * 128 + 64 * 128) / 4; i += blockDim.x) reinterpret_cast<uint32_t*>(smem)[i] = 0x3f803f80u * (i & 1);
  __syncthreads();
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const uint64_t db = wgmma::desc_k_major_sw128(base);
  const uint64_t da = wgmma::desc_k_major_sw128(base + N * 128);
  float d[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; ++i) d[i] = 0.f;
  uint32_t a[2][4][4];
#pragma unroll
  for (int b = 0; b < 2; ++b)
#pragma unroll
  for (int s = 0; s < 4; ++s)
#pragma unroll
    for (int r = 0; r < 4; ++r) a[b][s][r] = 0x3f803f80u + tid + s + r + b;
  for (int it = 0; it < iters; it += 2) {
#pragma unroll
    for (int b = 0; b < 2; ++b) {
      wgmma::fence();
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        if constexpr (kMode != 1) wgmma::WgmmaRs<N>::mma(*reinterpret_cast<float(*)[N / 2]>(d), a[b][s], wgmma::desc_advance(db, s * 32), 1);
        else ss256<N>(*reinterpret_cast<float(*)[128]>(d), wgmma::desc_advance(da, s * 32), wgmma::desc_advance(db, s * 32));
      }
      wgmma::commit();
      wgmma::wait<1>();
      // kMode 2: rewrite the other buffer's A registers (its group has completed), as a conversion would.
      if constexpr (kMode == 2) {
#pragma unroll
        for (int s = 0; s < 4; ++s)
#pragma unroll
          for (int r = 0; r < 4; ++r) a[b ^ 1][s][r] = (a[b ^ 1][s][r] ^ (it + s)) | 0x3f003f00u;
      }
    }
  }
  wgmma::wait<0>();
  float acc = 0.f;
#pragma unroll
  for (int i = 0; i < N / 2; ++i) acc += d[i];
  out[blockIdx.x * blockDim.x + tid] = acc;
}

template <int N, int kMode, int wgs>
void run(float* out, int sms) {
  const int iters = 20000, smem = N * 128 + 64 * 128;
  auto k = peak<N, kMode, wgs>;
  cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  k<<<sms, 128 * wgs, smem>>>(out, 100);
  float best = 1e30f;
  for (int rep = 0; rep < 5; ++rep) {
    cudaEventRecord(e0);
    k<<<sms, 128 * wgs, smem>>>(out, iters);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms;
    cudaEventElapsedTime(&ms, e0, e1);
    if (ms < best) best = ms;
  }
  const double flop = 2.0 * sms * wgs * double(iters) * 4 * 64 * N * 16;
  std::printf("%s m64n%dk16, %d warpgroups/SM: %.1f TFLOP/s (%s)\n", kMode == 1 ? "SS" : kMode == 2 ? "RS, A rewritten" : "RS", N, wgs, flop / best / 1e9,
              cudaGetErrorString(cudaGetLastError()));
}

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  float* out;
  cudaMalloc(&out, sms * 512 * sizeof(float));
  run<128, 0, 1>(out, sms);
  run<128, 0, 2>(out, sms);
  run<128, 0, 3>(out, sms);
  run<128, 0, 4>(out, sms);
  run<128, 2, 4>(out, sms);
  run<256, 0, 1>(out, sms);
  run<256, 0, 2>(out, sms);
  run<256, 1, 1>(out, sms);
  run<256, 1, 2>(out, sms);
  run<64, 0, 2>(out, sms);
  run<128, 2, 2>(out, sms);
  run<128, 2, 3>(out, sms);
  run<256, 2, 1>(out, sms);
  run<256, 2, 2>(out, sms);
  return 0;
}
