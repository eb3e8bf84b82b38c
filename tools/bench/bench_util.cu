// Benchmark helpers (see bench_util.h).
// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <chrono>
#include <cstdint>

#include "bench/bench_util.h"
#include "bench/warm_up.h"

namespace fp4moe::bench {

DeviceInfo device_info() {
  DeviceInfo d;
  int dev = 0;
  BENCH_CUDA(cudaGetDevice(&dev));
  cudaDeviceProp p{};
  BENCH_CUDA(cudaGetDeviceProperties(&p, dev));
  d.name = p.name;
  d.sms = p.multiProcessorCount;
  d.cc_major = p.major;
  d.cc_minor = p.minor;
  BENCH_CUDA(cudaDeviceGetAttribute(&d.sm_clock_mhz, cudaDevAttrClockRate, dev));
  BENCH_CUDA(cudaDeviceGetAttribute(&d.mem_clock_mhz, cudaDevAttrMemoryClockRate, dev));
  BENCH_CUDA(cudaDeviceGetAttribute(&d.bus_width_bits, cudaDevAttrGlobalMemoryBusWidth, dev));
  d.sm_clock_mhz /= 1000;
  d.mem_clock_mhz /= 1000;
  d.l2_bytes = static_cast<size_t>(p.l2CacheSize);
  d.smem_optin = p.sharedMemPerBlockOptin;
  BENCH_CUDA(cudaDriverGetVersion(&d.driver));
  BENCH_CUDA(cudaRuntimeGetVersion(&d.runtime));
  return d;
}

void print_device_header(const DeviceInfo& d) {
  std::printf("device: %s (sm_%d%d), %d SMs, SM clock %d MHz, memory clock %d MHz x %d bit, L2 %.0f MB, "
              "smem/block opt-in %zu B, driver %d, runtime %d\n",
              d.name.c_str(), d.cc_major, d.cc_minor, d.sms, d.sm_clock_mhz, d.mem_clock_mhz, d.bus_width_bits,
              d.l2_bytes / 1e6, d.smem_optin, d.driver, d.runtime);
}

Timing time_events(const std::function<void(int)>& fn, int warmup, int iters, cudaStream_t stream,
                   double min_warmup_ms) {
  const auto start = std::chrono::steady_clock::now();
  const int warmed = warm_up(
      fn, [&] { BENCH_CUDA(cudaStreamSynchronize(stream)); },
      [&] { return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count(); },
      warmup, min_warmup_ms);
  BENCH_CUDA(cudaGetLastError());
  std::vector<cudaEvent_t> ev(2 * static_cast<size_t>(iters));
  for (auto& e : ev) BENCH_CUDA(cudaEventCreate(&e));
  for (int i = 0; i < iters; ++i) {
    BENCH_CUDA(cudaEventRecord(ev[2 * i], stream));
    fn(warmed + i);
    BENCH_CUDA(cudaEventRecord(ev[2 * i + 1], stream));
  }
  BENCH_CUDA(cudaStreamSynchronize(stream));
  BENCH_CUDA(cudaGetLastError());
  std::vector<double> us(static_cast<size_t>(iters));
  for (int i = 0; i < iters; ++i) {
    float ms = 0;
    BENCH_CUDA(cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]));
    us[static_cast<size_t>(i)] = ms * 1e3;
  }
  for (auto& e : ev) BENCH_CUDA(cudaEventDestroy(e));
  Timing t;
  t.iters = iters;
  t.warmup_calls = warmed;
  t.median_us = median_of(us);
  t.min_us = *std::min_element(us.begin(), us.end());
  t.max_us = *std::max_element(us.begin(), us.end());
  t.samples_us = std::move(us);
  return t;
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double copy_bandwidth_gbs(size_t bytes, int iters) {
  void *a = nullptr, *b = nullptr;
  BENCH_CUDA(cudaMalloc(&a, bytes));
  BENCH_CUDA(cudaMalloc(&b, bytes));
  BENCH_CUDA(cudaMemset(a, 1, bytes));
  const Timing t = time_events([&](int) { BENCH_CUDA(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice)); }, 3, iters);
  BENCH_CUDA(cudaFree(a));
  BENCH_CUDA(cudaFree(b));
  return 2.0 * bytes / (t.median_us * 1e3);
}

namespace {
// Each thread keeps 4 independent 16-byte loads in flight per step; the xor keeps them live.
__global__ void read_probe_kernel(const uint4* __restrict__ p, int64_t n, uint32_t* sink) {
  uint32_t acc = 0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    uint4 v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) v[j] = __ldcs(p + i + j * stride);  // streaming: do not keep in L2
#pragma unroll
    for (int j = 0; j < 4; ++j) acc ^= v[j].x ^ v[j].y ^ v[j].z ^ v[j].w;
  }
  for (; i < n; i += stride) {
    const uint4 v = p[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678u) *sink = acc;  // practically never true; stops the loads being removed
}
}  // namespace

double read_bandwidth_gbs(size_t bytes, int iters) {
  void* a = nullptr;
  uint32_t* sink = nullptr;
  BENCH_CUDA(cudaMalloc(&a, bytes));
  BENCH_CUDA(cudaMalloc(&sink, 4));
  BENCH_CUDA(cudaMemset(a, 1, bytes));
  int dev = 0, sms = 0;
  BENCH_CUDA(cudaGetDevice(&dev));
  BENCH_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const int64_t n = static_cast<int64_t>(bytes / 16);
  // The best of three medians: a single median can come out low (docs/perf/history.md has one), and a low probe
  // would overstate every % of bandwidth printed beside it.
  double best_us = 0;
  for (int trial = 0; trial < 3; ++trial) {
    const Timing t = time_events(
        [&](int) {
          read_probe_kernel<<<sms * 4, 512>>>(static_cast<const uint4*>(a), n, sink);
          BENCH_CUDA(cudaGetLastError());
        },
        3, iters);
    if (trial == 0 || t.median_us < best_us) best_us = t.median_us;
  }
  BENCH_CUDA(cudaFree(a));
  BENCH_CUDA(cudaFree(sink));
  return static_cast<double>(bytes) / (best_us * 1e3);
}

}  // namespace fp4moe::bench
