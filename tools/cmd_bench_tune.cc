// `fp4moe bench` (the MoE layer benchmark with JSON/CSV/roofline output) and `fp4moe tune` (fills the
// tuning cache with the fastest planner-accepted config per tokens bucket). Both need a GPU.
// SPDX-License-Identifier: Apache-2.0
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp4moe/file_io.h"
#include "fp4moe/planner.h"
#include "fp4moe/tuning.h"
#include "fp4moe/version.h"
#include "cli_args.h"
#include "commands.h"
#include "live_device.h"
#include "roofline_plot.h"
#include "bench/timed_config.h"  // (host only: the --time-at names)
#if FP4MOE_HAVE_CUDA
#include "bench/moe_bench.h"
#endif

namespace fp4moe::cli {
namespace {

// The finalize modes' names, for the CLI's choices (fp4moe::finalize_mode_name is the one spelling).
std::vector<std::string> finalize_mode_names() {
  std::vector<std::string> v;
  for (FinalizeMode f : kFinalizeModes) v.push_back(finalize_mode_name(f));
  return v;
}

struct BenchOpts {
  ModelOptions model;
  std::string routing = "uniform", json, csv, markdown, plot;
  std::string finalize = "deterministic";  // a fp4moe::finalize_mode_name
  std::vector<int64_t> tokens = {1, 8, 64, 256, 512, 1024, 2048, 4096};
  double zipf_s = 1.2;
  std::vector<int> block_ms;  // empty: every built-in one
  int iters = 20;
  bool no_warp_specialized = false;  // MoeLayerOptions::warp_specialized off
  bool no_cluster_decode = false;    // MoeLayerOptions::cluster_decode off
  bool no_direct_decode = false;     // MoeLayerOptions::direct_decode off
  bool no_gate_up_tail = false;      // MoeLayerOptions::gate_up_tail off
  bool programmatic_prefill_finalize = false;  // MoeLayerOptions::programmatic_prefill_finalize on
  bool graph = true;                 // also time CUDA-graph replay
  int kernel_arch = 0;               // MoeLayerOptions::kernel_arch
  std::vector<int> down_k_splits;  // empty: the layer's choice
  std::string time_at = bench::time_at_name(bench::TimeAt::kLayerPick);  // bench::MoeBenchOptions::time_at, by name
  std::string* json_text = nullptr;  // also hand the JSON to the caller (report)
};

struct TuneOpts {
  ModelOptions model;
  std::string cache, json;
  std::string finalize = "deterministic";  // the layers' finalize mode, a fp4moe::finalize_mode_name (cache key)
  int64_t max_tokens = 4096;
  double budget_s = 10;
  std::string* json_text = nullptr;  // the tuned table as JSON, for the caller (report)
};

#if FP4MOE_HAVE_CUDA  // (used by tune only, which needs the CUDA build)
// A progress bar on a terminal, plain lines otherwise.
void show_progress(size_t i, size_t n, int64_t tokens) {
  if (isatty(fileno(stdout))) {
    const int width = 30, done = static_cast<int>(width * i / (n ? n : 1));
    std::printf("\r[%s%s] %zu/%zu", std::string(static_cast<size_t>(done), '#').c_str(),
                std::string(static_cast<size_t>(width - done), ' ').c_str(), i, n);
    if (i < n) std::printf(" tokens %lld   ", static_cast<long long>(tokens));
    else std::printf("\n");
  } else if (i < n) {
    std::printf("timing tokens bucket %lld (%zu of %zu)\n", static_cast<long long>(tokens), i + 1, n);
  }
  std::fflush(stdout);
}
#endif

// Resolves the model, checks that every output path can be written (before anything is timed) and that there is
// a GPU; prints the one-line error itself and returns the exit code, or kExitOk to go on.
int prepare(const ModelOptions& model, SelectedModel* m, const std::vector<std::pair<std::string, bool>>& outputs) {
  if (const Status s = select_model(model, m); !s.is_ok()) {
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    return kExitUsage;
  }
  for (const auto& [path, create_folders] : outputs) {
    if (path.empty()) continue;
    if (const Status s = check_output_path(path, create_folders); !s.is_ok()) {
      std::fprintf(stderr, "error: %s\n", s.message().c_str());
      return kExitUsage;
    }
  }
#if !FP4MOE_HAVE_CUDA
  std::fprintf(stderr, "error: this fp4moe was built without CUDA (FP4MOE_CUDA=OFF): nothing to time\n");
  return kExitFailed;
#else
  if (!query_live_device().present) {
    std::fprintf(stderr, "error: no CUDA device: timing needs a GPU (fp4moe plan and fp4moe report work without one)\n");
    return kExitFailed;
  }
  return kExitOk;
#endif
}

int run_bench(const BenchOpts& o) {
  SelectedModel m;
  const std::vector<std::pair<std::string, bool>> outputs = {{o.json, false}, {o.csv, false}, {o.markdown, false},
                                                              {o.plot, false}};
  if (const int rc = prepare(o.model, &m, outputs); rc != kExitOk) return rc;
#if FP4MOE_HAVE_CUDA
  bench::MoeBenchOptions b;
  b.shape = m.shard;
  b.moe_layers = m.moe_layers;
  std::printf("%s\n", m.label().c_str());
  b.tokens = o.tokens;
  b.routing = o.routing;
  b.graph = o.graph;
  b.kernel_arch = o.kernel_arch;
  b.zipf_s = o.zipf_s;
  b.min_iters = o.iters;
  b.warp_specialized = !o.no_warp_specialized;
  b.cluster_decode = !o.no_cluster_decode;
  b.direct_decode = !o.no_direct_decode;
  b.gate_up_tail = !o.no_gate_up_tail;
  b.programmatic_prefill_finalize = o.programmatic_prefill_finalize;
  finalize_mode_from_name(o.finalize, &b.finalize);  // (CLI11 checked the name)
  if (!o.block_ms.empty()) b.block_ms = o.block_ms;
  b.down_k_splits = o.down_k_splits;
  b.time_at = o.time_at == bench::time_at_name(bench::TimeAt::kFastest) ? bench::TimeAt::kFastest : bench::TimeAt::kLayerPick;
  bench::MoeBenchDevice dev;
  std::vector<bench::MoeBenchRow> rows;
  if (const Status s = bench::run_moe_bench(b, &dev, &rows); !s.is_ok()) {
    std::fprintf(stderr, "error: %s\n", s.to_string().c_str());
    return kExitFailed;
  }
  bench::print_moe_bench(b, dev, rows, stdout);
  if (!o.json.empty() || o.json_text) {
    const std::string json = bench::moe_bench_json(b, dev, rows);
    if (!o.json.empty() && !write_text_file(o.json, json)) return kExitFailed;
    if (o.json_text) *o.json_text = json;
  }
  if (!o.csv.empty() && !write_text_file(o.csv, bench::moe_bench_csv(dev, rows))) return kExitFailed;
  if (!o.markdown.empty() && !write_text_file(o.markdown, bench::moe_bench_markdown(b, m.label(), dev, rows)))
    return kExitFailed;
  if (!o.plot.empty()) {
    std::fflush(stdout);  // the table first, then the script's own line
    if (const Status st = draw_roofline(bench::moe_bench_json(b, dev, rows), o.plot); !st.is_ok()) {
      std::fprintf(stderr, "error: the roofline plot failed: %s\n", st.message().c_str());
      return kExitFailed;
    }
  }
  return kExitOk;
#else
  return kExitFailed;
#endif
}

int run_tune(const TuneOpts& o) {
  SelectedModel m;
  if (const int rc = prepare(o.model, &m, {{o.cache.empty() ? default_tuning_cache_path() : o.cache, true}, {o.json, false}});
      rc != kExitOk)
    return rc;
#if FP4MOE_HAVE_CUDA
  const LiveDevice live = query_live_device();
  const ArchInfo* arch = nullptr;
  if (const Status s = find_arch(std::to_string(live.cc), &arch); !s.is_ok()) {
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    return kExitFailed;
  }
  std::vector<int> ok;
  std::vector<std::string> rejected;
  if (const Status s = tuning_candidates(m.shard, *arch, &ok, &rejected); !s.is_ok()) {
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    return kExitFailed;
  }
  for (const auto& r : rejected) std::printf("not tried: %s\n", r.c_str());
  if (ok.empty()) {
    std::fprintf(stderr, "error: no kernel config the planner accepts for %s on %s\n", m.label().c_str(), arch->name);
    return kExitFailed;
  }
  bench::MoeBenchOptions b;
  b.shape = m.shard;
  b.moe_layers = m.moe_layers;
  b.tokens.clear();
  for (int64_t t = 1; t <= o.max_tokens; t *= 2) b.tokens.push_back(t);
  b.block_ms = ok;
  // Split-K of the down GEMM is part of the tactic space: 1, 2 and 4 where they divide I / 256.
  b.down_k_splits = {1, 2, 4};
  b.use_tuning_cache = false;  // the heuristic column is the built-in heuristic, not an older cache
  b.time_at = bench::TimeAt::kFastest;  // (the tuned choice is the sweep's fastest)
  finalize_mode_from_name(o.finalize, &b.finalize);  // (CLI11 checked the name)
  b.baselines = false;
  b.phases = false;
  b.graph = false;
  b.min_iters = 10;
  b.budget_s = o.budget_s;
  b.progress = show_progress;
  const auto t0 = std::chrono::steady_clock::now();
  bench::MoeBenchDevice dev;
  std::vector<bench::MoeBenchRow> rows;
  if (const Status s = bench::run_moe_bench(b, &dev, &rows); !s.is_ok()) {
    std::fprintf(stderr, "error: %s\n", s.to_string().c_str());
    return kExitFailed;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  TuningEnvironment env{dev.info.name, dev.info.sms, dev.info.driver, dev.info.runtime, FP4MOE_VERSION_STRING};
  const std::string path = o.cache.empty() ? default_tuning_cache_path() : o.cache;
  TuningCache cache;
  std::string note;
  if (const Status s = TuningCache::load(path, env, &cache, &note); !s.is_ok()) {
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    return kExitFailed;
  }
  if (!note.empty()) std::printf("%s\n", note.c_str());
  std::printf("\n%s on %s: %zu tokens buckets, %.1f s\n%8s %14s %12s %10s %8s %12s %8s\n", m.label().c_str(), dev.info.name.c_str(),
              rows.size(), secs, "tokens", "heuristic bm", "us", "tuned bm", "splits", "us", "gain");
  nlohmann::json jt = {{"gpu", dev.info.name}, {"seconds", secs}, {"cache", o.cache.empty() ? default_tuning_cache_path() : o.cache}};
  for (const auto& r : rows) {
    // The heuristic: its block_m and down K splits (the tuner times 1, 2 and 4 splits, so both are in the sweep).
    const auto h = r.layer_us_by_config.find({r.heuristic_bm, r.heuristic_splits});
    const double hus = h == r.layer_us_by_config.end() ? 0 : h->second;
    const int splits = r.down_k_splits > 0 ? r.down_k_splits : 1;
    jt["buckets"].push_back({{"tokens", r.T}, {"heuristic_block_m", r.heuristic_bm},
                             {"heuristic_down_k_splits", r.heuristic_splits}, {"heuristic_us", hus},
                             {"tuned_block_m", r.block_m}, {"tuned_down_k_splits", splits}, {"tuned_us", r.layer_us},
                             {"layer_takes_direct_decode", r.heuristic_direct}});
    cache.record(m.shard, b.finalize, r.T, TunedChoice{r.block_m, r.layer_us, splits});
    std::printf("%8lld %14d %12.1f %10d %8d %12.1f %7.2fx%s\n", static_cast<long long>(r.T), r.heuristic_bm, hus,
                r.block_m, splits, r.layer_us, hus > 0 ? hus / r.layer_us : 0.0,
                r.heuristic_direct ? "  (the layer runs the direct decode path here; this entry serves direct_decode off)" : "");
  }
  if (rows.size() < b.tokens.size())
    std::printf("the %.0f s budget ran out after %zu of %zu buckets: the others keep the heuristic (--budget-s)\n",
                o.budget_s, rows.size(), b.tokens.size());
  if (const Status s = cache.save(path); !s.is_ok()) {
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    return kExitFailed;
  }
  std::printf("wrote %s (%zu entries)\n", path.c_str(), cache.size());
  if (!o.json.empty() && !write_text_file(o.json, jt.dump(2) + "\n")) return kExitFailed;
  if (o.json_text) *o.json_text = jt.dump();
  return kExitOk;
#else
  return kExitFailed;
#endif
}

}  // namespace

int tune_model(const ModelOptions& model, double budget_s, std::string* json) {
  TuneOpts o;
  o.model = model;
  o.budget_s = budget_s;
  o.json_text = json;
  return run_tune(o);
}

int bench_model(const ModelOptions& model, const std::string& plot, std::string* json) {
  BenchOpts o;
  o.model = model;
  o.plot = plot;
  o.json_text = json;
  return run_bench(o);
}

void add_bench_and_tune(CLI::App& app, int* rc) {
  auto b = std::make_shared<BenchOpts>();
  CLI::App* bench = app.add_subcommand("bench", "Benchmark the MoE layer against the bandwidth floor and cuBLAS bf16 (GPU)");
  add_model_options(bench, &b->model);
  bench->add_option("--tokens", b->tokens, "tokens per step, e.g. --tokens 1 8 64")->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  bench->add_flag("!--no-graph", b->graph, "skip the CUDA-graph replay timing");
  bench->add_option("--kernel-arch", b->kernel_arch,
                    "120: time the sm_120 configs on this sm_90 GPU, one block per SM (builds with FP4MOE_SM120_ON_SM90)")
      ->check(CLI::IsMember({0, 120}));
  bench->add_option("--routing", b->routing, "uniform or zipf")->check(CLI::IsMember({"uniform", "zipf"}))->capture_default_str();
  bench->add_option("--zipf-s", b->zipf_s, "Zipf exponent")->check(FiniteRange(0.0, 10.0))->capture_default_str();
  bench->add_option("--block-m", b->block_ms, "time only these block_ms, e.g. 64 128 (default: every built-in one)")
      ->check(CLI::IsMember(shipped_block_ms()));
  bench->add_option("--finalize", b->finalize,
                    "the layer's finalize: deterministic (fp32 partials), deterministic-bf16 (bf16 partials) or atomic; "
                    "the per-T note times the others")
      ->check(CLI::IsMember(finalize_mode_names()))
      ->capture_default_str();
  bench->add_flag("--no-cluster-decode", b->no_cluster_decode,
                  "sm_90: time the two tiled GEMM kernels where the layer would run gate_up and down as one kernel of "
                  "clusters (a TP shard's decode step with I = 256, at most 64 pairs)");
  bench->add_flag("--no-direct-decode", b->no_direct_decode,
                  "time the tiled kernels where the layer would run the direct decode path (T <= 2 on a TP or EP shard) "
                  "or down and the finalize as one kernel after the tiled gate_up (a TP shard's step of up to 32 pairs)");
  bench->add_flag("--no-gate-up-tail", b->no_gate_up_tail,
                  "sm_90: time gate_up's last partial round of tiles whole, one block each, where the layer would split "
                  "their K in a second kernel (a shard's decode step of at most 64 tokens whose gate_up items fill 1 to 3 "
                  "rounds: T=16..64 on GLM-5's TP8 and EP8)");
  bench->add_flag("--programmatic-prefill-finalize", b->programmatic_prefill_finalize,
                  "sm_90: launch the finalize after a prefill tile's down (block_m >= 64) as a programmatic dependent "
                  "too, where the layer launches it plain (the per-T note times the other setting either way)");
  bench->add_flag("--no-warp-specialized", b->no_warp_specialized,
                  "sm_90: time the multistage kernels for block_m 16, 32 and 64 instead of the warp-specialized ones");
  bench->add_option("--down-k-splits", b->down_k_splits,
                    "time these down-GEMM K split counts per block_m instead of the layer's choice, e.g. 1 2 4 (without --block-m "
                    "the layer's own plan is timed too where none of them is it)")
      ->check(CLI::IsMember({1, 2, 4, 8}));
  bench->add_option("--time-at", b->time_at,
                    "after the block_m sweep, time the table, the CUDA graphs and the per-T variants at the layer's own "
                    "pick (what a forward pass with nothing forced runs) or at the sweep's fastest config (tune's criterion)")
      ->check(CLI::IsMember(std::vector<std::string>(std::begin(bench::kTimeAtNames), std::end(bench::kTimeAtNames))))
      ->capture_default_str();
  bench->add_option("--iters", b->iters, "timed runs per measurement (median)")->check(CLI::Range(5, 1000))->capture_default_str();
  bench->add_option("--json", b->json, "write the results as JSON");
  bench->add_option("--csv", b->csv, "write the results as CSV");
  bench->add_option("--markdown", b->markdown,
                    "write the table docs/perf gives (Markdown: plan, layer, graph, chain, %BW, floor, cuBLAS bf16)");
  bench->add_option("--plot", b->plot, "draw the roofline to this PNG (Debian python3-matplotlib)");
  bench->callback([b, rc]() { *rc = run_bench(*b); });

  auto t = std::make_shared<TuneOpts>();
  CLI::App* tune = app.add_subcommand("tune", "Time every planner-accepted config per tokens bucket; fill the tuning cache (GPU)");
  add_model_options(tune, &t->model);
  tune->add_option("--max-tokens", t->max_tokens, "largest tokens bucket (powers of two from 1)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 16))->capture_default_str();
  tune->add_option("--cache", t->cache, "cache file (default: $FP4MOE_CACHE_DIR, $XDG_CACHE_HOME/fp4moe or ~/.cache/fp4moe)");
  tune->add_option("--json", t->json, "also write the tuned table as JSON");
  tune->add_option("--budget-s", t->budget_s, "time budget per shape: buckets not reached keep the heuristic")
      ->check(FiniteRange(1.0, 3600.0))->capture_default_str();
  tune->add_option("--finalize", t->finalize,
                   "the finalize mode to tune for (a layer adopts the cache's choices for its own mode only)")
      ->check(CLI::IsMember(finalize_mode_names()))
      ->capture_default_str();
  tune->callback([t, rc]() { *rc = run_tune(*t); });
}

}  // namespace fp4moe::cli
