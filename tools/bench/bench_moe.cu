// Benchmark of the NVFP4 MoE layer (GLM-5 shape) against the weight-bytes floor and a cuBLAS bf16 batched
// GEMM on the same active experts, all measured in the same run. Usage: fp4moe_bench_moe [T1,T2,...]
// (FP4MOE_BENCH_BLOCK_M=N times only that config; otherwise every block_m is swept and the rest timed at the layer's
// own pick; `fp4moe bench` has the full set of options.)
// SPDX-License-Identifier: Apache-2.0
#include <cstdio>
#include <cstdlib>

#include "bench/moe_bench.h"

int main(int argc, char** argv) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("bench_moe: no CUDA device, nothing to time\n");
    return 0;
  }
  fp4moe::bench::MoeBenchOptions o;
  if (argc > 1) {
    o.tokens.clear();
    for (char* s = argv[1]; *s;) {
      o.tokens.push_back(std::strtoll(s, &s, 10));
      if (*s == ',') ++s;
    }
  }
  if (const char* bm = std::getenv("FP4MOE_BENCH_BLOCK_M")) o.block_ms = {std::atoi(bm)};
  fp4moe::bench::MoeBenchDevice dev;
  std::vector<fp4moe::bench::MoeBenchRow> rows;
  const fp4moe::Status s = fp4moe::bench::run_moe_bench(o, &dev, &rows);
  if (!s.is_ok()) {
    std::fprintf(stderr, "bench_moe: %s\n", s.to_string().c_str());
    return 1;
  }
  fp4moe::bench::print_moe_bench(o, dev, rows, stdout);
  return 0;
}
