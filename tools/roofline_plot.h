// Draws the roofline PNG of a benchmark result with tools/roofline.py, run without a shell.
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>

#include "fp4moe/status.h"

namespace fp4moe::cli {

// Where roofline.py is: $FP4MOE_ROOFLINE, else beside this executable (the build tree), else
// ../share/fp4moe/roofline.py from it (an installed tree). Empty when none exists.
std::string roofline_script();

// Runs `python3 roofline.py - png` with the benchmark JSON on its standard input (the first python3 on PATH that
// has matplotlib, else /usr/bin/python3, Debian's): no shell, so no character of `png` is interpreted.
Status draw_roofline(const std::string& bench_json, const std::string& png);

}  // namespace fp4moe::cli
