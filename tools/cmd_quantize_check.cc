// `fp4moe quantize-check`: quantize a built-in random bf16 tensor with the NVFP4 recipe and print the
// round-trip error; with a GPU, also check that the GPU quantizer is bit-exact with the host codec.
// SPDX-License-Identifier: Apache-2.0
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "fp4moe/bf16.h"
#include "fp4moe/nvfp4.h"
#include "nvfp4_reference.h"
#include "random_data.h"
#include "cli_args.h"
#include "commands.h"
#if FP4MOE_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "fp4moe/quantize.h"
#endif

namespace fp4moe::cli {
namespace {

struct Opts {
  int64_t rows = 512;
  int64_t k = 6144;
  uint64_t seed = 20260219;
  int row_exp = 2;  // rows scaled by 2^U(-row_exp, row_exp)
};

#if FP4MOE_HAVE_CUDA
#define CLI_CUDA(x)                                                                           \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::printf("  GPU check failed: %s: %s\n", #x, cudaGetErrorString(e_));               \
      return 1;                                                                               \
    }                                                                                         \
  } while (0)

// Returns 0 when the GPU result matches the host codec byte for byte, 1 otherwise, 2 without a GPU.
int gpu_check(const std::vector<uint16_t>& bits, const Opts& o, ScaleLayout layout, const Nvfp4Matrix& host) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    cudaGetLastError();
    return 2;
  }
  QuantizeNvfp4Args a;
  a.rows = o.rows;
  a.k = o.k;
  a.scale_layout = layout;
  a.compute_global_scale = true;
  void *in = nullptr, *packed = nullptr, *scales = nullptr, *ws = nullptr;
  float* gs = nullptr;
  const size_t sbytes = static_cast<size_t>(scale_buffer_bytes(o.rows, o.k, layout));
  CLI_CUDA(cudaMalloc(&in, bits.size() * 2));
  CLI_CUDA(cudaMalloc(&packed, host.packed.size()));
  CLI_CUDA(cudaMalloc(&scales, sbytes));
  CLI_CUDA(cudaMalloc(reinterpret_cast<void**>(&gs), 4));
  CLI_CUDA(cudaMalloc(&ws, QuantizeNvfp4::workspace_size(a)));
  CLI_CUDA(cudaMemcpy(in, bits.data(), bits.size() * 2, cudaMemcpyHostToDevice));
  CLI_CUDA(cudaMemset(packed, 0xA5, host.packed.size()));
  CLI_CUDA(cudaMemset(scales, 0xA5, sbytes));
  a.input = in;
  a.packed = packed;
  a.scales = scales;
  a.global_scale = gs;
  Status s = QuantizeNvfp4::run(a, ws, QuantizeNvfp4::workspace_size(a), nullptr);
  if (s.is_ok()) s = QuantizeNvfp4::check(ws, nullptr);
  std::vector<uint8_t> p(host.packed.size()), sc(sbytes);
  float g = 0;
  CLI_CUDA(cudaMemcpy(p.data(), packed, p.size(), cudaMemcpyDeviceToHost));
  CLI_CUDA(cudaMemcpy(sc.data(), scales, sc.size(), cudaMemcpyDeviceToHost));
  CLI_CUDA(cudaMemcpy(&g, gs, 4, cudaMemcpyDeviceToHost));
  cudaFree(in);
  cudaFree(packed);
  cudaFree(scales);
  cudaFree(gs);
  cudaFree(ws);
  if (!s.is_ok()) {
    std::printf("  GPU quantizer: %s\n", s.to_string().c_str());
    return 1;
  }
  return (p == host.packed && sc == host.scales && g == host.global_scale) ? 0 : 1;
}
#endif

// The built-in tensor lives in host memory several times over (bf16, fp32, the codec's output, the GPU's copy):
// at most 2^26 elements (about 1.2 GB in all).
constexpr int64_t kMaxElements = int64_t{1} << 26;

int run(const Opts& o) {
  if (o.k <= 0 || o.k % 16 != 0 || o.rows <= 0) {
    std::fprintf(stderr, "error: --rows must be > 0 and --k a positive multiple of 16\n");
    return kExitUsage;
  }
  if (o.rows > kMaxElements / o.k) {
    std::fprintf(stderr, "error: --rows x --k is at most 2^26 = %lld elements for the built-in check, got %lld x %lld\n",
                 static_cast<long long>(kMaxElements), static_cast<long long>(o.rows), static_cast<long long>(o.k));
    return kExitUsage;
  }
  const auto bits = devdata::random_bf16_matrix(o.rows, o.k, o.seed, o.row_exp);
  std::vector<float> x(bits.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = bf16_to_float(bits[i]);
  std::printf("NVFP4 round trip of a random bf16 tensor [%lld, %lld] (seed %llu; N(0,1) rows scaled by 2^U(-%d,%d), 1%% "
              "50x outliers)\n\n",
              static_cast<long long>(o.rows), static_cast<long long>(o.k), static_cast<unsigned long long>(o.seed),
              o.row_exp, o.row_exp);
  std::printf("%-14s %12s %14s %14s %10s %14s %12s\n", "scale layout", "global scale", "max |err|/amax", "rms err/rms x",
              "SNR (dB)", "blocks to zero", "GPU bit-exact");
  int rc = 0;
  for (ScaleLayout layout : {ScaleLayout::kLinear, ScaleLayout::kSwizzled128x4}) {
    Nvfp4Matrix m;
    const Status s = quantize_nvfp4(x.data(), o.rows, o.k, std::nullopt, layout, &m);
    if (!s.is_ok()) {
      std::fprintf(stderr, "error: %s\n", s.to_string().c_str());
      return 1;
    }
    double max_rel_block = 0, se = 0, sx = 0;
    int64_t flushed = 0;  // non-zero blocks whose scale rounded to 0: beyond E4M3's range below the tensor's amax
    for (int64_t r = 0; r < o.rows; ++r) {
      for (int64_t sc = 0; sc < o.k / 16; ++sc) {
        double amax = 0;
        for (int i = 0; i < 16; ++i) amax = std::fmax(amax, std::fabs(x[static_cast<size_t>(r * o.k + sc * 16 + i)]));
        const bool flush = amax > 0 && m.scale(r, sc) == 0;
        flushed += flush;
        for (int i = 0; i < 16; ++i) {
          const int64_t c = sc * 16 + i;
          const double xv = x[static_cast<size_t>(r * o.k + c)];
          const double e = reference::decode_exact(m, r, c) - xv;
          se += e * e;
          sx += xv * xv;
          if (amax > 0 && !flush) max_rel_block = std::fmax(max_rel_block, std::fabs(e) / amax);
        }
      }
    }
    std::string gpu = "no GPU";
#if FP4MOE_HAVE_CUDA
    const int g = gpu_check(bits, o, layout, m);
    gpu = g == 0 ? "yes" : g == 1 ? "NO" : "no GPU";
    if (g == 1) rc = 1;
#endif
    std::printf("%-14s %12.4g %14.4f %14.4f %10.2f %14lld %12s\n", scale_layout_name(layout), m.global_scale,
                max_rel_block, std::sqrt(se / sx), 10 * std::log10(sx / se), static_cast<long long>(flushed),
                gpu.c_str());
  }
  std::printf("\nmax |err|/amax is per 16-element block; E2M1's largest half-step (1 scale unit, between 4 and 6) is at\n"
              "most 1/5.65 = 0.177 of the block max (the scale rounds to 3 mantissa bits: amax maps to 5.65..6.4),\n"
              "for blocks whose UE4M3 scale is normal; subnormal scales are coarser. 'blocks to zero': non-zero blocks\n"
              "about 2^17 or more below the tensor's amax, whose scale underflows to 0 (try --row-exp 8).\n");
  return rc;
}

}  // namespace

void add_quantize_check(CLI::App& app, int* rc) {
  auto opts = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand("quantize-check", "Quantize a built-in random tensor; print the round-trip error");
  sub->add_option("--rows", opts->rows, "rows of the test tensor")->capture_default_str();
  sub->add_option("--k", opts->k, "columns (multiple of 16)")->capture_default_str();
  sub->add_option("--seed", opts->seed, "random seed")->capture_default_str();
  sub->add_option("--row-exp", opts->row_exp, "rows scaled by 2^U(-E, E)")->capture_default_str()->check(CLI::Range(0, 30));
  sub->callback([opts, rc]() { *rc = run(*opts); });
}

}  // namespace fp4moe::cli
