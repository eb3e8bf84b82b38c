// Argument parsing the CLI's commands share: finite numeric ranges, tiles, custom shapes, and the exit-code scheme.
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "fp4moe/moe.h"
#include "fp4moe/status.h"

namespace fp4moe::cli {

// Exit codes of every fp4moe command (docs/reliability.md): 0 done; 1 the work failed (an I/O or CUDA error, a
// check that found a difference, a benchmark or tuning error, an output that could not be written); 2 the
// command line is wrong (an unknown flag, a bad or out-of-range value, an unknown preset, options that do not
// go together). CLI11's own parse errors are mapped to 2.
inline constexpr int kExitOk = 0, kExitFailed = 1, kExitUsage = 2;

// A CLI11 check that the value is a finite number in [lo, hi] (CLI::Range lets NaN through: every comparison
// with NaN is false).
CLI::Validator FiniteRange(double lo, double hi);

// The problem a command works on: a model preset (or a custom --shape), optionally sharded for one GPU of a
// tensor-parallel (--tp N: I / N) or expert-parallel (--ep N: E / N local experts of E) deployment, or both.
struct ModelOptions {
  std::string model = "glm5";
  std::string shape;  // "E,H,I,k": a custom shape instead of the preset
  int64_t tp = 1, ep = 1;
};
// Adds --model, --shape, --tp and --ep to `sub`.
void add_model_options(CLI::App* sub, ModelOptions* o);

struct SelectedModel {
  std::string key, name;  // "glm5", "GLM-5 (744B-A40B)"; "custom", "E=.. H=.. I=.. k=.."
  MoeShape full;          // the model's layer
  MoeShape shard;         // one GPU's part (= full without --tp / --ep): I / tp, experts [0, E / ep) of E
  int moe_layers = 1;
  int64_t tp = 1, ep = 1;
  std::string label() const;  // "GLM-5 (744B-A40B), TP8 shard (E=256 H=6144 I=256 k=8)"
};
// Resolves the options: the preset or shape, and the shard (tp must divide I into a multiple of 64, ep must
// divide E). Errors name the rule.
Status select_model(const ModelOptions& o, SelectedModel* out);

// "MxNxK" with positive integers, e.g. 16x128x256.
Status parse_tile(const std::string& text, std::vector<int>* tile);
// "E,H,I,k", e.g. 256,6144,256,8: a custom MoE shape (each a positive integer; the layer's rules are checked
// where it is used).
Status parse_shape(const std::string& text, MoeShape* shape);

}  // namespace fp4moe::cli
