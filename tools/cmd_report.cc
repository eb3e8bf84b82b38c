// `fp4moe report`: the default job on a model preset (GLM-5 by default): the shared-memory plan of every
// kernel config on every arch, CUTLASS's sm_120 tactics with verdicts, and the layer's memory floors on
// every named GPU; printed and written to fp4moe-report.json. Timing (tuning and the benchmark) needs a
// GPU and is not part of the report yet: the report says so and names the benchmark to run.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp4moe/cutlass_model.h"
#include "fp4moe/planner.h"
#include "fp4moe/version.h"
#include "tools/commands.h"
#include "tools/live_device.h"

namespace fp4moe::cli {
namespace {

struct Opts {
  std::string model = "glm5";
  std::string out = "fp4moe-report.json";
};

int run(const Opts& o) {
  const ModelPreset* m = nullptr;
  if (const Status s = find_model(o.model, &m); !s.is_ok()) {
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    return 2;
  }
  nlohmann::json js;
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
      return 2;
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
    js["plans"][a.name] = {{"limit", a.smem_per_block}, {"kernels_built", plans.front().shipped}, {"plans", arr}};
    char cfg[32], big[64];
    std::snprintf(cfg, sizeof(cfg), "%d/%zu fit", fit, plans.size());
    std::snprintf(big, sizeof(big), "%s B, %d", with_commas(largest->smem.total).c_str(), largest->blocks_per_sm);
    std::printf("%-8s %-24s %12s %10s %s%s\n", a.name, a.example, with_commas(a.smem_per_block).c_str(), cfg, big,
                plans.front().shipped ? "" : "  (plan only: no kernels built for it)");
  }

  // 2. CUTLASS's sm_120 MoE tactics.
  std::vector<CutlassSm120MoePlan> cut;
  if (const Status s = cutlass_sm120_moe_plans(kLatestCutlassVersion, MoeOutputType::kBf16, &cut); !s.is_ok()) {
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    return 2;
  }
  int cut_fit = 0;
  nlohmann::json fails = nlohmann::json::array();
  for (const auto& p : cut) {
    cut_fit += p.fits;
    if (!p.fits) fails.push_back({{"tactic", p.tactic.name()}, {"explanation", p.describe()}});
  }
  js["cutlass_sm120"] = {{"version", cutlass_version_name(kLatestCutlassVersion)}, {"tactics", cut.size()},
                         {"fit", cut_fit}, {"failing", fails}};
  std::printf("\nCUTLASS %s sm_120 MoE tactics: %d of %zu fit in 101,376 B; failing:\n", cutlass_version_name(kLatestCutlassVersion),
              cut_fit, cut.size());
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
  const LiveDevice live = query_live_device();
  const std::string timing =
      live.present ? "this machine has a GPU (" + live.name +
                         "): the report does not time yet; run fp4moe_bench_moe (scripts/gpu-suite) for the layer's times"
                   : "no GPU here: timing (tuning and the benchmark) needs one";
  js["timing"] = timing;
  std::printf("\n%s\n", timing.c_str());
  std::ofstream f(o.out);
  if (!f || !(f << js.dump(2) << "\n")) {
    std::fprintf(stderr, "error: cannot write %s\n", o.out.c_str());
    return 1;
  }
  std::printf("wrote %s\n", o.out.c_str());
  return 0;
}

}  // namespace

void add_report(CLI::App& app, int* rc) {
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand("report", "The default job: plan on every arch, CUTLASS sm_120 verdicts, memory floors; JSON too");
  sub->add_option("--model", o->model, "model preset")->capture_default_str();
  sub->add_option("--out", o->out, "JSON file to write")->capture_default_str();
  sub->callback([o, rc]() { *rc = run(*o); });
}

}  // namespace fp4moe::cli
