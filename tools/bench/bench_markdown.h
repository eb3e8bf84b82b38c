// The table of docs/perf (shards.md, moe-decode.md) in Markdown, from bench rows (`fp4moe bench --markdown`).
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "moe_bench_row.h"
#include "timed_config.h"

namespace fp4moe::bench {

// A plan as the tables name it: "direct path", "bm8", "bm8, down K in 2" (split counts of 0 or 1 are not named).
struct MarkdownPlan {
  bool direct = false;    // the direct decode path (block_m and splits unused)
  int block_m = 0;
  int down_k_splits = 0;  // the down K splits the plan runs
};
std::string markdown_plan_name(const MarkdownPlan& p);

// One T of a bench run; a time of 0 is "not timed" and prints as "-".
struct MarkdownRow {
  int64_t tokens = 0;
  MarkdownPlan timed;          // the config the row is timed at (the layer's own pick unless `--time-at fastest`)
  bool pick_not_swept = false;  // the pick was asked for but not swept, so the row is timed at the fastest
  double weight_bytes = 0;     // the active experts' weight bytes (the floor's and %BW's numerator)
  double layer_us = 0, graph_us = 0, chain_us = 0, floor_us = 0, cublas_us = 0;
  // The sweep's fastest config and its stream-launched time; the table names it where it beat the timed config.
  MarkdownPlan fastest;
  double fastest_us = 0;
  bool fastest_differs() const { return fastest_us > 0 && fastest_us < layer_us; }
};

// A bench row as the table gives it, `requested` being the run's `--time-at`: the timed config's plan (the direct
// path, or the block_m and the down K splits its plan runs), the sweep's fastest where it beat the timed config (as
// the per-T note says it) named by the plan it runs, the times.
MarkdownRow markdown_row(const MoeBenchRow& r, TimeAt requested);

// How a run was timed, for the caption: where the rows were timed, the routing, the finalize mode and, for sm_120
// configs run on sm_90, the kernel arch ("timed at the layer's own pick; uniform routing; deterministic finalize").
std::string markdown_conditions(TimeAt time_at, const std::string& routing, double zipf_s, const std::string& finalize,
                                int kernel_arch);

struct MarkdownTable {
  std::string title;         // shape and device, as the bench's first line gives them
  std::string conditions;    // markdown_conditions (empty: none printed)
  double read_gbs = 0;       // the run's read probe (chain %BW), 0 if not measured
  double cublas_tflops = 0;  // the run's cuBLAS bf16 8192^3 rate (printed), 0 if not measured
  std::vector<MarkdownRow> rows;
};

// A caption line, a blank line, then the table: T | plan | active MB | layer | graph | chain | chain %BW | floor |
// cuBLAS bf16 | x | sweep's fastest. chain %BW is weight_bytes over chain_us at read_gbs; x is cublas_us over
// layer_us; the last column is "bm16 118.9 (-1.4%)" against layer_us where fastest_differs().
std::string bench_markdown(const MarkdownTable& t);

}  // namespace fp4moe::bench
