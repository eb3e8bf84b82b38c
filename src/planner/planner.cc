// The shared-memory planner (include/fp4moe/planner.h): lookups in the arch, GPU and model tables, and the plans
// of the catalogue's kernel configs.
// SPDX-License-Identifier: Apache-2.0
#include "fp4moe/planner.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iterator>
#include <limits>
#include <map>

#include "fp4moe/build_info.h"
#include "fp4moe/tuning.h"
#include "src/moe/run_plan.h"
#include "src/moe/workspace.h"
#include "kernels/moe_gemm_catalogue.h"
#include "kernels/moe_gemm_layout.h"

namespace fp4moe {

const std::vector<ArchInfo>& arch_table() {
  static const std::vector<ArchInfo> t(std::begin(kArchTable), std::end(kArchTable));
  return t;
}

namespace {

std::string lower_alnum(const std::string& s) {
  std::string o;
  for (char c : s)
    if (std::isalnum(static_cast<unsigned char>(c))) o += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return o;
}

// Names are ASCII: letters, digits, spaces and . _ - ( ) / +. Anything else (an accent, an emoji, "!!!") would be
// dropped by lower_alnum and could match a preset it was never meant to name.
bool plain_name(const std::string& s) {
  if (s.empty()) return false;
  bool alnum = false;
  for (char c : s) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u >= 0x80) return false;
    if (std::isalnum(u)) alnum = true;
    else if (std::string(" ._-()/+").find(c) == std::string::npos) return false;
  }
  return alnum;
}

// The entry `name` names among `names` (each entry: its accepted spellings): an exact match (ignoring case,
// spaces and punctuation) of any spelling, else the one entry a spelling of which starts with it. No match, or
// several, is an error listing the candidates. `what`: "model", "GPU"; `list`: the candidates, for the message.
Status match_name(const char* what, const std::string& name, const std::vector<std::vector<std::string>>& names,
                  const std::string& list, size_t* out) {
  if (!plain_name(name))
    return invalid_argument(std::string("'") + name + "' is not a " + what +
                            " name (ASCII letters, digits, spaces and . _ - ( ) / +); known: " + list);
  std::string k = lower_alnum(name);
  if (std::string(what) == "GPU") {  // the CUDA runtime's names: "NVIDIA H200", "NVIDIA GeForce RTX 4090"
    if (k.rfind("nvidia", 0) == 0 && k.size() > 6) k = k.substr(6);
    if (k.rfind("geforce", 0) == 0 && k.size() > 7) k = k.substr(7);
  }
  std::vector<size_t> prefix;
  for (size_t i = 0; i < names.size(); ++i) {
    bool any = false;
    for (const std::string& n : names[i]) {
      const std::string nk = lower_alnum(n);
      if (nk == k) {
        *out = i;
        return Status::ok();
      }
      any = any || nk.rfind(k, 0) == 0;
    }
    if (any) prefix.push_back(i);
  }
  if (prefix.size() == 1) {
    *out = prefix[0];
    return Status::ok();
  }
  if (prefix.empty()) return invalid_argument(std::string("unknown ") + what + " '" + name + "'; known: " + list);
  std::string which;
  for (size_t i : prefix) which += (which.empty() ? "" : ", ") + names[i][0];
  return invalid_argument(std::string("ambiguous ") + what + " '" + name + "': it could be " + which);
}

}  // namespace

Status find_arch(const std::string& name, const ArchInfo** out) {
  if (out == nullptr) return invalid_argument("find_arch: output is null");
  std::string known;
  for (const auto& a : arch_table()) known += std::string(known.empty() ? "" : ", ") + a.name;
  if (!plain_name(name)) return invalid_argument("'" + name + "' is not an arch name (e.g. sm_90, sm_120a); known: " + known);
  std::string k = lower_alnum(name);
  if (k.rfind("sm", 0) == 0) k = k.substr(2);
  if (!k.empty() && (k.back() == 'a' || k.back() == 'f')) k.pop_back();  // sm_90a, sm_120f: same budget
  for (const auto& a : arch_table()) {
    if (std::to_string(a.cc) == k) {
      *out = &a;
      return Status::ok();
    }
  }
  return invalid_argument("unknown arch '" + name + "'; known: " + known);
}

std::vector<std::string> built_cuda_targets() {
  std::vector<std::string> v;
  const std::string s = build_info().cuda_targets;
  size_t i = 0;
  while (i < s.size()) {
    const size_t j = std::min(s.find(';', i), s.size());
    if (j > i) v.push_back(s.substr(i, j - i));
    i = j + 1;
  }
  return v;
}

bool cuda_target_runs_on(const std::string& target, int cc) {
  // CUDA C++ Programming Guide, "Binary Compatibility" and "Family-Specific Features": SASS for sm_XY runs on
  // X.Z for Z >= Y; arch-specific ("a") SASS runs on X.Y only; family-specific ("f") on the family's X.Z, Z >= Y.
  // Each kernel has a body only in the cubin of the family it was planned for, so that must match too.
  std::string digits = target;
  char suffix = 0;
  if (!digits.empty() && std::isalpha(static_cast<unsigned char>(digits.back()))) {
    suffix = digits.back();
    digits.pop_back();
  }
  if (digits.empty() || digits.size() > 4 || (suffix != 0 && suffix != 'a' && suffix != 'f') ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }))
    return false;
  const int tc = std::stoi(digits);
  if (kernel_arch_family(tc) != kernel_arch_family(cc)) return false;
  return suffix == 'a' ? tc == cc : tc / 10 == cc / 10 && tc <= cc;
}

bool arch_has_kernels(int cc) {
  if (!catalogue::kernels_planned_for(cc)) return false;
  for (const std::string& t : built_cuda_targets())
    if (cuda_target_runs_on(t, cc)) return true;
  return false;
}

const std::vector<GpuInfo>& gpu_table() {
  // Dense tensor-core peaks (no sparsity) and memory bandwidth from the vendors' datasheets and whitepapers;
  // GeForce and workstation peaks are the whitepapers' FP32-accumulate figures (Blackwell: halved from the sparse
  // ones). `aliases`: other spellings, the CUDA runtime's device names among them (without "NVIDIA ").
  static const std::vector<GpuInfo> t = {
      {"A100 SXM 80GB", 80, 108, 2039, 312, 0, 0, "NVIDIA A100 datasheet", false, {"A100", "A100-SXM4-80GB", "A100 80GB"}},
      {"RTX 3090", 86, 82, 936, 71, 0, 0, "NVIDIA Ampere GA102 GPU architecture whitepaper", false, {}},
      {"A40", 86, 84, 696, 149.7, 0, 0, "NVIDIA A40 datasheet", false, {}},
      {"L40S", 89, 142, 864, 362, 733, 0, "NVIDIA L40S datasheet", false, {}},
      {"RTX 4090", 89, 128, 1008, 165.2, 330.3, 0, "NVIDIA Ada GPU architecture whitepaper", false, {}},
      {"H100 SXM", 90, 132, 3350, 989, 1979, 0, "NVIDIA H100 datasheet", false, {"H100", "H100 80GB HBM3"}},
      {"H100 PCIe", 90, 114, 2000, 756, 1513, 0, "NVIDIA H100 datasheet", false, {}},
      {"H200", 90, 132, 4800, 989, 1979, 0, "NVIDIA H200 datasheet (4.3-4.6 TB/s read measured here)", false, {}},
      {"B200", 100, 148, 8000, 2250, 4500, 9000, "NVIDIA DGX B200 / HGX B200 datasheet (per GPU)", false, {}},
      {"GB200", 100, 148, 8000, 2500, 5000, 10000, "NVIDIA GB200 NVL72 datasheet (per GPU)", false, {}},
      {"B300", 103, 160, 8000, 2250, 4500, 14000,
       "NVIDIA HGX B300 (per GPU; SMs from NVIDIA's Blackwell Ultra technical blog)", false, {}},
      {"RTX 5090", 120, 170, 1792, 209, 419, 1676, "NVIDIA RTX Blackwell GPU architecture whitepaper", false, {}},
      {"RTX PRO 6000 Blackwell", 120, 188, 1792, 503, 1007, 2015, "NVIDIA RTX PRO 6000 Blackwell datasheet", false,
       {"RTX PRO 6000", "RTX PRO 6000 Blackwell Workstation Edition", "RTX PRO 6000 Blackwell Server Edition",
        "RTX PRO 6000 Blackwell Max-Q Workstation Edition"}},
      {"GB10 (DGX Spark)", 121, 48, 273, 125, 250, 500, "NVIDIA DGX Spark datasheet (1 PFLOP FP4 sparse)", false,
       {"GB10", "DGX Spark"}},
  };
  return t;
}

Status find_gpu(const std::string& name, const GpuInfo** out) {
  if (out == nullptr) return invalid_argument("find_gpu: output is null");
  std::vector<std::vector<std::string>> names;
  std::string known;
  for (const auto& g : gpu_table()) {
    names.push_back({g.name});
    for (const std::string& a : g.aliases) names.back().push_back(a);
    known += std::string(known.empty() ? "" : ", ") + g.name;
  }
  size_t i = 0;
  FP4MOE_RETURN_IF_ERROR(match_name("GPU", name, names, known, &i));
  *out = &gpu_table()[i];
  return Status::ok();
}

const std::vector<ModelPreset>& model_presets() {
  // Hidden, expert intermediate, routed experts, top-k from the models' public configs (shared/notes).
  static const std::vector<ModelPreset> t = {
      {"glm5", "GLM-5 (744B-A40B)", {256, 6144, 2048, 8}, 75},
      {"deepseek-v3", "DeepSeek-V3 / R1", {256, 7168, 2048, 8}, 58},
      {"kimi-k2", "Kimi K2", {384, 7168, 2048, 8}, 60},
      {"glm4.5", "GLM-4.5", {160, 5120, 1536, 8}, 89},
      {"qwen3-235b", "Qwen3-235B-A22B", {128, 4096, 1536, 8}, 94},
      {"qwen3-30b", "Qwen3-30B-A3B", {128, 2048, 768, 8}, 48},
      {"gpt-oss-120b", "gpt-oss-120b (MXFP4 upstream)", {128, 2880, 2880, 4}, 36},
      {"mixtral", "Mixtral 8x7B", {8, 4096, 14336, 2}, 32},
  };
  return t;
}

Status find_model(const std::string& key, const ModelPreset** out) {
  if (out == nullptr) return invalid_argument("find_model: output is null");
  std::vector<std::vector<std::string>> names;
  std::string known;
  for (const auto& m : model_presets()) {
    names.push_back({m.key, m.name});
    known += std::string(known.empty() ? "" : ", ") + m.key;
  }
  size_t i = 0;
  FP4MOE_RETURN_IF_ERROR(match_name("model", key, names, known, &i));
  *out = &model_presets()[i];
  return Status::ok();
}

std::string with_commas(int64_t v) {
  // The magnitude as unsigned, so INT64_MIN keeps its digits.
  const uint64_t mag = v < 0 ? uint64_t{0} - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  std::string s = std::to_string(mag), o;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i && (s.size() - i) % 3 == 0) o += ',';
    o += s[i];
  }
  return v < 0 ? "-" + o : o;
}

namespace {

KernelPlan plan_one(const std::string& gemm, int64_t n, int64_t k, int bm, int bn, int bk, std::optional<int> stages,
                    const ArchInfo& a, bool shipped, int target_blocks, KernelFamily family) {
  const bool ws = family == KernelFamily::kWarpSpecialized;
  KernelPlan p;
  p.gemm = gemm;
  p.family = family;
  p.block_m = bm, p.block_n = bn, p.block_k = bk;
  p.limit = a.smem_per_block;
  p.warp_specialized = ws;
  // The layout and stage-count functions of the kernel family (kernels/moe_gemm_layout.h).
  auto layout = [&](int n_stages) {
    return ws ? moe_gemm_ws_smem_layout(bm, bn, bk, n_stages)
              : moe_gemm_smem_layout(bm, bn, bk, n_stages, moe_gemm_act_layout(a.cc, bm));
  };
  auto max_stages = [&](int64_t budget) {
    return ws ? moe_gemm_ws_max_stages(bm, bn, bk, budget)
              : moe_gemm_max_stages(bm, bn, bk, budget, moe_gemm_act_layout(a.cc, bm));
  };
  const int planned =
      ws ? moe_gemm_ws_planned_stages(bm, bn, bk, a.cc) : moe_gemm_planned_stages(bm, bn, bk, a.cc, target_blocks);
  p.stages = stages ? *stages : planned;
  p.smem = layout(std::max(p.stages, 1));
  // A forced stage count is the shipped config only if it is the one built.
  p.shipped = shipped && p.stages == planned;
  const int threads = bn / 16 * 32 + (ws ? kWsProducerThreads : 0);
  p.blocks_per_sm_smem = static_cast<int>(a.smem_per_sm / (p.smem.total + a.reserved_smem_per_block));
  p.blocks_per_sm_threads = a.max_threads_per_sm / threads;
  // A multistage config is planned (its stage count, its __launch_bounds__ register cap) for its target blocks per
  // SM; a warp-specialized one for one (__launch_bounds__(threads, 1): 65,536 / threads registers).
  p.blocks_per_sm = std::min({p.blocks_per_sm_smem, p.blocks_per_sm_threads, a.max_blocks_per_sm,
                              ws ? 1 : moe_gemm_blocks_per_sm(target_blocks, a.cc)});
  const auto L = p.smem;
  const std::string parts = with_commas(L.total) + " B = " + std::to_string(p.stages) + " stages x " +
                            with_commas(L.stage_bytes) + " (weights " + with_commas(L.weight_tile) + " + scales " +
                            with_commas(L.scale_tile) + " + activations " + with_commas(L.act_tile) +
                            (L.act_layout == MoeActLayout::kSwizzled128 ? std::string(", 128-byte swizzled for wgmma)")
                                                                        : " + row padding " + with_commas(L.act_padding) + ")") +
                            (L.barriers ? " + " + with_commas(L.barriers) + " B of mbarriers + " + with_commas(L.epilogue) +
                                            " B of item records (warp-specialized)"
                                        : std::string()) +
                            (L.routing ? " + " + with_commas(L.routing) + " B of routing tables (a decode tile: its kernels route up to " +
                                             std::to_string(kernels::kBlockRoutingMaxPairs) + " pairs)"
                                       : std::string());
  if (p.stages < 2) {
    p.reason = stages && *stages < 2
                   ? "does not fit the kernels: they need at least 2 stages for the copies to overlap the math, " +
                         std::to_string(p.stages) + " requested"
                   : "does not fit: even 2 stages need " + with_commas(layout(2).total) + " B; limit " + with_commas(p.limit);
  } else if (L.total > p.limit) {
    p.reason = "over by " + with_commas(L.total - p.limit) + ": needs " + parts + "; limit " + with_commas(p.limit) +
               "; use " + std::to_string(max_stages(p.limit)) + " stages";
  } else if (const char* why = moe_gemm_copy_problem(bm, bn, bk, ws ? kWsProducerThreads : bn / 16 * 32, L.act_layout)) {
    p.buildable = false;
    p.reason = std::string("no kernel can be built for it: ") + why;
  } else if (n % bn != 0 || k % bk != 0) {
    p.reason = "tile does not divide the GEMM: N=" + std::to_string(n) + " % " + std::to_string(bn) + ", K=" +
               std::to_string(k) + " % " + std::to_string(bk);
  } else {
    p.fits = true;
    p.reason = "fits: " + parts + "; " + with_commas(p.limit - L.total) + " B spare; " +
               std::to_string(p.blocks_per_sm) + " block(s)/SM";
  }
  return p;
}

}  // namespace

bool down_k_splits_supported(const MoeShape& s, int64_t q) {
  return (q == 1 || q == 2 || q == 4 || q == 8) && s.intermediate > 0 && s.intermediate % (64 * q) == 0;
}

std::vector<int> shipped_block_ms() {
  std::vector<int> v;
  for (const auto& t : catalogue::kTiles)
    if (std::find(v.begin(), v.end(), t.block_m) == v.end()) v.push_back(t.block_m);
  return v;
}

std::vector<int> shipped_block_ms(int cc) {
  std::vector<int> v;
  for (size_t i = 0; i < catalogue::kNumTiles; ++i)
    if (catalogue::kernels_planned_for(cc) && catalogue::tile_on(i, cc) &&
        std::find(v.begin(), v.end(), catalogue::kTiles[i].block_m) == v.end())
      v.push_back(catalogue::kTiles[i].block_m);
  return v;
}

Status plan_kernels(const MoeShape& s, const ArchInfo& a, std::optional<std::vector<int>> tile, std::optional<int> stages,
                    std::vector<KernelPlan>* out) {
  if (out == nullptr) return invalid_argument("plan_kernels: output is null");
  if (s.hidden <= 0 || s.intermediate <= 0) return invalid_argument("hidden and intermediate must be positive");
  if (s.hidden % 16 != 0 || s.intermediate % 16 != 0)
    return invalid_argument("hidden and intermediate must be multiples of 16 (one NVFP4 block scale per 16 along K)");
  constexpr int64_t kMaxDim = int64_t{1} << 40;  // so that 2 * intermediate and the products below cannot overflow
  if (s.hidden > kMaxDim || s.intermediate > kMaxDim)
    return invalid_argument("hidden and intermediate must be at most 2^40");
  if (stages && (*stages < 1 || *stages > 32)) return invalid_argument("stages must be in [1, 32]");
  const struct { const char* name; int64_t n, k; } gemms[] = {{"gate_up", 2 * s.intermediate, s.hidden},
                                                              {"down", s.hidden, s.intermediate}};
  const bool built = arch_has_kernels(a.cc);
  std::vector<KernelPlan> plans;
  if (tile) {
    const auto& t = *tile;
    if (t.size() != 3) return invalid_argument("tile must be MxNxK");
    if (t[0] < 8 || t[0] % 8 != 0 || t[0] > 128)
      return invalid_argument("tile M must be a multiple of 8 in [8, 128] (the MMA's n side holds 8 tokens)");
    if (t[1] < 16 || t[1] % 16 != 0 || t[1] > 256)
      return invalid_argument("tile N must be a multiple of 16 in [16, 256] (one 16-row MMA tile per warp)");
    if (t[2] < 64 || t[2] % 64 != 0 || t[2] > 4096)
      return invalid_argument("tile K must be a multiple of 64 in [64, 4096] (one 16-byte load holds four k16 MMA steps)");
    // A custom multistage tile at 2 blocks per SM; it is "shipped" where the catalogue has that tile at that
    // target on the arch and the stage count is the built one.
    bool shipped = false;
    for (size_t i = 0; i < catalogue::kNumTiles; ++i) {
      const auto& c = catalogue::kTiles[i];
      shipped |= built && catalogue::tile_on(i, a.cc) && c.family == KernelFamily::kMultistage && c.target_blocks == 2 &&
                 c.block_m == t[0] && c.block_n == t[1] && c.block_k == t[2];
    }
    for (const auto& g : gemms)
      plans.push_back(plan_one(g.name, g.n, g.k, t[0], t[1], t[2], stages, a, shipped, 2, KernelFamily::kMultistage));
    *out = std::move(plans);
    return Status::ok();
  }
  for (size_t i = 0; i < catalogue::kNumTiles; ++i) {
    if (!catalogue::tile_on(i, a.cc)) continue;
    const auto& k = catalogue::kTiles[i];
    for (const auto& g : gemms)
      plans.push_back(plan_one(g.name, g.n, g.k, k.block_m, k.block_n, k.block_k, stages, a, built, k.target_blocks, k.family));
  }
  *out = std::move(plans);
  return Status::ok();
}

double expected_active_experts(const MoeShape& s, int64_t tokens) {
  // Each token picks k distinct experts of the model's uniformly: one stays idle with probability (1 - k/E_g)^T.
  return detail::expected_local_experts(s, tokens);
}

Status shard_kernel_tiles(const MoeShape& shape, const ArchInfo& arch, std::vector<ShardTiles>* out) {
  if (out == nullptr) return invalid_argument("shard_kernel_tiles: output is null");
  const MoeLayerOptions options;
  FP4MOE_RETURN_IF_ERROR(detail::check_shape(shape, options));
  std::vector<detail::ResidentConfig> configs;
  for (size_t i = 0; i < catalogue::kNumTiles; ++i)
    if (catalogue::kernels_planned_for(arch.cc) && catalogue::tile_on(i, kernel_arch_family(arch.cc)))
      configs.push_back(detail::ResidentConfig{catalogue::config_on(i, kernel_arch_family(arch.cc)), 1});
  const std::map<int64_t, TunedChoice> none;
  detail::PlanContext c{&shape, &options, kernel_arch_family(arch.cc), &configs, &none, 0, DirectKernelRegs{}};
  auto name = [&](int i) {
    const auto& t = configs[static_cast<size_t>(i)].config.tile;
    return std::string(kernel_family_name(t.family)) + " " + std::to_string(t.block_n) + "x" + std::to_string(t.block_k);
  };
  std::vector<ShardTiles> rows;
  for (int bm : shipped_block_ms()) {
    detail::GemmChoice ch;
    if (detail::choose_configs(c, bm, int64_t{1} << 20, &ch)) rows.push_back(ShardTiles{bm, name(ch.gate_up), name(ch.down)});
  }
  *out = std::move(rows);
  return Status::ok();
}

int64_t moe_workspace_bytes(const MoeShape& s, FinalizeMode mode, int64_t tokens, int down_k_splits) {
  MoeLayerOptions o;
  o.finalize = mode;
  if (tokens < 0 || !down_k_splits_supported(s, down_k_splits) || !detail::check_shape(s, o).is_ok() ||
      !detail::check_tokens(s, tokens, down_k_splits).is_ok())
    return 0;
  return detail::workspace_layout(s, mode, tokens, tokens * s.top_k * down_k_splits).total;
}

double moe_weight_bytes(const MoeShape& s, double active_experts) {
  // w13 [2I, H] + w2 [H, I] per expert at 4.5 bits per weight (E2M1 + one UE4M3 per 16).
  return active_experts * 3.0 * static_cast<double>(s.intermediate) * static_cast<double>(s.hidden) * 0.5625;
}

}  // namespace fp4moe
