// `fp4moe plan`: shared-memory plans of fp4moe's kernels (and, with --cutlass, of CUTLASS's sm_120 MoE
// tactics) for a model on every architecture, before anything is compiled or launched.
// SPDX-License-Identifier: Apache-2.0
#include <cstdio>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cutlass_model.h"
#include "fp4moe/planner.h"
#include "cli_args.h"
#include "commands.h"
#include "live_device.h"

namespace fp4moe::cli {
namespace {

struct Opts {
  ModelOptions model;
  std::string arch = "all", gpu, tile, epilogue = "all";
  std::optional<std::string> cutlass;  // set by --cutlass[=VERSION]
  int stages = 0;
  bool json = false;
  bool floors = false;
  bool shards = false;
  int64_t tokens = 512;
  // Which options the command line gave (options that do not go together are refused, never ignored).
  bool gave_arch = false, gave_gpu = false, gave_tile = false, gave_stages = false, gave_epilogue = false,
       gave_tokens = false, gave_model_options = false;
};

// Memory floors of the model's MoE layer on every named GPU: active experts' bytes / datasheet bandwidth.
int run_floors(const Opts& o, const SelectedModel& m) {
  const double active = expected_active_experts(m.shard, o.tokens);
  const double bytes = moe_weight_bytes(m.shard, active);
  if (o.json) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& g : gpu_table())
      rows.push_back({{"gpu", g.name}, {"cc", g.cc}, {"bw_gbs", g.mem_bw_gbs}, {"floor_us", bytes / (g.mem_bw_gbs * 1e3)},
                      {"all_layers_ms", bytes / (g.mem_bw_gbs * 1e3) * m.moe_layers / 1e3}});
    nlohmann::json ws;
    for (FinalizeMode f : kFinalizeModes)
      ws[finalize_mode_name(f)] = moe_workspace_bytes(m.shard, f, o.tokens);
    const nlohmann::json js = {{"model", m.key}, {"layer", m.label()}, {"tokens", o.tokens}, {"active_experts", active},
                               {"weight_bytes", bytes}, {"moe_layers", m.moe_layers}, {"floors", rows},
                               {"workspace_bytes", ws}};
    std::printf("%s\n", js.dump(2).c_str());
    return kExitOk;
  }
  std::printf("%s, T=%lld tokens: %.1f experts active (uniform routing), %.2f GB of NVFP4 weights per layer\n",
              m.label().c_str(), static_cast<long long>(o.tokens), active, bytes / 1e9);
  std::printf("  %-24s %8s %10s %12s %14s\n", "GPU", "arch", "BW GB/s", "floor us", "x layers (ms)");
  for (const auto& g : gpu_table())
    std::printf("  %-24s %8d %10.0f %12.1f %14.2f\n", g.name, g.cc, g.mem_bw_gbs, bytes / (g.mem_bw_gbs * 1e3),
                bytes / (g.mem_bw_gbs * 1e3) * m.moe_layers / 1e3);
  std::printf("  (datasheet bandwidth; a measured read bandwidth is lower, e.g. about 4.6 TB/s on the H200 here)\n");
  // The workspace a call of T tokens needs (down K not split), by finalize mode: at large T mostly the partial
  // sums, which the deterministic modes also write and read back once per layer.
  std::printf("  workspace of one call: %.1f MB (deterministic: fp32 partials), %.1f MB (deterministic-bf16), %.1f MB "
              "(atomic)\n",
              moe_workspace_bytes(m.shard, FinalizeMode::kDeterministic, o.tokens) / 1e6,
              moe_workspace_bytes(m.shard, FinalizeMode::kDeterministicBf16, o.tokens) / 1e6,
              moe_workspace_bytes(m.shard, FinalizeMode::kAtomic, o.tokens) / 1e6);
  return kExitOk;
}

nlohmann::json plan_json(const KernelPlan& p) {
  const auto& L = p.smem;
  return {{"gemm", p.gemm},       {"tile", {p.block_m, p.block_n, p.block_k}},
          {"stages", p.stages},   {"smem_bytes", L.total},
          {"limit", p.limit},     {"fits", p.fits},  {"buildable", p.buildable},
          {"shipped", p.shipped}, {"blocks_per_sm", p.blocks_per_sm},
          {"warp_specialized", p.warp_specialized},
          {"breakdown", {{"weights", L.weight_tile}, {"scales", L.scale_tile}, {"activations", L.act_tile},
                         {"act_row_padding", L.act_padding},
                         {"act_layout", L.act_layout == MoeActLayout::kSwizzled128 ? "swizzled128" : "padded_rows"}, {"stage_bytes", L.stage_bytes},
                         {"epilogue", L.epilogue}, {"barriers", L.barriers}, {"routing_tables", L.routing}}},
          {"reason", p.reason}};
}

int run_ours(const Opts& o, const SelectedModel& m, const std::vector<const ArchInfo*>& archs, nlohmann::json* js) {
  std::optional<std::vector<int>> tile;
  if (!o.tile.empty()) {
    std::vector<int> t;
    const Status s = parse_tile(o.tile, &t);
    if (!s.is_ok()) {
      std::fprintf(stderr, "error: %s\n", s.message().c_str());
      return kExitUsage;
    }
    tile = t;
  }
  const std::optional<int> stages = o.stages > 0 ? std::optional<int>(o.stages) : std::nullopt;
  const MoeShape& sh = m.shard;
  if (!o.json) {
    if (m.tp == 1 && m.ep == 1 && m.key != "custom")
      std::printf("fp4moe kernels for %s: E=%lld H=%lld I=%lld top-%lld (gate_up N=%lld K=%lld; down N=%lld K=%lld)\n",
                  m.name.c_str(), static_cast<long long>(sh.num_experts), static_cast<long long>(sh.hidden),
                  static_cast<long long>(sh.intermediate), static_cast<long long>(sh.top_k),
                  static_cast<long long>(2 * sh.intermediate), static_cast<long long>(sh.hidden),
                  static_cast<long long>(sh.hidden), static_cast<long long>(sh.intermediate));
    else
      std::printf("fp4moe kernels for %s (gate_up N=%lld K=%lld; down N=%lld K=%lld)\n", m.label().c_str(),
                  static_cast<long long>(2 * sh.intermediate), static_cast<long long>(sh.hidden),
                  static_cast<long long>(sh.hidden), static_cast<long long>(sh.intermediate));
  }
  for (const ArchInfo* a : archs) {
    std::vector<KernelPlan> plans;
    const Status s = plan_kernels(sh, *a, tile, stages, &plans);
    if (!s.is_ok()) {
      std::fprintf(stderr, "error: %s\n", s.message().c_str());
      return kExitUsage;
    }
    if (o.json) {
      nlohmann::json arr = nlohmann::json::array();
      for (const auto& p : plans) arr.push_back(plan_json(p));
      (*js)["fp4moe"][a->name] = {{"limit", a->smem_per_block}, {"smem_per_sm", a->smem_per_sm}, {"plans", arr}};
      continue;
    }
    std::printf("\n%s (%s): %s B per block opt-in, %s B per SM%s\n", a->name, a->example,
                with_commas(a->smem_per_block).c_str(), with_commas(a->smem_per_sm).c_str(),
                arch_has_kernels(a->cc) ? "" : "  [no fp4moe kernels built for this arch: plan only]");
    std::printf("  %-8s %-12s %6s %9s %9s %9s %9s %9s %10s %8s  %s\n", "gemm", "tile MxNxK", "stages", "weights", "scales",
                "acts", "pad", "stage", "total", "blk/SM", "verdict");
    for (const auto& p : plans) {
      const auto& L = p.smem;
      char tile_s[32];
      std::snprintf(tile_s, sizeof(tile_s), "%dx%dx%d", p.block_m, p.block_n, p.block_k);
      std::printf("  %-8s %-12s %6d %9s %9s %9s %9s %9s %10s %8d  %s\n", p.gemm.c_str(), tile_s, p.stages,
                  with_commas(L.weight_tile).c_str(), with_commas(L.scale_tile).c_str(), with_commas(L.act_tile).c_str(),
                  with_commas(L.act_padding).c_str(), with_commas(L.stage_bytes).c_str(), with_commas(L.total).c_str(),
                  p.blocks_per_sm,
                  (std::string(p.fits ? (p.shipped ? "fits (shipped)" : "fits") : p.buildable ? "DOES NOT FIT" : "NOT BUILDABLE") +
                   (L.act_layout == MoeActLayout::kSwizzled128 ? ", wgmma: acts 128B-swizzled" : "") +
                   (p.warp_specialized ? ", warp-specialized (+" + with_commas(L.barriers) + " B mbarriers, +" +
                                              with_commas(L.epilogue) + " B item records)"
                                        : std::string()) +
                   (L.routing ? ", +" + with_commas(L.routing) + " B routing tables" : std::string()))
                      .c_str());
    }
    for (const auto& p : plans)
      if (!p.fits) std::printf("    %s %dx%dx%d: %s\n", p.gemm.c_str(), p.block_m, p.block_n, p.block_k, p.reason.c_str());
  }
  return 0;
}

int run_cutlass(const Opts& o, nlohmann::json* js) {
  CutlassVersion v;
  Status s = parse_cutlass_version(*o.cutlass, &v);
  if (!s.is_ok()) {
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    return 2;
  }
  std::vector<CutlassSm120MoePlan> plans;
  s = cutlass_sm120_moe_plans(v, MoeOutputType::kBf16, &plans);
  if (!s.is_ok()) {
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    return 2;
  }
  if (!o.json)
    std::printf("\nCUTLASS %s (flashinfer %s) sm_120 NVFP4 MoE grouped-GEMM tactics (TensorRT-LLM launcher), bf16 out;"
                " limit %s B per block\n  %-12s %-9s %-5s %8s %10s %10s %10s  %s\n",
                cutlass_version_name(v), cutlass_flashinfer_release(v), with_commas(arch_info(120).smem_per_block).c_str(), "tile", "epilogue",
                "swap", "builder", "carveout", "real B", "max fit", "verdict");
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& p : plans) {
    if (o.epilogue != "all" &&
        (o.epilogue == "finalize") != (p.tactic.epilogue == MoeEpilogueFusion::kFinalize))
      continue;
    char tile_s[32];
    std::snprintf(tile_s, sizeof(tile_s), "%dx%dx%d", p.tactic.tile_m, p.tactic.tile_n, p.tactic.tile_k);
    if (o.json) {
      arr.push_back({{"tile", {p.tactic.tile_m, p.tactic.tile_n, p.tactic.tile_k}},
                     {"epilogue", moe_epilogue_fusion_name(p.tactic.epilogue)},
                     {"swap_ab", p.tactic.swap_ab},
                     {"builder_stages", p.builder.stages},
                     {"carveout", p.epilogue.total},
                     {"smem_bytes", p.smem.total},
                     {"limit", p.limit},
                     {"fits", p.fits},
                     {"largest_fitting_stages", p.largest_fitting_stages},
                     {"largest_fitting_bytes", p.largest_fitting_bytes},
                     {"verdict", p.verdict()},
                     {"explanation", p.describe()}});
      continue;
    }
    std::printf("  %-12s %-9s %-5s %8d %10s %10s %7d st  %s\n", tile_s, moe_epilogue_fusion_name(p.tactic.epilogue),
                p.tactic.swap_ab ? "on" : "off", p.builder.stages, with_commas(p.epilogue.total).c_str(),
                with_commas(p.smem.total).c_str(), p.largest_fitting_stages, p.verdict().c_str());
  }
  if (o.json) {
    (*js)["cutlass"] = {{"version", cutlass_version_name(v)}, {"arch", "sm_120"}, {"tactics", arr}};
    return 0;
  }
  std::printf("\nWhy the failing tactics fail:\n");
  for (const auto& p : plans)
    if (!p.fits) std::printf("  %s: %s\n", p.tactic.name().c_str(), p.describe().c_str());
  return 0;
}

// Every preset's tensor- and expert-parallel shards: the per-GPU shape, and on each kernel arch whether the shipped
// configs serve both GEMMs (and with which tiles), or why not.
int run_shards(const Opts& o) {
  nlohmann::json rows = nlohmann::json::array();
  if (!o.json)
    std::printf("%-16s %-6s %-24s %-8s %s\n", "preset", "shard", "per-GPU layer", "arch", "kernels");
  for (const auto& p : model_presets()) {
    for (const auto& [tp, ep] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {2, 1}, {4, 1}, {8, 1}, {1, 2}, {1, 4}, {1, 8}}) {
      ModelOptions mo;
      mo.model = p.key;
      mo.tp = tp;
      mo.ep = ep;
      SelectedModel m;
      const Status sel = select_model(mo, &m);
      const std::string shard = tp > 1 ? "TP" + std::to_string(tp) : ep > 1 ? "EP" + std::to_string(ep) : "full";
      for (int cc : {90, 120}) {
        const ArchInfo* a = nullptr;
        if (!find_arch(std::to_string(cc), &a).is_ok()) return kExitFailed;
        std::string verdict;
        bool runs = false;
        if (!sel.is_ok()) {
          verdict = "no shard: " + sel.message();
        } else {
          std::vector<ShardTiles> tiles;
          const Status st = shard_kernel_tiles(m.shard, *a, &tiles);
          if (!st.is_ok()) {
            verdict = st.message();
          } else {
            for (const auto& t : tiles) {
              if (!verdict.empty()) verdict += "; ";
              verdict += "bm" + std::to_string(t.block_m) + " " + t.gate_up + " / " + t.down;
            }
            runs = !tiles.empty();
            if (!runs) verdict = "no shipped config divides both GEMMs";
          }
        }
        if (o.json) {
          rows.push_back({{"model", p.key}, {"tp", tp}, {"ep", ep}, {"arch", a->name}, {"runs", runs},
                          {"shape", sel.is_ok() ? shape_text(m.shard) : ""}, {"kernels", verdict}});
        } else {
          std::printf("%-16s %-6s %-24s %-8s %s\n", p.key, shard.c_str(), sel.is_ok() ? shape_text(m.shard).c_str() : "-",
                      a->name, verdict.c_str());
        }
      }
    }
  }
  if (o.json) std::printf("%s\n", nlohmann::json{{"shards", rows}}.dump(2).c_str());
  else
    std::printf("(tiles: block_m, then gate_up's and down's family and N x K tile; a small-K tile serves a down GEMM whose\n"
                " K = I / tp no larger tile divides)\n");
  return kExitOk;
}

// Options that do not go together: an error naming them, or empty.
std::string conflicts(const Opts& o) {
  if (o.floors) {
    if (o.gave_arch || o.gave_gpu || o.gave_tile || o.gave_stages || o.cutlass || o.gave_epilogue)
      return "--floors prints the memory floor on every named GPU: it takes --model, --tokens and --json only";
    return "";
  }
  if (o.shards) {
    if (o.gave_arch || o.gave_gpu || o.gave_tile || o.gave_stages || o.cutlass || o.gave_epilogue || o.gave_tokens ||
        o.gave_model_options)
      return "--shards prints every preset's TP and EP shards on the kernel archs: it takes --json only";
    return "";
  }
  if (o.gave_tokens) return "--tokens is for --floors";
  if (o.gave_epilogue && !o.cutlass) return "--epilogue selects CUTLASS tactics: it needs --cutlass";
  if (o.gave_arch && o.gave_gpu) return "--arch and --gpu both choose the arch: give one";
  return "";
}

int run(const Opts& o) {
  if (const std::string c = conflicts(o); !c.empty()) {
    std::fprintf(stderr, "error: %s\n", c.c_str());
    return kExitUsage;
  }
  if (o.cutlass) {  // the version before anything is printed
    CutlassVersion v;
    if (const Status s = parse_cutlass_version(*o.cutlass, &v); !s.is_ok()) {
      std::fprintf(stderr, "error: %s\n", s.message().c_str());
      return kExitUsage;
    }
  }
  if (!o.tile.empty()) {
    std::vector<int> t;
    if (const Status s = parse_tile(o.tile, &t); !s.is_ok()) {
      std::fprintf(stderr, "error: %s\n", s.message().c_str());
      return kExitUsage;
    }
  }
  SelectedModel m;
  Status s = select_model(o.model, &m);
  if (!s.is_ok()) {
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    return kExitUsage;
  }
  if (o.shards) return run_shards(o);
  std::vector<const ArchInfo*> archs;
  if (!o.gpu.empty()) {
    const GpuInfo* g = nullptr;
    s = find_gpu(o.gpu, &g);
    const ArchInfo* a = nullptr;
    if (s.is_ok()) s = find_arch(std::to_string(g->cc), &a);
    if (!s.is_ok()) {
      std::fprintf(stderr, "error: %s\n", s.message().c_str());
      return kExitUsage;
    }
    archs.push_back(a);
  } else if (o.arch == "all") {
    for (const auto& a : arch_table()) archs.push_back(&a);
  } else {
    const ArchInfo* a = nullptr;
    s = find_arch(o.arch, &a);
    if (!s.is_ok()) {
      std::fprintf(stderr, "error: %s\n", s.message().c_str());
      return kExitUsage;
    }
    archs.push_back(a);
  }
  if (o.floors) return run_floors(o, m);
  nlohmann::json js;
  const LiveDevice live = query_live_device();
  if (!o.json && live.present)
    std::printf("live GPU: %s (sm_%d), %d SMs, %s B smem per block opt-in, %s B per SM (measured, wins over the table)\n",
                live.name.c_str(), live.cc, live.sms, with_commas(live.smem_per_block).c_str(),
                with_commas(live.smem_per_sm).c_str());
  if (live.present) js["live_device"] = {{"name", live.name}, {"cc", live.cc}, {"sms", live.sms},
                                         {"smem_per_block", live.smem_per_block}, {"smem_per_sm", live.smem_per_sm}};
  int rc = 0;
  rc = run_ours(o, m, archs, &js);
  if (rc == 0 && o.cutlass) rc = run_cutlass(o, &js);
  if (rc == 0 && o.json) std::printf("%s\n", js.dump(2).c_str());
  return rc;
}

}  // namespace

void add_plan(CLI::App& app, int* rc) {
  auto o = std::make_shared<Opts>();
  CLI::App* sub = app.add_subcommand("plan", "Shared-memory plan of every kernel config on every arch (no GPU needed)");
  sub->add_option("--arch", o->arch, "sm_80 ... sm_121, or all")->capture_default_str();
  sub->add_option("--gpu", o->gpu, "a named GPU (H200, B200, RTX 5090, RTX PRO 6000, GB10, ...): its arch");
  add_model_options(sub, &o->model);
  sub->add_option("--tile", o->tile, "a custom fp4moe tile MxNxK instead of the shipped ones");
  sub->add_option("--stages", o->stages, "force a stage count (default: as many as the arch's budget allows)")
      ->check(CLI::Range(1, 32));
  sub->add_option("--epilogue", o->epilogue, "CUTLASS tactics to show: none, finalize or all")
      ->check(CLI::IsMember({"none", "finalize", "all"}))
      ->capture_default_str();
  sub->add_option("--cutlass", o->cutlass, "also model CUTLASS's sm_120 MoE tactics (VERSION: 4.5.0 default, 4.2.1)")
      ->expected(0, 1)
      ->default_str("");
  sub->add_flag("--json", o->json, "machine-readable output");
  sub->add_flag("--floors", o->floors, "print the model layer's memory floor on every named GPU instead");
  sub->add_flag("--shards", o->shards, "print what each TP and EP degree of every preset needs and whether it runs");
  sub->add_option("--tokens", o->tokens, "tokens per step for --floors")->capture_default_str()->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  sub->callback([o, rc, sub]() {
    o->gave_arch = sub->count("--arch") > 0;
    o->gave_gpu = sub->count("--gpu") > 0;
    o->gave_tile = sub->count("--tile") > 0;
    o->gave_stages = sub->count("--stages") > 0;
    o->gave_epilogue = sub->count("--epilogue") > 0;
    o->gave_tokens = sub->count("--tokens") > 0;
    o->gave_model_options = sub->count("--model") + sub->count("--shape") + sub->count("--tp") + sub->count("--ep") > 0;
    *rc = run(*o);
  });
}

}  // namespace fp4moe::cli
