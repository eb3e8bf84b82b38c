// libFuzzer target: the CLI's argument parsing (tiles, shapes, finite ranges) and the name lookups (presets, GPUs,
// archs) on arbitrary text never crash or throw, and what they accept is within their rules.
// SPDX-License-Identifier: Apache-2.0
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "cli_args.h"
#include "fp4moe/planner.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<int> tile;
  if (fp4moe::cli::parse_tile(text, &tile).is_ok() && (tile.size() != 3 || tile[0] <= 0 || tile[1] <= 0 || tile[2] <= 0))
    std::abort();
  fp4moe::MoeShape shape;
  if (fp4moe::cli::parse_shape(text, &shape).is_ok() &&
      (shape.num_experts <= 0 || shape.hidden <= 0 || shape.intermediate <= 0 || shape.top_k <= 0))
    std::abort();
  std::string value = text;
  const std::string why = fp4moe::cli::FiniteRange(0.0, 10.0)(value);
  if (why.empty()) {
    const double v = std::strtod(text.c_str(), nullptr);
    if (!std::isfinite(v) || v < 0.0 || v > 10.0) std::abort();
  }
  const fp4moe::ModelPreset* m = nullptr;
  const fp4moe::GpuInfo* g = nullptr;
  const fp4moe::ArchInfo* a = nullptr;
  (void)fp4moe::find_model(text, &m);
  (void)fp4moe::find_gpu(text, &g);
  (void)fp4moe::find_arch(text, &a);
  return 0;
}
