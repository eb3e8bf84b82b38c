// `fp4moe report`: the default job on a model preset (GLM-5 by default): the shared-memory plan of every
// kernel config on every arch, CUTLASS's sm_120 tactics with verdicts, and the layer's memory floors on
// every named GPU; with a GPU also a bounded tuning run and the benchmark with its roofline plot. Printed,
// and written to fp4moe-report.json (and fp4moe-roofline.png) in the current folder.
// SPDX-License-Identifier: Apache-2.0
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cutlass_model.h"
#include "fp4moe/file_io.h"
#include "fp4moe/planner.h"
#include "fp4moe/tuning.h"
#include "fp4moe/version.h"
#include "cli_args.h"
#include "commands.h"
#include "live_device.h"

namespace fp4moe::cli {
namespace {

struct Opts {
  std::string model = "glm5";
  std::string out = "fp4moe-report.json";
  std::string plot = "fp4moe-roofline.png";
  double tune_budget_s = 30;
  bool timing = true;
};

int run(const Opts& o) {
  const ModelPreset* m = nullptr;
  if (const Status s = find_model(o.model, &m); !s.is_ok()) {
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    return kExitUsage;
  }
  // Every file the report writes can be written, before anything runs (the tuning step rewrites the default
  // tuning cache; a bad --out found after it would leave that done and the report unwritten).
  const LiveDevice live = query_live_device();
  const bool timing = live.present && o.timing;
  for (const auto& [path, folders] : std::vector<std::pair<std::string, bool>>{
           {o.out, false}, {timing ? o.plot : std::string(), false}, {timing ? default_tuning_cache_path() : std::string(), true}}) {
    if (path.empty()) continue;
    if (const Status s = check_output_path(path, folders); !s.is_ok()) {
      std::fprintf(stderr, "error: %s\n", s.message().c_str());
      return kExitUsage;
    }
  }
  nlohmann::json js;
  int rc_timing = 0;  // a failed tuning or benchmark step: the report is still written, then this is returned
  js["fp4moe"] = FP4MOE_VERSION_STRING;
  js["model"] = {{"key", m->key}, {"name", m->name}, {"experts", m->shape.num_experts}, {"hidden", m->shape.hidden},
                 {"intermediate", m->shape.intermediate}, {"top_k", m->shape.top_k}, {"moe_layers", m->moe_layers}};
  std::printf("fp4moe %s report: %s (E=%lld H=%lld I=%lld top-%lld, %d MoE layers)\n\n", FP4MOE_VERSION_STRING, m->name,
              static_cast<long long>(m->shape.num_experts), static_cast<long long>(m->shape.hidden),
              static_cast<long long>(m->shape.intermediate), static_cast<long long>(m->shape.top_k), m->moe_layers);

  // 1. Our kernels on every arch: how many shipped configs fit, the largest plan, the blocks per SM.
  std::printf("%-8s %-24s %12s %10s %s\n", "arch", "GPUs", "smem/block", "configs", "largest plan (bytes, blocks/SM)");
  for (const auto& a : arch_table()) {
    std::vector<KernelPlan> plans;
    if (const Status s = plan_kernels(m->shape, a, std::nullopt, std::nullopt, &plans); !s.is_ok()) {
      std::fprintf(stderr, "error: %s\n", s.message().c_str());
      return kExitUsage;
    }
    int fit = 0;
    const KernelPlan* largest = nullptr;
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& p : plans) {
      fit += p.fits;
      if (!largest || p.smem.total > largest->smem.total) largest = &p;
      arr.push_back({{"gemm", p.gemm}, {"tile", {p.block_m, p.block_n, p.block_k}}, {"stages", p.stages},
                     {"smem_bytes", p.smem.total}, {"fits", p.fits}, {"shipped", p.shipped}, {"reason", p.reason}});
    }
    js["plans"][a.name] = {{"limit", a.smem_per_block}, {"kernels_built", arch_has_kernels(a.cc)}, {"plans", arr}};
    char cfg[32], big[64];
    std::snprintf(cfg, sizeof(cfg), "%d/%zu fit", fit, plans.size());
    std::snprintf(big, sizeof(big), "%s B, %d", with_commas(largest->smem.total).c_str(), largest->blocks_per_sm);
    std::printf("%-8s %-24s %12s %10s %s%s\n", a.name, a.example, with_commas(a.smem_per_block).c_str(), cfg, big,
                arch_has_kernels(a.cc) ? "" : "  (plan only: no kernels built for it)");
  }

  // 2. CUTLASS's sm_120 MoE tactics.
  std::vector<CutlassSm120MoePlan> cut;
  if (const Status s = cutlass_sm120_moe_plans(kLatestCutlassVersion, MoeOutputType::kBf16, &cut); !s.is_ok()) {
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    return kExitFailed;
  }
  int cut_fit = 0;
  nlohmann::json fails = nlohmann::json::array();
  for (const auto& p : cut) {
    cut_fit += p.fits;
    if (!p.fits) fails.push_back({{"tactic", p.tactic.name()}, {"explanation", p.describe()}});
  }
  js["cutlass_sm120"] = {{"version", cutlass_version_name(kLatestCutlassVersion)}, {"tactics", cut.size()},
                         {"fit", cut_fit}, {"failing", fails}};
  std::printf("\nCUTLASS %s sm_120 MoE tactics: %d of %zu fit in %s B; failing:\n", cutlass_version_name(kLatestCutlassVersion),
              cut_fit, cut.size(), with_commas(arch_info(120).smem_per_block).c_str());
  for (const auto& f : fails) std::printf("  %s\n", f["tactic"].get<std::string>().c_str());

  // 3. Memory floors of one MoE layer and of all MoE layers per decode step, on every named GPU.
  const int64_t tokens[] = {1, 8, 64, 512, 4096};
  std::printf("\nMemory floor of the MoE layers per step (all %d layers, datasheet bandwidth, uniform routing), ms:\n",
              m->moe_layers);
  std::printf("  %-24s", "GPU \\ tokens per step");
  for (int64_t t : tokens) std::printf(" %9lld", static_cast<long long>(t));
  std::printf("\n");
  for (const auto& g : gpu_table()) {
    std::printf("  %-24s", g.name);
    nlohmann::json row;
    for (int64_t t : tokens) {
      const double bytes = moe_weight_bytes(m->shape, expected_active_experts(m->shape, t));
      const double ms = bytes / (g.mem_bw_gbs * 1e6) * m->moe_layers;
      std::printf(" %9.2f", ms);
      row[std::to_string(t)] = ms;
    }
    js["floors_ms_per_step"][g.name] = row;
    std::printf("\n");
  }
  // 4. The deployments: one GPU's shard under TP8 and EP8 next to the whole layer, with the configs that serve it and
  // its memory floor per decode step (all MoE layers) on the deployment's GPU and on the H200.
  std::printf("\nOne GPU's part of the layer (uniform routing; floors for all %d MoE layers per step, datasheet bandwidth):\n",
              m->moe_layers);
  std::printf("  %-6s %-26s %10s %-34s %-34s %s\n", "shard", "per-GPU layer", "GB/layer", "sm_90 configs", "sm_120 configs",
              "floor ms/step at T=1/8/64/512: RTX PRO 6000 | H200");
  for (const auto& [tp, ep] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {8, 1}, {1, 8}}) {
    ModelOptions mo;
    mo.model = o.model;
    mo.tp = tp;
    mo.ep = ep;
    SelectedModel sm;
    const std::string name = tp > 1 ? "TP8" : ep > 1 ? "EP8" : "full";
    nlohmann::json row = {{"shard", name}};
    if (const Status s = select_model(mo, &sm); !s.is_ok()) {
      std::printf("  %-6s %s\n", name.c_str(), s.message().c_str());
      row["error"] = s.message();
      js["shards"].push_back(row);
      continue;
    }
    std::string cfg[2];
    int i = 0;
    for (int cc : {90, 120}) {
      std::vector<ShardTiles> tiles;
      const ArchInfo* a = nullptr;
      const Status st = find_arch(std::to_string(cc), &a).is_ok() ? shard_kernel_tiles(sm.shard, *a, &tiles)
                                                                   : invalid_argument("no arch");
      cfg[i] = !st.is_ok() ? st.message() : tiles.empty() ? "none divides both GEMMs"
                                                          : std::to_string(tiles.size()) + " block sizes (bm" +
                                                                std::to_string(tiles.front().block_m) + "..bm" +
                                                                std::to_string(tiles.back().block_m) + ")";
      row[cc == 90 ? "sm_90" : "sm_120"] = cfg[i++];
    }
    const GpuInfo *pro = nullptr, *h200 = nullptr;
    std::string floors;
    if (find_gpu("RTX PRO 6000", &pro).is_ok() && find_gpu("H200", &h200).is_ok()) {
      for (const GpuInfo* g : {pro, h200}) {
        for (int64_t t : {1, 8, 64, 512}) {
          const double ms = moe_weight_bytes(sm.shard, expected_active_experts(sm.shard, t)) / (g->mem_bw_gbs * 1e6) *
                            sm.moe_layers;
          char b[32];
          std::snprintf(b, sizeof(b), "%s%.2f", t == 1 ? "" : "/", ms);
          floors += b;
          row["floor_ms_per_step"][g->name][std::to_string(t)] = ms;
        }
        if (g == pro) floors += " | ";
      }
    }
    const double gb = moe_weight_bytes(sm.shard, static_cast<double>(sm.shard.num_experts)) / 1e9;
    row["shape"] = shape_text(sm.shard);
    row["gb_per_layer"] = gb;
    js["shards"].push_back(row);
    std::printf("  %-6s %-26s %10.3f %-34s %-34s %s\n", name.c_str(), shape_text(sm.shard).c_str(), gb, cfg[0].c_str(),
                cfg[1].c_str(), floors.c_str());
  }

  if (!timing) {
    const std::string timing = !o.timing ? "timing skipped (--no-timing)"
                                         : "no GPU here: timing (tuning and the benchmark) needs one";
    js["timing"] = timing;
    std::printf("\n%s\n", timing.c_str());
  } else {
    // 5. On this GPU: tune within the budget (into the default tuning cache), then the benchmark.
    std::printf("\n5. Tuning on %s (at most %.0f s), into the default tuning cache %s: every MoeLayer on this GPU\n"
                "   reads it at init from now on (--no-timing skips this; `fp4moe tune --cache FILE` tunes elsewhere)\n",
                live.name.c_str(), o.tune_budget_s, default_tuning_cache_path().c_str());
    std::fflush(stdout);
    std::string tj, bj;
    ModelOptions mo;
    mo.model = o.model;
    const int tune_rc = tune_model(mo, o.tune_budget_s, &tj);
    std::printf("\n6. Benchmark on %s\n", live.name.c_str());
    std::fflush(stdout);
    const int bench_rc = bench_model(mo, o.plot, &bj);
    // A failed step is recorded and the report (plans, floors) is still written.
    js["timing"] = {{"gpu", live.name},
                    {"tuning", tj.empty() ? nlohmann::json("failed (exit code " + std::to_string(tune_rc) + ")")
                                          : nlohmann::json::parse(tj)},
                    {"bench", bj.empty() ? nlohmann::json("failed (exit code " + std::to_string(bench_rc) + ")")
                                         : nlohmann::json::parse(bj)},
                    {"roofline_png", bench_rc == 0 ? nlohmann::json(o.plot) : nlohmann::json("not drawn")}};
    if (bench_rc == 0) std::printf("wrote %s\n", o.plot.c_str());
    if (tune_rc != 0 || bench_rc != 0) rc_timing = tune_rc != 0 ? tune_rc : bench_rc;
  }
  if (!write_text_file(o.out, js.dump(2) + "\n")) return kExitFailed;
  std::printf("wrote %s\n", o.out.c_str());
  return rc_timing;
}

}  // namespace

bool write_text_file(const std::string& path, const std::string& text) {
  if (const Status s = write_file_atomic(path, text); !s.is_ok()) {
    std::fprintf(stderr, "error: cannot write %s: %s\n", path.c_str(), s.message().c_str());
    return false;
  }
  return true;
}

void add_report(CLI::App& app, int* rc) {
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand("report", "The default job: plan on every arch, CUTLASS sm_120 verdicts, memory floors; with a GPU tune and bench; JSON too");
  sub->add_option("--model", o->model, "model preset")->capture_default_str();
  sub->add_option("--out", o->out, "JSON file to write")->capture_default_str();
  sub->add_option("--plot", o->plot, "roofline PNG to draw (with a GPU)")->capture_default_str();
  sub->add_option("--tune-budget-s", o->tune_budget_s, "tuning time budget (with a GPU)")
      ->check(FiniteRange(1.0, 3600.0))->capture_default_str();
  sub->add_flag("!--no-timing", o->timing, "plans and floors only, even with a GPU");
  sub->callback([o, rc]() { *rc = run(*o); });
}

}  // namespace fp4moe::cli
