// GPU test of the wgmma building blocks the sm_90 GEMM kernels rely on: the A-fragment register layout
// (mma.m16n8k16's, per warp), the D layout, the 128-byte-swizzled K-major activation slices and the
// descriptor start offsets of each k16 step. Exact small-integer inputs: D must equal the CPU sum bit for bit.
// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/ptx.cuh"
#include "kernels/wgmma.cuh"
#include "random_data.h"
#include "tests/gpu/gpu_test_util.h"

namespace fp4moe {
namespace {

constexpr int kK = 128;  // two 64-wide slices, eight k16 steps

// One warpgroup: D[64 x N] = A[64 x 128] * B[N x 128]^T with A from registers (host-built fragments) and B
// copied into shared memory in the kernels' swizzled layout. Writes D as each thread holds it.
template <int N>
__global__ void wgmma_probe_kernel(const uint32_t* a_frag, const uint16_t* b, float* d_out, int* misaligned) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __shared__ __align__(1024) uint8_t sm[N * kK * 2];
  const int tid = threadIdx.x;
  if (tid == 0) *misaligned = kernels::ptx::smem_addr(sm) % 1024;
  // Token n's 16-byte chunk c (k = 8c..8c+7): slice c / 8, row n, chunk (c % 8) ^ (n % 8), as the kernels' producer (kernels/moe_gemm_producer.cuh).
  for (int i = tid; i < N * (kK / 8); i += blockDim.x) {
    const int n = i / (kK / 8), c = i % (kK / 8);
    uint4 v;
    std::memcpy(&v, b + n * kK + c * 8, 16);
    *reinterpret_cast<uint4*>(sm + (c / 8) * (N * 128) + n * 128 + (((c % 8) ^ (n % 8)) * 16)) = v;
  }
  kernels::wgmma::fence_proxy_async_shared();
  __syncthreads();
  // NaN in every accumulator: the first step's scale_d = 0 must ignore D (a wrapper that accumulated would keep it).
  float d[N / 2];
  for (int i = 0; i < N / 2; ++i) d[i] = __int_as_float(0x7FC00000);
  kernels::wgmma::fence();
  const uint32_t base = kernels::ptx::smem_addr(sm);
  for (int kk = 0; kk < kK / 16; ++kk) {
    uint32_t a[4];
    for (int r = 0; r < 4; ++r) a[r] = a_frag[(kk * 128 + tid) * 4 + r];
    kernels::wgmma::fence();
    kernels::wgmma::WgmmaRs<N>::mma(d, a, kernels::wgmma::desc_k_major_sw128(base + (kk / 4) * (N * 128) + (kk % 4) * 32),
                                    kk == 0 ? 0 : 1);
    kernels::wgmma::commit();
    kernels::wgmma::wait<0>();
  }
  for (int i = 0; i < N / 2; ++i) kernels::wgmma::fence_operand(d[i]);
  for (int i = 0; i < N / 2; ++i) d_out[tid * (N / 2) + i] = d[i];
#else
  if (threadIdx.x == 0) *misaligned = -1;  // not an sm_90a build: the host skips
#endif
}

uint16_t bf16_of_int(int v) {  // small integers are exact in bf16
  const float f = static_cast<float>(v);
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>(u >> 16);
}

template <int N>
void check_wgmma(uint64_t seed) {
  SCOPED_TRACE("N=" + std::to_string(N) + " seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::vector<int> A(64 * kK), B(N * kK);
  for (int& v : A) v = static_cast<int>(rng() % 9) - 4;
  for (int& v : B) v = static_cast<int>(rng() % 9) - 4;
  // A fragments: thread t of the warpgroup, warp w = t/32, g = (t%32)/4, q = t%4; register r holds
  // (row 16w+g (+8 for r odd), columns 2q, 2q+1 (+8 for r >= 2)) of k16 step kk.
  std::vector<uint32_t> frag(static_cast<size_t>(kK / 16) * 128 * 4);
  for (int kk = 0; kk < kK / 16; ++kk)
    for (int t = 0; t < 128; ++t)
      for (int r = 0; r < 4; ++r) {
        const int row = 16 * (t / 32) + (t % 32) / 4 + (r & 1) * 8, col = kk * 16 + 2 * (t % 4) + (r >> 1) * 8;
        frag[(kk * 128 + t) * 4 + r] = bf16_of_int(A[row * kK + col]) | (uint32_t{bf16_of_int(A[row * kK + col + 1])} << 16);
      }
  std::vector<uint16_t> hb(B.size());
  for (size_t i = 0; i < B.size(); ++i) hb[i] = bf16_of_int(B[i]);
  testing::DeviceBuffer da(frag.size() * 4), db(hb.size() * 2), dd(static_cast<size_t>(128 * N / 2) * 4), dmis(4);
  ASSERT_TRUE(da.upload(frag) && db.upload(hb));
  ASSERT_TRUE(dd.poison(0xFF));
  wgmma_probe_kernel<N><<<1, 128>>>(da.as<uint32_t>(), db.as<uint16_t>(), dd.as<float>(), dmis.as<int>());
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaDeviceSynchronize());
  const int mis = dmis.download<int>(1)[0];
  if (mis < 0) GTEST_SKIP() << "this binary has no sm_90a code";
  ASSERT_EQ(mis, 0) << "shared memory not 1024-byte aligned";
  const std::vector<float> d = dd.download<float>(static_cast<size_t>(128 * N / 2));
  int bad = 0;
  for (int t = 0; t < 128; ++t)
    for (int i = 0; i < N / 2; ++i) {
      const int j = i / 4, r = i % 4;
      const int row = 16 * (t / 32) + (t % 32) / 4 + (r >= 2 ? 8 : 0), col = 8 * j + 2 * (t % 4) + (r & 1);
      long want = 0;
      for (int k = 0; k < kK; ++k) want += static_cast<long>(A[row * kK + k]) * B[col * kK + k];
      if (d[t * (N / 2) + i] != static_cast<float>(want) && ++bad <= 5)
        ADD_FAILURE() << "D[" << row << "][" << col << "] = " << d[t * (N / 2) + i] << ", want " << want;
    }
  EXPECT_EQ(bad, 0);
}

TEST(WgmmaGpu, RegisterAFragmentsAndSwizzledSlicesGiveExactProducts) {
  FP4MOE_SKIP_WITHOUT_GPU();
  cudaDeviceProp prop{};
  CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  if (prop.major != 9) GTEST_SKIP() << "wgmma needs sm_90 (this GPU is sm_" << prop.major << prop.minor << ")";
  const uint64_t seed = devdata::fresh_seed();
  check_wgmma<8>(seed);
  check_wgmma<16>(seed + 1);
  check_wgmma<32>(seed + 2);
  check_wgmma<48>(seed + 3);
  check_wgmma<64>(seed + 4);
  check_wgmma<80>(seed + 5);
  check_wgmma<96>(seed + 6);
  check_wgmma<112>(seed + 7);
  check_wgmma<128>(seed + 8);
}

}  // namespace
}  // namespace fp4moe
