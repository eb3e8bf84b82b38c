// Tuning cache and tactic filtering (see include/fp4moe/tuning.h).
// SPDX-License-Identifier: Apache-2.0
#include "fp4moe/tuning.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>

#include "fp4moe/file_io.h"
#include "fp4moe/planner.h"
#include "src/util/no_throw.h"

namespace fp4moe {
namespace {

constexpr int kFormat = 1;
// A cache holds a few entries per shape and tokens bucket (about 200 bytes each): 4 MiB is far beyond any real one,
// and bounds what a wrong path (a huge file) costs to read.
constexpr int64_t kMaxCacheBytes = int64_t{4} << 20;

}  // namespace

std::string TuningEnvironment::describe() const {
  return gpu + ", " + std::to_string(sms) + " SMs, driver " + std::to_string(driver) + ", CUDA runtime " +
         std::to_string(runtime) + ", fp4moe " + fp4moe;
}

int64_t tokens_bucket(int64_t tokens) {
  int64_t b = 1;
  while (b < tokens && b < (int64_t{1} << 40)) b <<= 1;
  return b;
}

std::optional<TunedChoice> TuningCache::lookup(const MoeShape& s, FinalizeMode mode, int64_t tokens) const {
  const auto it = entries_.find(Key{s.num_experts, s.global_experts(), s.hidden, s.intermediate, s.top_k,
                                    static_cast<int>(mode), tokens_bucket(tokens)});
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

void TuningCache::record(const MoeShape& s, FinalizeMode mode, int64_t bucket, TunedChoice choice) {
  entries_[Key{s.num_experts, s.global_experts(), s.hidden, s.intermediate, s.top_k, static_cast<int>(mode), bucket}] = choice;
}

std::map<int64_t, TunedChoice> TuningCache::choices_for(const MoeShape& s, FinalizeMode mode) const {
  std::map<int64_t, TunedChoice> out;
  for (const auto& [k, v] : entries_)
    if (std::get<0>(k) == s.num_experts && std::get<1>(k) == s.global_experts() && std::get<2>(k) == s.hidden &&
        std::get<3>(k) == s.intermediate && std::get<4>(k) == s.top_k && std::get<5>(k) == static_cast<int>(mode))
      out[std::get<6>(k)] = v;
  return out;
}

std::string TuningCache::to_json() const {
  nlohmann::json j;
  j["format"] = kFormat;
  j["environment"] = {{"gpu", env_.gpu}, {"sms", env_.sms}, {"driver", env_.driver}, {"runtime", env_.runtime},
                      {"fp4moe", env_.fp4moe}};
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& [k, v] : entries_)
    arr.push_back({{"experts", std::get<0>(k)},
                   {"global_experts", std::get<1>(k)},
                   {"hidden", std::get<2>(k)},
                   {"intermediate", std::get<3>(k)},
                   {"top_k", std::get<4>(k)},
                   {"finalize", finalize_mode_name(static_cast<FinalizeMode>(std::get<5>(k)))},
                   {"tokens_bucket", std::get<6>(k)},
                   {"block_m", v.block_m},
                   {"down_k_splits", v.down_k_splits},
                   {"us", v.us}});
  j["entries"] = arr;
  // Bytes that are not UTF-8 (a GPU name is the caller's text) are written as U+FFFD instead of throwing.
  return j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace);
}

Status TuningCache::load(const std::string& path, const TuningEnvironment& env, TuningCache* out, std::string* note) {
  if (out == nullptr) return invalid_argument("output cache is null");
  *out = TuningCache(env);
  auto reject = [&](const std::string& w) {
    if (note) *note = "tuning cache " + path + " ignored: " + w + "; using the built-in heuristic";
    return Status::ok();
  };
  std::string text;
  const Status read = read_regular_file(path, kMaxCacheBytes, &text);
  if (read.code() == StatusCode::kNotFound) {
    if (note) *note = "";  // no cache yet: nothing to say
    return Status::ok();
  }
  if (!read.is_ok()) return reject(read.message());
  return parse(text, env, out, note, path);
}

Status TuningCache::parse(const std::string& text, const TuningEnvironment& env, TuningCache* out, std::string* note,
                          const std::string& path) {
  if (out == nullptr) return invalid_argument("output cache is null");
  *out = TuningCache(env);
  auto reject = [&](const std::string& w) {
    if (note) *note = "tuning cache " + path + " ignored: " + w + "; using the built-in heuristic";
    return Status::ok();
  };
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  TuningCache c(env);
  if (j.is_discarded() || !j.is_object()) return reject("not valid JSON (corrupt or truncated)");
  if (!j.contains("format") || !j["format"].is_number_integer() || j["format"].get<int>() != kFormat)
    return reject("unknown format");
  // Typed readers: a missing field gives the default; a field of another type (a string where a number
  // belongs, a float or bool where an integer does) makes the file invalid instead of throwing.
  auto int_field = [](const nlohmann::json& x, const char* k, int64_t def, int64_t* v) {
    if (!x.contains(k)) return *v = def, true;
    if (!x[k].is_number_integer()) return false;
    *v = x[k].get<int64_t>();
    return true;
  };
  auto str_field = [](const nlohmann::json& x, const char* k, std::string* v) {
    if (!x.contains(k) || !x[k].is_string()) return false;
    *v = x[k].get<std::string>();
    return true;
  };
  if (!j.contains("environment") || !j["environment"].is_object()) return reject("no environment");
  const auto& e = j["environment"];
  TuningEnvironment have;
  int64_t sms = 0, driver = 0, runtime = 0;
  if (!str_field(e, "gpu", &have.gpu) || !str_field(e, "fp4moe", &have.fp4moe) || !int_field(e, "sms", 0, &sms) ||
      !int_field(e, "driver", 0, &driver) || !int_field(e, "runtime", 0, &runtime) || sms < 0 || sms > (1 << 20) ||
      driver < 0 || driver > (1 << 30) || runtime < 0 || runtime > (1 << 30))
    return reject("the environment has missing or wrongly typed fields");
  have.sms = static_cast<int>(sms);
  have.driver = static_cast<int>(driver);
  have.runtime = static_cast<int>(runtime);
  if (!(have == env)) return reject("recorded for " + have.describe() + ", this is " + env.describe());
  if (!j.contains("entries")) return reject("no entries");
  const auto& entries = j["entries"];
  if (!entries.is_array()) return reject("entries is not a list");
  const auto ms = shipped_block_ms();
  for (const auto& x : entries) {
    if (!x.is_object()) return reject("an entry is not an object");
    int64_t E = 0, G = 0, H = 0, I = 0, K = 0, bucket = 0, bm = 0, splits = 0;
    std::string mode;
    FinalizeMode fmode = FinalizeMode::kDeterministic;
    if (!int_field(x, "experts", 0, &E) || !int_field(x, "global_experts", 0, &G) || !int_field(x, "hidden", 0, &H) ||
        !int_field(x, "intermediate", 0, &I) ||
        !int_field(x, "top_k", 0, &K) || !int_field(x, "tokens_bucket", 0, &bucket) ||
        !int_field(x, "block_m", 0, &bm) || !int_field(x, "down_k_splits", 1, &splits) || !str_field(x, "finalize", &mode) ||
        (x.contains("us") && !x["us"].is_number()))
      return reject("an entry has a missing field or one of the wrong type");
    if (G == 0) G = E;  // (written before expert parallelism: the layer held every expert)
    if (E <= 0 || G < E || H <= 0 || I <= 0 || K <= 0 || bucket <= 0 || !finalize_mode_from_name(mode, &fmode) ||
        std::find(ms.begin(), ms.end(), bm) == ms.end() ||
        !down_k_splits_supported(MoeShape{E, H, I, K}, splits))
      return reject("an entry has invalid fields");
    c.record(MoeShape{E, H, I, K, G, 0}, fmode, bucket,
             TunedChoice{static_cast<int>(bm), x.contains("us") ? x["us"].get<double>() : 0.0, static_cast<int>(splits)});
  }
  *out = std::move(c);
  if (note) *note = "";
  return Status::ok();
}

Status TuningCache::save(const std::string& path) const {
  return detail::no_throw([&] { return write_file_atomic(path, to_json() + "\n", /*create_folders=*/true); });
}

std::string default_tuning_cache_path() {
  if (const char* d = std::getenv("FP4MOE_CACHE_DIR"); d && *d) return std::string(d) + "/tuning.json";
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/fp4moe/tuning.json";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/fp4moe/tuning.json";
  return "fp4moe-tuning.json";
}

Status tuning_candidates(const MoeShape& shape, const ArchInfo& arch, std::vector<int>* ok,
                         std::vector<std::string>* rejected) {
  if (ok == nullptr || rejected == nullptr) return invalid_argument("output lists are null");
  ok->clear();
  rejected->clear();
  std::vector<KernelPlan> plans;
  FP4MOE_RETURN_IF_ERROR(plan_kernels(shape, arch, std::nullopt, std::nullopt, &plans));
  for (int bm : shipped_block_ms()) {
    std::string why;
    bool fits = true, planned = false;
    for (const auto& p : plans) {
      if (p.block_m != bm) continue;
      planned = true;
      if (!p.fits || !p.shipped) {
        fits = false;
        why += (why.empty() ? "" : "; ") + p.gemm + ": " + (p.shipped ? p.reason : "not built for " + std::string(arch.name));
      }
    }
    // A block_m whose only tiles are another arch's (the warp-specialized 128-token tile is sm_90's) has no config here.
    if (!planned) fits = false, why = "no tile of this block_m on " + std::string(arch.name);
    if (fits) ok->push_back(bm);
    else rejected->push_back("block_m " + std::to_string(bm) + ": " + why);
  }
  return Status::ok();
}

}  // namespace fp4moe
