// One T of `fp4moe bench`: its sweep, timed config and numbers (host-only: the writers are tested without a GPU).
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <map>

#include "timed_config.h"

namespace fp4moe::bench {

struct MoeBenchRow {
  int64_t T = 0;
  double active = 0;        // this shard's experts with a token (mean over the routing sets)
  double local_pairs = 0;   // (token, expert) pairs on this shard's experts (all pairs without expert parallelism)
  int max_per_expert = 0;
  int heuristic_splits = 1;          // the down K splits the layer picks by itself for T
  int block_m = 0, heuristic_bm = 0;  // the timed config's sweep key (MoeBenchOptions::time_at), and the block_m the
                                      // layer picks by itself (its tuning cache, else the heuristic; the tuner's
                                      // layer reads no cache); block_m kOwnPlanBlockM: the pass with nothing forced
  int timed_plan_splits = 0;          // the down K splits the timed config's plan runs
  bool heuristic_direct = false;      // the layer's own plan for T is the direct decode path
  // The sweep's fastest config and its time (block_m kOwnPlanBlockM: the pass with nothing forced), whichever is timed.
  int fastest_bm = 0, fastest_splits = 0;
  int fastest_plan_splits = 0;  // the down K splits the fastest config's plan runs (its key's 0: the layer's choice)
  double fastest_us = 0;
  bool timed_at_pick = false;  // the timed config runs the layer's own plan (false: the fastest, asked for or the
                               // pick not swept)
  TimeAt timed_at() const { return timed_at_pick ? TimeAt::kLayerPick : TimeAt::kFastest; }  // (JSON and CSV)
  // The timed config is the direct decode path (the unforced pass, where the layer's own plan takes that path).
  bool timed_direct() const { return key_direct(block_m); }
  // A sweep key's plan is the direct decode path (the unforced pass, where the layer's own plan takes that path).
  bool key_direct(int key) const { return key == kOwnPlanBlockM && heuristic_direct; }
  // The block_m a sweep key's plan runs, as the table, JSON and CSV give it (0: the direct decode path).
  int plan_block_m(int key) const { return key != kOwnPlanBlockM ? key : heuristic_direct ? 0 : heuristic_bm; }
  // (block_m, down K splits; 0 = the layer's choice); block_m kOwnPlanBlockM: the pass with nothing forced (the
  // direct decode path where the layer takes it; swept where no forced entry runs the layer's own plan)
  SweepTimes layer_us_by_config;
  // Per block_m, the best over the timed split counts.
  std::map<int, double> layer_us_by_bm() const {
    std::map<int, double> by;
    for (const auto& [cfg, us] : layer_us_by_config)
      if (!by.count(cfg.first) || us < by[cfg.first]) by[cfg.first] = us;
    return by;
  }
  int down_k_splits = 0;                                      // of the timed config (0 = the layer's choice)
  double route_us = 0, gate_up_us = 0, down_us = 0, layer_us = 0;  // (layer_us: the timed config's sweep entry)
  double layer_graph_us = 0;  // the timed config's forward pass replayed from a CUDA graph (0: not timed)
  // Per pass of one CUDA graph holding graph_chain_passes forward passes back to back (one per routing set, all on one
  // workspace), as a model's step graph holds its layers: the graph launch is shared, each pass starts as the one before
  // it drains (0: not timed).
  double layer_graph_chain_us = 0;
  int graph_chain_passes = 0;
  // Each routing set's median among the single-pass graph launches (which cycle through the sets), then the mean,
  // least and most of those over the sets: the chain runs every set once, so its time per pass compares with the mean,
  // where layer_graph_us is the median of all the launches (0: not timed).
  double layer_graph_set_mean_us = 0, layer_graph_set_min_us = 0, layer_graph_set_max_us = 0;
  double weight_bytes = 0, floor_us = 0, gbs = 0, pct_bw = 0, tflops = 0, flop_per_byte = 0;
  double cublas_gate_up_us = 0, cublas_us = 0;
  // The variants below are timed (when phases are; 0 otherwise) at the timed config in rounds, each round
  // the main layer and then every variant once, and each reported as the median of its rounds; layer_main_us
  // is the main layer's median of the same rounds, what the variants are compared with. Every variant is a
  // layer of its own, with its own copy of the weights: layer_twin_us is one with the main layer's options,
  // so its difference from layer_main_us is what a copy of the weights alone changes.
  double layer_main_us = 0, layer_twin_us = 0;
  // Without programmatic dependent launch, and with the atomic finalize.
  double layer_plain_us = 0, layer_atomic_us = 0;
  // With the other deterministic finalize (bf16 partials where the main layer has fp32 ones, and back); 0 when the
  // main layer's finalize is atomic.
  double layer_other_det_us = 0;
  double layer_other_ws_us = 0;  // with MoeLayerOptions::warp_specialized flipped where that changes the kernels, else 0
  double layer_gate_up_unsplit_us = 0;  // with gate_up's K not split where the layer splits it (gate_up_k_splits), else 0
  int gate_up_k_splits = 1;  // the layer's gate_up K splits at the timed block_m
  double layer_tiled_us = 0;  // with the tiled kernels (MoeLayerOptions::direct_decode off) where the timed config is direct, else 0
  // with MoeLayerOptions::programmatic_prefill_finalize flipped where the timed plan's finalize launch changes with it
  // (a prefill tile's deterministic finalize), else 0
  double layer_other_finalize_launch_us = 0;
  double layer_unfused_us = 0;  // with the routing kernel where the timed config fuses routing (MoeLayer::fuses_routing), else 0
  double tokens_per_s = 0;  // projected: T / (layer time x MoE layers)
};

}  // namespace fp4moe::bench
