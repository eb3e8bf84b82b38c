// Unit tests of the docs' benchmark table that `fp4moe bench --markdown` writes (tools/bench/bench_markdown.h).
// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "tools/bench/bench_markdown.h"

namespace fp4moe::bench {
namespace {

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// A row timed at `plan`, its sweep's fastest that same config (times in us; 0: not timed).
MarkdownRow row(int64_t T, MarkdownPlan plan, double weight_bytes, double layer, double graph, double chain,
                double floor, double cublas) {
  MarkdownRow r;
  r.tokens = T;
  r.timed = r.fastest = plan;
  r.weight_bytes = weight_bytes;
  r.layer_us = r.fastest_us = layer;
  r.graph_us = graph;
  r.chain_us = chain;
  r.floor_us = floor;
  r.cublas_us = cublas;
  return r;
}

// Rows as an H100 gave TP8 T=1 and 16 (session 36, call 3), and the full layer's T=1 (down K in 2).
MarkdownTable h100_table() {
  MarkdownTable t;
  t.title = "GLM-5, TP8 shard on NVIDIA H100 80GB HBM3";
  t.read_gbs = 3098.4;
  t.cublas_tflops = 900.3;
  MarkdownRow t16 = row(16, {false, 8, 1}, 274.4e6, 121.8, 119.6, 115.8, 88.6, 351.1);
  t16.fastest = {false, 16, 0};
  t16.fastest_us = 120.9;
  t.rows = {row(1, {true, 0, 0}, 21233664.0, 16.128, 15.744, 12.574, 6.853, 36.48), t16,
            row(1, {false, 8, 2}, 169.9e6, 72.2, 0, 0, 0, 0)};
  return t;
}

TEST(BenchMarkdown, GivesTheDocsColumnsRowByRow) {
  const std::vector<std::string> l = lines(bench_markdown(h100_table()));
  ASSERT_EQ(l.size(), 2u + 2u + 3u);  // caption, blank, header, rule, three rows
  EXPECT_EQ(l[0],
            "GLM-5, TP8 shard on NVIDIA H100 80GB HBM3: read probe 3098 GB/s, cuBLAS bf16 8192^3 900 TFLOP/s "
            "(this run's); times in us");
  EXPECT_EQ(l[1], "");
  EXPECT_EQ(l[2],
            "| T | plan | active MB | layer | graph | chain | chain %BW | floor | cuBLAS bf16 | x | sweep's fastest |");
  EXPECT_EQ(l[3], "|---|---|---|---|---|---|---|---|---|---|---|");
  // 21.233664 MB in 12.574 us is 1688.7 GB/s, 54.5% of 3098.4; 36.48 / 16.128 = 2.26.
  EXPECT_EQ(l[4], "| 1 | direct path | 21.2 | 16.1 | 15.7 | 12.6 | 54.5% | 6.9 | 36.5 | 2.26x |  |");
  // The sweep's fastest against the layer column: 120.9 / 121.8 - 1 = -0.74%.
  EXPECT_EQ(l[5], "| 16 | bm8 | 274.4 | 121.8 | 119.6 | 115.8 | 76.5% | 88.6 | 351.1 | 2.88x | bm16 120.9 (-0.7%) |");
  // Not timed (0) prints "-"; so do %BW without a chain and x without cuBLAS; a split count above 1 is named.
  EXPECT_EQ(l[6], "| 1 | bm8, down K in 2 | 169.9 | 72.2 | - | - | - | - | - | - |  |");
}

TEST(BenchMarkdown, SaysWhatTheRunDidNotMeasure) {
  MarkdownTable t = h100_table();
  t.read_gbs = 0;
  t.cublas_tflops = 0;
  const std::vector<std::string> l = lines(bench_markdown(t));
  ASSERT_GE(l.size(), 5u);
  EXPECT_EQ(l[0],
            "GLM-5, TP8 shard on NVIDIA H100 80GB HBM3: read probe not measured, cuBLAS bf16 8192^3 not measured "
            "(this run's); times in us");
  // No probe, no %BW; cuBLAS's own time is the row's and still gives x.
  EXPECT_EQ(l[4], "| 1 | direct path | 21.2 | 16.1 | 15.7 | 12.6 | - | 6.9 | 36.5 | 2.26x |  |");
}

// A bench row of the sweep keys `timed` and `fastest` (kOwnPlanBlockM: the pass with nothing forced).
MoeBenchRow bench_row(SweepKey timed, double timed_us, SweepKey fastest, double fastest_us) {
  MoeBenchRow r;
  r.T = 16;
  r.heuristic_bm = 8;
  r.heuristic_splits = 1;
  r.timed_plan_splits = 1;
  r.block_m = timed.first;
  r.down_k_splits = timed.second;
  r.layer_us = timed_us;
  r.fastest_bm = fastest.first;
  r.fastest_splits = fastest.second;
  r.fastest_plan_splits = 1;
  r.fastest_us = fastest_us;
  r.timed_at_pick = true;
  r.weight_bytes = 274.4e6;
  r.layer_graph_us = 119.6;
  r.layer_graph_chain_us = 115.8;
  r.floor_us = 88.6;
  r.cublas_us = 351.1;
  return r;
}

TEST(BenchMarkdown, RowOfTheLayersPickWithAFasterTileSwept) {
  // TP8 T=16 on an H100: the pick (bm8, forced with the splits left to the layer) at 121.8 us, bm16 swept at 120.9.
  const MarkdownRow m = markdown_row(bench_row({8, 0}, 121.8, {16, 0}, 120.9), TimeAt::kLayerPick);
  EXPECT_EQ(markdown_plan_name(m.timed), "bm8");
  EXPECT_TRUE(m.fastest_differs());
  EXPECT_EQ(markdown_plan_name(m.fastest), "bm16");
  MarkdownTable t;
  t.title = "t";
  t.read_gbs = 3098.4;
  t.rows = {m};
  EXPECT_EQ(lines(bench_markdown(t)).back(),
            "| 16 | bm8 | 274.4 | 121.8 | 119.6 | 115.8 | 76.5% | 88.6 | 351.1 | 2.88x | bm16 120.9 (-0.7%) |");
}

TEST(BenchMarkdown, RowTimedAtTheFastestHasNoFastestColumn) {
  // `--time-at fastest`, or a pick that is the fastest: the timed key is the fastest key.
  const MarkdownRow m = markdown_row(bench_row({16, 0}, 120.9, {16, 0}, 120.9), TimeAt::kLayerPick);
  EXPECT_EQ(markdown_plan_name(m.timed), "bm16");
  EXPECT_FALSE(m.fastest_differs());
}

TEST(BenchMarkdown, RowOfTheDirectPath) {
  // The layer's own plan is the direct path: the pass with nothing forced is timed, and it is the fastest.
  MoeBenchRow r = bench_row({kOwnPlanBlockM, 0}, 16.1, {kOwnPlanBlockM, 0}, 16.1);
  r.heuristic_direct = true;
  const MarkdownRow m = markdown_row(r, TimeAt::kLayerPick);
  EXPECT_EQ(markdown_plan_name(m.timed), "direct path");
  EXPECT_FALSE(m.fastest_differs());
  // A forced tile as the timed config, slower than the direct path: the column names the direct path.
  r.block_m = 8;
  r.layer_us = 25.0;
  const MarkdownRow forced = markdown_row(r, TimeAt::kLayerPick);
  EXPECT_EQ(markdown_plan_name(forced.timed), "bm8");
  EXPECT_TRUE(forced.fastest_differs());
  EXPECT_EQ(markdown_plan_name(forced.fastest), "direct path");
}

TEST(BenchMarkdown, RowOfThePassWithNothingForcedNamesItsPlan) {
  // The pick not among the forced entries (a tuned split count, say): the unforced pass is timed, and its plan is the
  // layer's own block_m with the split count that plan runs.
  MoeBenchRow r = bench_row({kOwnPlanBlockM, 0}, 72.2, {kOwnPlanBlockM, 0}, 72.2);
  r.heuristic_bm = 8;
  r.heuristic_splits = 2;
  r.timed_plan_splits = 2;
  EXPECT_EQ(markdown_plan_name(markdown_row(r, TimeAt::kLayerPick).timed), "bm8, down K in 2");
  // ... and where a forced entry beat it, that entry is named by its key.
  r.fastest_bm = 16;
  r.fastest_splits = 0;
  r.fastest_us = 71.9;
  const MarkdownRow m = markdown_row(r, TimeAt::kLayerPick);
  EXPECT_TRUE(m.fastest_differs());
  EXPECT_EQ(markdown_plan_name(m.fastest), "bm16");
  // The unforced pass as the faster entry names the layer's own plan (the bench gives the splits that plan runs).
  MoeBenchRow f = bench_row({16, 0}, 73.0, {kOwnPlanBlockM, 0}, 72.2);
  f.heuristic_splits = 2;
  f.fastest_plan_splits = 2;
  EXPECT_EQ(markdown_plan_name(markdown_row(f, TimeAt::kLayerPick).fastest), "bm8, down K in 2");
}

TEST(BenchMarkdown, FastestForcedKeyIsNamedByThePlanItRuns) {
  // A forced block_m with the splits left to the layer (key {16, 0}) whose plan splits down's K in 2 (the full layer's
  // T=1): the column names the 2 splits, as the plan column does for the timed config.
  MoeBenchRow r = bench_row({8, 0}, 72.4, {16, 0}, 72.0);
  r.timed_plan_splits = 2;
  r.fastest_plan_splits = 2;
  const MarkdownRow m = markdown_row(r, TimeAt::kLayerPick);
  EXPECT_EQ(markdown_plan_name(m.timed), "bm8, down K in 2");
  EXPECT_EQ(markdown_plan_name(m.fastest), "bm16, down K in 2");
}

TEST(BenchMarkdown, MarksARowWhosePickWasNotSwept) {
  // `--block-m 16 32` leaves the pick (bm8) out: the bench times the fastest, and the row says so.
  MoeBenchRow r = bench_row({16, 0}, 120.9, {16, 0}, 120.9);
  r.timed_at_pick = false;
  MarkdownTable t;
  t.title = "t";
  t.rows = {markdown_row(r, TimeAt::kLayerPick)};
  EXPECT_EQ(lines(bench_markdown(t)).back(),
            "| 16 | bm16 (the pick was not swept) | 274.4 | 120.9 | 119.6 | 115.8 | - | 88.6 | 351.1 | 2.90x |  |");
  // Asked to time at the fastest, the same row is what was asked for.
  EXPECT_FALSE(markdown_row(r, TimeAt::kFastest).pick_not_swept);
}

TEST(BenchMarkdown, CaptionSaysHowTheRunWasTimed) {
  EXPECT_EQ(markdown_conditions(TimeAt::kLayerPick, "uniform", 1.2, "deterministic", 0),
            "timed at the layer's own pick; uniform routing; deterministic finalize");
  EXPECT_EQ(markdown_conditions(TimeAt::kFastest, "zipf", 1.2, "deterministic-bf16", 120),
            "timed at the sweep's fastest; zipf routing (s = 1.20); deterministic-bf16 finalize; the sm_120 configs");
  MarkdownTable t = h100_table();
  t.conditions = markdown_conditions(TimeAt::kLayerPick, "uniform", 1.2, "deterministic", 0);
  EXPECT_EQ(lines(bench_markdown(t))[0],
            "GLM-5, TP8 shard on NVIDIA H100 80GB HBM3: read probe 3098 GB/s, cuBLAS bf16 8192^3 900 TFLOP/s "
            "(this run's); timed at the layer's own pick; uniform routing; deterministic finalize; times in us");
}

TEST(BenchMarkdown, NamesPlans) {
  EXPECT_EQ(markdown_plan_name({true, 8, 2}), "direct path");  // (block_m and splits unused)
  EXPECT_EQ(markdown_plan_name({false, 128, 0}), "bm128");
  EXPECT_EQ(markdown_plan_name({false, 64, 1}), "bm64");
  EXPECT_EQ(markdown_plan_name({false, 8, 4}), "bm8, down K in 4");
}

TEST(BenchMarkdown, NoRowsGiveTheHeaderAlone) {
  MarkdownTable t = h100_table();
  t.rows.clear();
  EXPECT_EQ(lines(bench_markdown(t)).size(), 4u);
}

}  // namespace
}  // namespace fp4moe::bench
