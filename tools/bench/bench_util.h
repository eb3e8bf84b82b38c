// Benchmark helpers: device header, CUDA-event timing (warm-up, median), copy and read bandwidth probes.
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cuda_runtime_api.h>

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "fp4moe/status.h"

namespace fp4moe::bench {

// Return a kCudaError Status from the enclosing function when a CUDA call fails.
#define BENCH_TRY(x)                                                                                            \
  do {                                                                                                          \
    cudaError_t e_ = (x);                                                                                       \
    if (e_ != cudaSuccess)                                                                                      \
      return ::fp4moe::Status(::fp4moe::StatusCode::kCudaError,                                                 \
                              std::string(#x) + " failed: " + cudaGetErrorString(e_));                          \
  } while (0)

#define BENCH_CUDA(x)                                                                          \
  do {                                                                                         \
    cudaError_t e_ = (x);                                                                      \
    if (e_ != cudaSuccess) {                                                                   \
      std::fprintf(stderr, "CUDA error %s at %s:%d: %s\n", #x, __FILE__, __LINE__, cudaGetErrorString(e_)); \
      std::abort();                                                                            \
    }                                                                                          \
  } while (0)

struct DeviceInfo {
  std::string name;
  int sms = 0, cc_major = 0, cc_minor = 0, sm_clock_mhz = 0, mem_clock_mhz = 0, bus_width_bits = 0;
  size_t l2_bytes = 0, smem_optin = 0;
  int driver = 0, runtime = 0;
};

DeviceInfo device_info();
void print_device_header(const DeviceInfo& d);

// The median of `v` (the upper one of an even count, as every timing here reports it); v must not be empty.
double median_of(std::vector<double> v);

struct Timing {
  double median_us = 0, min_us = 0, max_us = 0;
  int iters = 0;
  int warmup_calls = 0;            // the calls before the timed ones: a multiple of the warmup count (warm_up.h)
  std::vector<double> samples_us;  // every timed iteration's, in the order they ran (call warmup_calls + i at i)
};
// Warms up (warm_up.h: `warmup` calls, and more until they have kept the GPU at work min_warmup_ms), then runs fn
// `iters` times each bracketed by CUDA events on `stream`; median of those. fn receives the call index (use it to
// rotate buffers past L2; the timed calls start at a multiple of `warmup`, so a rotation of `warmup` buffers is at 0).
Timing time_events(const std::function<void(int)>& fn, int warmup, int iters, cudaStream_t stream = nullptr,
                   double min_warmup_ms = 0);

// Device-to-device cudaMemcpyAsync of `bytes`; returns GB/s counting bytes read + written.
double copy_bandwidth_gbs(size_t bytes, int iters = 20);
// A streaming read kernel (16-byte loads, sum kept live) over `bytes`; returns GB/s of bytes read, from the
// best of three medians of `iters` runs.
double read_bandwidth_gbs(size_t bytes, int iters = 20);

}  // namespace fp4moe::bench
