// The MoE layer benchmark harness shared by fp4moe_bench_moe, `fp4moe bench` and `fp4moe tune`: random
// NVFP4 weights, rotated routing sets, per-block_m sweeps, and the same-run baselines.
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "fp4moe/moe.h"
#include "bench/bench_util.h"
#include "bench/moe_bench_row.h"
#include "bench/timed_config.h"

namespace fp4moe::bench {

struct MoeBenchOptions {
  MoeShape shape{256, 6144, 2048, 8};  // GLM-5
  int moe_layers = 75;                 // for the projected decode throughput
  std::vector<int64_t> tokens = {1, 8, 64, 256, 512, 1024, 2048, 4096};
  std::string routing = "uniform";     // uniform, or zipf (expert popularity ~ 1 / rank^zipf_s)
  double zipf_s = 1.2;
  std::vector<int> block_ms;           // configs to time per T (empty: every built-in one)
  std::vector<int> down_k_splits;      // down K splits to time per block_m (empty: the layer's own choice)
  bool use_tuning_cache = true;        // false: the layer ignores any tuning cache (the tuner compares with the heuristic)
  bool baselines = true;               // read/copy bandwidth and cuBLAS (off for tuning)
  bool phases = true;                  // also time routing, gate_up and down alone
  bool graph = true;                   // also time the layer replayed from a CUDA graph
  int kernel_arch = 0;                 // MoeLayerOptions::kernel_arch of the layers timed (120: sm_120 configs on sm_90)
  FinalizeMode finalize = FinalizeMode::kDeterministic;  // the main layer's (the per-T note times the others)
  bool cluster_decode = true;          // MoeLayerOptions::cluster_decode of the layers timed
  bool direct_decode = true;           // MoeLayerOptions::direct_decode of the layers timed
  bool gate_up_tail = true;            // MoeLayerOptions::gate_up_tail of the layers timed
  bool warp_specialized = true;        // MoeLayerOptions::warp_specialized of the layers timed (the per-T note
                                       // also times the other setting where it changes the kernels)
  bool programmatic_prefill_finalize = false;  // MoeLayerOptions::programmatic_prefill_finalize of the layers timed
                                              // (the per-T note also times the other setting where it applies)
  // Which config the table, the graph and chain timings and the per-T note's variants are timed at, once every
  // config is swept (timed_config): the layer's own pick (what a forward pass with no block_m asked for runs: its
  // tuning cache's choice, else the heuristic; the sweep's fastest where the pick was not swept, and the row says
  // so), or the sweep's fastest (the tuner's choice).
  TimeAt time_at = TimeAt::kLayerPick;
  int min_iters = 20;                  // timed runs per measurement (median)
  double budget_s = 0;                 // > 0: stop before the next T once this much time has passed
  // Called before each T (index, count) and once at the end (count, count), e.g. for a progress bar.
  std::function<void(size_t, size_t, int64_t)> progress;
};

struct MoeBenchDevice {
  DeviceInfo info;
  double read_gbs = 0, copy_gbs = 0, cublas_tflops = 0;
  bool have_cublas = false;
  std::string cublas_error;
};

// Runs the benchmark; rows in the order of opts.tokens (fewer when the budget ran out). Returns a non-ok
// Status on a CUDA or layer error.
Status run_moe_bench(const MoeBenchOptions& opts, MoeBenchDevice* dev, std::vector<MoeBenchRow>* rows);

// The text table (the format tools/roofline.py reads), JSON, CSV and Markdown.
void print_moe_bench(const MoeBenchOptions& opts, const MoeBenchDevice& dev, const std::vector<MoeBenchRow>& rows, FILE* f);
std::string moe_bench_json(const MoeBenchOptions& opts, const MoeBenchDevice& dev, const std::vector<MoeBenchRow>& rows);
std::string moe_bench_csv(const MoeBenchDevice& dev, const std::vector<MoeBenchRow>& rows);
// docs/perf's table (bench_markdown.h); `title` names the shape (the device's name and how it was timed are added).
std::string moe_bench_markdown(const MoeBenchOptions& opts, const std::string& title, const MoeBenchDevice& dev,
                               const std::vector<MoeBenchRow>& rows);

}  // namespace fp4moe::bench
