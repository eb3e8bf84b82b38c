// Checks fp4moe's CUTLASS model against the real CUTLASS templates: every TRUTH line that
// tests/cutlass_truth/run_truth.sh wrote to $FP4MOE_CUTLASS_TRUTH_FILE must match the model exactly.
// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cutlass_model.h"

namespace fp4moe {
namespace {

struct TruthLine {
  int number = 0;  // 1-based line number in the file
  std::string text;
  std::map<std::string, std::string> fields;  // key=value pairs after "TRUTH"
};

// Compares one TRUTH line with the model field by field and insists that every field of the line is
// checked, so a field added to a probe cannot go unnoticed.
class LineChecker {
 public:
  explicit LineChecker(const TruthLine& line) : line_(line) {}
  ~LineChecker() {
    for (const auto& kv : line_.fields) {
      if (used_.count(kv.first) == 0) {
        ADD_FAILURE() << where() << "field '" << kv.first << "' is not checked by this test";
      }
    }
  }

  bool has(const std::string& key) const { return line_.fields.count(key) != 0; }

  // The field as an integer; records a failure (and returns false) if missing or malformed.
  bool get(const std::string& key, int64_t* value) {
    used_.insert(key);
    auto it = line_.fields.find(key);
    if (it == line_.fields.end()) {
      ADD_FAILURE() << where() << "missing field '" << key << "'";
      return false;
    }
    errno = 0;
    char* end = nullptr;
    const long long v = std::strtoll(it->second.c_str(), &end, 10);
    if (errno != 0 || end == it->second.c_str() || *end != '\0') {
      ADD_FAILURE() << where() << "field '" << key << "' is not an integer: " << it->second;
      return false;
    }
    *value = v;
    return true;
  }
  std::string str(const std::string& key) {
    used_.insert(key);
    auto it = line_.fields.find(key);
    if (it == line_.fields.end()) {
      ADD_FAILURE() << where() << "missing field '" << key << "'";
      return "";
    }
    return it->second;
  }
  void ignore(const std::string& key) { used_.insert(key); }

  void expect(const std::string& key, int64_t model) {
    int64_t truth = 0;
    if (get(key, &truth) && truth != model) {
      ADD_FAILURE() << where() << key << ": CUTLASS " << truth << ", model " << model;
    }
  }
  std::string where() const { return "line " + std::to_string(line_.number) + " [" + line_.text + "]: "; }

 private:
  const TruthLine& line_;
  std::set<std::string> used_;
};

class CutlassTruth : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* path = std::getenv("FP4MOE_CUTLASS_TRUTH_FILE");
    if (path == nullptr || *path == '\0') {
      GTEST_SKIP() << "FP4MOE_CUTLASS_TRUTH_FILE is not set: run tests/cutlass_truth/run_truth.sh OUTFILE "
                      "(needs nvcc and the network once) and set it to OUTFILE to check the CUTLASS model";
    }
    std::ifstream in(path);
    if (!in) FAIL() << "FP4MOE_CUTLASS_TRUTH_FILE=" << path << ": cannot open the file";
    std::string text;
    int number = 0;
    while (std::getline(in, text)) {
      ++number;
      if (text.rfind("TRUTH ", 0) != 0) continue;
      TruthLine line;
      line.number = number;
      line.text = text;
      std::istringstream words(text.substr(6));
      std::string word;
      while (words >> word) {
        const size_t eq = word.find('=');
        if (eq == std::string::npos || eq == 0) FAIL() << "line " << number << ": malformed field '" << word << "'";
        if (!line.fields.emplace(word.substr(0, eq), word.substr(eq + 1)).second) {
          FAIL() << "line " << number << ": duplicate field '" << word.substr(0, eq) << "'";
        }
      }
      lines_.push_back(line);
    }
    if (lines_.empty()) FAIL() << "FP4MOE_CUTLASS_TRUTH_FILE=" << path << " has no TRUTH lines";
  }

  std::vector<const TruthLine*> of_kind(const std::string& kind) const {
    std::vector<const TruthLine*> out;
    for (const TruthLine& l : lines_) {
      auto it = l.fields.find("kind");
      if (it != l.fields.end() && it->second == kind) out.push_back(&l);
    }
    return out;
  }

  // Common keys: kind and cutlass.
  static bool version_of(LineChecker& c, CutlassVersion* v) {
    c.ignore("kind");
    const Status s = parse_cutlass_version(c.str("cutlass"), v);
    if (!s.is_ok()) ADD_FAILURE() << c.where() << s.to_string();
    return s.is_ok();
  }

  static bool moe_tactic_of(LineChecker& c, CutlassSm120MoeTactic* t) {
    int64_t m = 0, n = 0, k = 0, swap = 0;
    if (!c.get("m", &m) || !c.get("n", &n) || !c.get("k", &k) || !c.get("swap", &swap)) return false;
    t->tile_m = static_cast<int>(m);
    t->tile_n = static_cast<int>(n);
    t->tile_k = static_cast<int>(k);
    t->swap_ab = swap != 0;
    const std::string epi = c.str("epi"), out = c.str("out");
    if (epi == "NONE") {
      t->epilogue = MoeEpilogueFusion::kNone;
    } else if (epi == "FINALIZE") {
      t->epilogue = MoeEpilogueFusion::kFinalize;
    } else {
      ADD_FAILURE() << c.where() << "unknown epi " << epi;
      return false;
    }
    if (out == "bf16") {
      t->output = MoeOutputType::kBf16;
    } else if (out == "fp16") {
      t->output = MoeOutputType::kFp16;
    } else {
      ADD_FAILURE() << c.where() << "unknown out " << out;
      return false;
    }
    return true;
  }

  std::vector<TruthLine> lines_;
};

const std::set<std::string> kKinds = {"moe_tactic", "moe_layout", "sm90", "blockscaled", "sm100carveout"};

// The tile of a block-scaled builder line (m, n, k, two_sm, grouped) for `arch`; false (and a recorded
// failure, by LineChecker::get) when a field is missing.
bool blockscaled_shape_of(LineChecker& c, int arch, CutlassBlockScaledShape* shape) {
  int64_t m = 0, n = 0, k = 0, two_sm = 0, grouped = 0;
  if (!c.get("m", &m) || !c.get("n", &n) || !c.get("k", &k) || !c.get("two_sm", &two_sm) || !c.get("grouped", &grouped))
    return false;
  shape->arch = arch;
  shape->tile_m = static_cast<int>(m);
  shape->tile_n = static_cast<int>(n);
  shape->tile_k = static_cast<int>(k);
  shape->two_sm = two_sm != 0;
  shape->grouped = grouped != 0;
  return true;
}

// A failure naming the truth line when the model refuses a configuration CUTLASS compiled; true if it accepted.
bool model_accepts(const LineChecker& c, const Status& s) {
  if (s.is_ok()) return true;
  ADD_FAILURE() << c.where() << "model refuses: " << s.to_string();
  return false;
}

TEST_F(CutlassTruth, EveryLineIsOfAKnownKind) {
  for (const TruthLine& l : lines_) {
    auto it = l.fields.find("kind");
    EXPECT_TRUE(it != l.fields.end() && kKinds.count(it->second) == 1)
        << "line " << l.number << " has no known kind: " << l.text;
  }
}

TEST_F(CutlassTruth, MoeTacticsMatch) {
  const auto lines = of_kind("moe_tactic");
  ASSERT_FALSE(lines.empty()) << "no kind=moe_tactic lines (probe_sm120 output missing?)";
  for (const TruthLine* l : lines) {
    LineChecker c(*l);
    CutlassVersion v{};
    CutlassSm120MoeTactic t;
    if (!version_of(c, &v) || !moe_tactic_of(c, &t)) continue;
    CutlassSm120MoePlan p;
    if (!model_accepts(c, cutlass_sm120_moe_plan(v, t, &p))) continue;
    c.expect("limit", p.limit);
    c.expect("cap", p.builder.reduced_capacity);
    c.expect("sched_pipe", p.builder.scheduler_pipeline_bytes);
    c.expect("tmaps", p.builder.tensormap_bytes);
    c.expect("tmap_ready_pipe", p.builder.tensormap_ready_pipeline_bytes);
    c.expect("clc_response", p.builder.clc_response_bytes);
    c.expect("carve", p.epilogue.total);
    c.expect("epi_tensors", p.epilogue.tensors);
    c.expect("epi_tmaps", p.epilogue.tensormaps);
    c.expect("epi_pipe", p.epilogue.pipeline);
    c.expect("a", p.builder.a_bytes);
    c.expect("b", p.builder.b_bytes);
    c.expect("sfa", p.builder.sfa_bytes);
    c.expect("sfb", p.builder.sfb_bytes);
    c.expect("bar", p.builder.pipeline_bytes);
    c.expect("stage", p.builder.stage_bytes);
    c.expect("builder_stages", p.builder.stages);
    c.expect("total", p.smem.total);
    c.expect("fits", p.fits ? 1 : 0);
    c.expect("over", p.over_by);
    c.expect("largest_fit_stages", p.largest_fitting_stages);
    c.expect("largest_fit_total", p.largest_fitting_bytes);
    EXPECT_EQ(p.builder.carveout_bytes, p.epilogue.total) << c.where();
  }
}

TEST_F(CutlassTruth, MoeLayoutsMatch) {
  const auto lines = of_kind("moe_layout");
  ASSERT_FALSE(lines.empty()) << "no kind=moe_layout lines (probe_sm120 output missing?)";
  for (const TruthLine* l : lines) {
    LineChecker c(*l);
    CutlassVersion v{};
    CutlassSm120MoeTactic t;
    int64_t stages = 0;
    if (!version_of(c, &v) || !moe_tactic_of(c, &t) || !c.get("stages", &stages)) continue;
    CutlassSm120MoeSmem r;
    if (!model_accepts(c, cutlass_sm120_moe_smem(v, t, static_cast<int>(stages), &r))) continue;
    c.expect("total", r.total);
    c.expect("tensors", r.tensors_bytes);
    c.expect("mainloop", r.mainloop_bytes);
    c.expect("a_off", r.a_offset);
    c.expect("a", r.a_bytes);
    c.expect("b_off", r.b_offset);
    c.expect("b", r.b_bytes);
    c.expect("sfa_off", r.sfa_offset);
    c.expect("sfa", r.sfa_bytes);
    c.expect("sfb_off", r.sfb_offset);
    c.expect("sfb", r.sfb_bytes);
    c.expect("epi_off", r.epilogue_offset);
    c.expect("epilogue", r.epilogue_bytes);
    c.expect("collective", r.epilogue_collective);
    c.expect("fusion", r.epilogue_fusion);
    c.expect("pipelines_off", r.pipelines_offset);
    c.expect("pipelines", r.pipelines_bytes);
    c.expect("sched_pipe", r.pipeline_scheduler);
    c.expect("ml_pipe", r.pipeline_mainloop);
    c.expect("epi_load_pipe", r.pipeline_epi_load);
    c.expect("load_order_pipe", r.pipeline_load_order);
    c.expect("resp_off", r.scheduler_response_offset);
    c.expect("resp", r.scheduler_response_bytes);
    c.expect("tmaps_off", r.tensormaps_offset);
    c.expect("tmaps", r.tensormaps_bytes);
    c.expect("tmaps_ml_off", r.tensormaps_mainloop_offset);
    c.expect("tmaps_ml", r.tensormaps_mainloop);
    c.expect("tmaps_epi_off", r.tensormaps_epilogue_offset);
    c.expect("tmaps_epi", r.tensormaps_epilogue);
  }
}

// Carve-outs at which the probes evaluate the builders' stage-count functions: keys "stages_at_<N>".
std::vector<std::pair<std::string, int64_t>> carveout_keys(const TruthLine& l) {
  std::vector<std::pair<std::string, int64_t>> out;
  const std::string prefix = "stages_at_";
  for (const auto& kv : l.fields) {
    if (kv.first.rfind(prefix, 0) == 0) out.emplace_back(kv.first, std::atoll(kv.first.c_str() + prefix.size()));
  }
  return out;
}

TEST_F(CutlassTruth, Sm90BuilderMatches) {
  const auto lines = of_kind("sm90");
  ASSERT_FALSE(lines.empty()) << "no kind=sm90 lines (probe_builders output missing?)";
  for (const TruthLine* l : lines) {
    LineChecker c(*l);
    CutlassVersion v{};
    CutlassSm90GemmShape shape;
    int64_t m = 0, n = 0, k = 0, a_bits = 0, b_bits = 0, grouped = 0;
    if (!version_of(c, &v) || !c.get("m", &m) || !c.get("n", &n) || !c.get("k", &k) || !c.get("a_bits", &a_bits) ||
        !c.get("b_bits", &b_bits) || !c.get("grouped", &grouped)) {
      continue;
    }
    c.ignore("type");  // element type name, informational (a_bits / b_bits carry what matters)
    shape.tile_m = static_cast<int>(m);
    shape.tile_n = static_cast<int>(n);
    shape.tile_k = static_cast<int>(k);
    shape.a_bits = static_cast<int>(a_bits);
    shape.b_bits = static_cast<int>(b_bits);
    shape.grouped = grouped != 0;
    CutlassSm90StageCount r;
    if (!model_accepts(c, cutlass_sm90_stage_count(v, shape, &r))) continue;
    c.expect("cap", r.reduced_capacity);
    c.expect("kernel_carveout", r.tensormap_bytes + r.scheduler_pipeline_bytes);
    c.expect("tmaps", r.tensormap_bytes);
    c.expect("sched_pipe", r.scheduler_pipeline_bytes);
    c.expect("pipeline_1stage", r.pipeline_bytes);
    c.expect("builder_stages", r.stages);  // the builder was instantiated with carve-out 0
    const auto keys = carveout_keys(*l);
    EXPECT_GE(keys.size(), 3u) << c.where();
    for (const auto& key : keys) {
      shape.carveout_bytes = key.second;
      const Status s = cutlass_sm90_stage_count(v, shape, &r);
      ASSERT_TRUE(s.is_ok()) << s.to_string();
      c.expect(key.first, r.stages);
    }
  }
}

TEST_F(CutlassTruth, BlockScaledBuildersMatch) {
  const auto lines = of_kind("blockscaled");
  ASSERT_FALSE(lines.empty()) << "no kind=blockscaled lines (probe_builders output missing?)";
  std::set<int64_t> arches;
  for (const TruthLine* l : lines) {
    LineChecker c(*l);
    CutlassVersion v{};
    int64_t arch = 0;
    CutlassBlockScaledShape shape;
    if (!version_of(c, &v) || !c.get("arch", &arch) || !blockscaled_shape_of(c, static_cast<int>(arch), &shape)) continue;
    arches.insert(arch);
    CutlassBlockScaledStageCount r;
    if (!model_accepts(c, cutlass_blockscaled_stage_count(v, shape, &r))) continue;
    c.expect("cap", r.reduced_capacity);
    if (arch == 100) {
      c.expect("kernel_carveout", r.kernel_carveout);
    } else {
      c.expect("sched_pipe", r.scheduler_pipeline_bytes);
      c.expect("clc_response", r.clc_response_bytes);
      c.expect("tmaps", r.tensormap_bytes);
      c.expect("tmap_ready_pipe", r.tensormap_ready_pipeline_bytes);
    }
    c.expect("a", r.a_bytes);
    c.expect("b", r.b_bytes);
    c.expect("sfa", r.sfa_bytes);
    c.expect("sfb", r.sfb_bytes);
    c.expect("stage", r.stage_bytes);
    c.expect("builder_stages", r.stages);
    const auto keys = carveout_keys(*l);
    EXPECT_GE(keys.size(), 3u) << c.where();
    for (const auto& key : keys) {
      shape.carveout_bytes = key.second;
      const Status s = cutlass_blockscaled_stage_count(v, shape, &r);
      ASSERT_TRUE(s.is_ok()) << s.to_string();
      c.expect(key.first, r.stages);
    }
  }
  EXPECT_EQ(arches, (std::set<int64_t>{100, 120})) << "expected lines for both sm_100 and sm_120";
}

TEST_F(CutlassTruth, Sm100KernelCarveoutTermsMatch) {
  const auto lines = of_kind("sm100carveout");
  ASSERT_FALSE(lines.empty()) << "no kind=sm100carveout lines (probe_builders output missing?)";
  for (const TruthLine* l : lines) {
    LineChecker c(*l);
    CutlassVersion v{};
    CutlassBlockScaledShape shape;
    if (!version_of(c, &v) || !blockscaled_shape_of(c, 100, &shape)) continue;
    CutlassBlockScaledStageCount r;
    if (!model_accepts(c, cutlass_blockscaled_stage_count(v, shape, &r))) continue;
    c.expect("acc_pipe", r.accumulator_pipeline_bytes);
    c.expect("clc_pipe", r.scheduler_pipeline_bytes);
    c.expect("load_order", r.load_order_barrier_bytes);
    c.expect("clc_response", r.clc_response_bytes);
    c.expect("clc_throttle", r.clc_throttle_pipeline_bytes);
    c.expect("tmem_dealloc", r.tmem_dealloc_bytes);
    c.expect("tmem_ptrs", r.tmem_base_ptr_bytes);
    c.expect("tmaps", r.tensormap_bytes);
    c.expect("tmap_ready_pipe", r.tensormap_ready_pipeline_bytes);
    c.expect("total", r.kernel_carveout);
  }
}

// Every tactic of the modelled tactic lists is backed by a probe line, so the model's verdicts on
// them are checked, not extrapolated.
TEST_F(CutlassTruth, TacticListsAreCovered) {
  std::set<std::string> probed;
  std::set<std::string> versions;
  for (const TruthLine* l : of_kind("moe_tactic")) {
    const auto& f = l->fields;
    const std::string key = f.at("cutlass") + " " + f.at("m") + "x" + f.at("n") + "x" + f.at("k") + " " +
                            f.at("epi") + " swap_ab=" + f.at("swap") + " " + f.at("out");
    probed.insert(key);
    versions.insert(f.at("cutlass"));
  }
  ASSERT_FALSE(versions.empty());
  for (const std::string& name : versions) {
    CutlassVersion v{};
    ASSERT_TRUE(parse_cutlass_version(name, &v).is_ok()) << name;
    for (const CutlassSm120MoeTactic& t : cutlass_sm120_moe_tactics(v)) {
      EXPECT_EQ(probed.count(name + " " + t.name()), 1u) << "CUTLASS " << name << " tactic " << t.name()
                                                         << " has no kind=moe_tactic line";
    }
  }
}

}  // namespace
}  // namespace fp4moe
