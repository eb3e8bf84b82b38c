// Argument parsing the CLI's commands share (tools/cli_args.h).
// SPDX-License-Identifier: Apache-2.0
#include "cli_args.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>

#include "fp4moe/planner.h"
#include "fp4moe/shard.h"

namespace fp4moe::cli {
namespace {

// A whole positive decimal integer of at most `max`, no sign, no spaces, no trailing characters.
bool parse_positive(const std::string& s, int64_t max, int64_t* out) {
  if (s.empty() || s.size() > 19) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || v <= 0 || v > max) return false;
  *out = v;
  return true;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::string part;
  std::stringstream ss(s);
  while (std::getline(ss, part, sep)) parts.push_back(part);
  if (!s.empty() && s.back() == sep) parts.push_back("");
  return parts;
}

}  // namespace

CLI::Validator FiniteRange(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        errno = 0;
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (text.empty() || end == text.c_str() || *end != '\0' || errno == ERANGE || !std::isfinite(v))
          return "'" + text + "' is not a finite number";
        if (v < lo || v > hi) {
          std::ostringstream m;
          m << "value " << text << " not in range [" << lo << " - " << hi << "]";
          return m.str();
        }
        return std::string();
      },
      "FINITE in [" + std::to_string(lo) + " - " + std::to_string(hi) + "]");
}

void add_model_options(CLI::App* sub, ModelOptions* o) {
  sub->add_option("--model", o->model, "model preset: glm5, deepseek-v3, kimi-k2, glm4.5, qwen3-235b, qwen3-30b, "
                                        "gpt-oss-120b, mixtral")
      ->capture_default_str();
  sub->add_option("--shape", o->shape, "a custom layer E,H,I,k (experts, hidden, intermediate, top-k) instead of --model");
  sub->add_option("--tp", o->tp, "tensor parallelism: one GPU's shard holds I / N of every expert")
      ->check(CLI::Range(int64_t{1}, int64_t{1024}))->capture_default_str();
  sub->add_option("--ep", o->ep, "expert parallelism: one GPU's shard holds E / N of the experts")
      ->check(CLI::Range(int64_t{1}, int64_t{1024}))->capture_default_str();
}

std::string SelectedModel::label() const {
  std::string l = name;
  if (tp > 1 || ep > 1) {
    l += ", ";
    if (tp > 1) l += "TP" + std::to_string(tp);
    if (tp > 1 && ep > 1) l += "+";
    if (ep > 1) l += "EP" + std::to_string(ep);
    l += " shard";
  }
  return l + " (" + shape_text(shard) + ")";
}

Status select_model(const ModelOptions& o, SelectedModel* out) {
  SelectedModel m;
  if (!o.shape.empty()) {
    FP4MOE_RETURN_IF_ERROR(parse_shape(o.shape, &m.full));
    m.key = "custom";
    m.name = "custom layer";
  } else {
    const ModelPreset* p = nullptr;
    FP4MOE_RETURN_IF_ERROR(find_model(o.model, &p));
    m.key = p->key;
    m.name = p->name;
    m.full = p->shape;
    m.moe_layers = p->moe_layers;
  }
  if (o.tp < 1 || o.ep < 1) return invalid_argument("--tp and --ep must be at least 1");
  // The first expert-parallel rank's shard: every rank costs the same under uniform routing.
  if (const Status s = shard_shape(m.full, o.tp, o.ep, 0, &m.shard); !s.is_ok())
    return invalid_argument("--" + s.message());  // ("tp N: ..." or "ep N: ...": the option's name)
  m.tp = o.tp;
  m.ep = o.ep;
  *out = m;
  return Status::ok();
}

Status parse_tile(const std::string& text, std::vector<int>* tile) {
  const std::vector<std::string> parts = split(text, 'x');
  std::vector<int> t;
  for (const std::string& p : parts) {
    int64_t v = 0;
    if (!parse_positive(p, std::numeric_limits<int>::max(), &v))
      return invalid_argument("--tile '" + text + "': expected MxNxK with positive integers, e.g. 16x128x256");
    t.push_back(static_cast<int>(v));
  }
  if (t.size() != 3) return invalid_argument("--tile '" + text + "': expected MxNxK, e.g. 16x128x256");
  *tile = t;
  return Status::ok();
}

Status parse_shape(const std::string& text, MoeShape* shape) {
  const std::vector<std::string> parts = split(text, ',');
  int64_t v[4] = {0, 0, 0, 0};
  bool ok = parts.size() == 4;
  for (size_t i = 0; ok && i < 4; ++i) ok = parse_positive(parts[i], int64_t{1} << 40, &v[i]);
  if (!ok)
    return invalid_argument("--shape '" + text + "': expected E,H,I,k (experts, hidden, intermediate, top-k), positive "
                            "integers, e.g. 256,6144,2048,8");
  *shape = MoeShape{v[0], v[1], v[2], v[3]};
  return Status::ok();
}

}  // namespace fp4moe::cli
