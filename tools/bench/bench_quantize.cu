// Benchmark of the NVFP4 activation quantizer against a device-to-device copy of the same bytes (same run).
// SPDX-License-Identifier: Apache-2.0
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "fp4moe/quantize.h"
#include "random_data.h"
#include "bench/bench_util.h"

using namespace fp4moe;

int main(int argc, char** argv) {
  const int64_t rows = argc > 1 ? std::atoll(argv[1]) : 16384;
  const int64_t k = argc > 2 ? std::atoll(argv[2]) : 7168;
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("bench_quantize: no CUDA device, nothing to time\n");
    return 0;
  }
  bench::print_device_header(bench::device_info());
  const size_t in_bytes = static_cast<size_t>(rows * k * 2), packed_bytes = static_cast<size_t>(rows * k / 2);
  // Two input/output sets (each > L2) alternate between iterations.
  constexpr int kSets = 2;
  const auto host = devdata::random_bf16_matrix(rows, k, 42);
  void *in[kSets], *packed[kSets], *scales[kSets], *ws = nullptr;
  float* gs = nullptr;
  const float one = 1.0f;
  BENCH_CUDA(cudaMalloc(&gs, 4));
  BENCH_CUDA(cudaMemcpy(gs, &one, 4, cudaMemcpyHostToDevice));
  BENCH_CUDA(cudaMalloc(&ws, 64));
  std::printf("\nNVFP4 quantize of a bf16 [%lld, %lld] tensor (%.1f MB in); GB/s counts bytes read + written\n\n",
              static_cast<long long>(rows), static_cast<long long>(k), in_bytes / 1e6);
  std::printf("%-34s %10s %12s %10s %10s\n", "case", "median us", "bytes (MB)", "GB/s", "vs copy");
  const double copy_gbs = bench::copy_bandwidth_gbs(in_bytes);
  std::printf("%-34s %10.1f %12.1f %10.0f %10.2f\n", "cudaMemcpy D2D (same input bytes)", 2.0 * in_bytes / copy_gbs / 1e3,
              2.0 * in_bytes / 1e6, copy_gbs, 1.0);
  for (ScaleLayout layout : {ScaleLayout::kLinear, ScaleLayout::kSwizzled128x4}) {
    const size_t sbytes = static_cast<size_t>(scale_buffer_bytes(rows, k, layout));
    for (int s = 0; s < kSets; ++s) {
      BENCH_CUDA(cudaMalloc(&in[s], in_bytes));
      BENCH_CUDA(cudaMalloc(&packed[s], packed_bytes));
      BENCH_CUDA(cudaMalloc(&scales[s], sbytes));
      BENCH_CUDA(cudaMemcpy(in[s], host.data(), in_bytes, cudaMemcpyHostToDevice));
    }
    for (bool compute : {false, true}) {
      QuantizeNvfp4Args a;
      a.rows = rows;
      a.k = k;
      a.scale_layout = layout;
      a.global_scale = gs;
      a.compute_global_scale = compute;
      const bench::Timing t = bench::time_events(
          [&](int i) {
            a.input = in[i % kSets];
            a.packed = packed[i % kSets];
            a.scales = scales[i % kSets];
            const Status st = QuantizeNvfp4::run(a, ws, 64, nullptr);
            if (!st.is_ok()) {
              std::fprintf(stderr, "%s\n", st.to_string().c_str());
              std::abort();
            }
          },
          5, 30);
      // Computing the global scale reads the input twice.
      const double bytes = static_cast<double>(in_bytes) * (compute ? 2 : 1) + packed_bytes + sbytes;
      const double gbs = bytes / (t.median_us * 1e3);
      char name[64];
      std::snprintf(name, sizeof(name), "quantize %s, gs %s", scale_layout_name(layout), compute ? "computed" : "given");
      std::printf("%-34s %10.1f %12.1f %10.0f %10.2f\n", name, t.median_us, bytes / 1e6, gbs, gbs / copy_gbs);
    }
    for (int s = 0; s < kSets; ++s) {
      BENCH_CUDA(cudaFree(in[s]));
      BENCH_CUDA(cudaFree(packed[s]));
      BENCH_CUDA(cudaFree(scales[s]));
    }
  }
  std::printf("\ntarget: quantize (gs given) >= 0.85 of the copy's GB/s\n");
  return 0;
}
