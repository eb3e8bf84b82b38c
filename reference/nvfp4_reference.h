// CPU reference helpers kept apart from the library: exact NVFP4 decode in fp64 (ground truth for tests).
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <vector>

#include "fp4moe/nvfp4.h"

namespace fp4moe::reference {

// e2m1(code) * ue4m3(scale) / global_scale in double: the exact value the format stores.
double decode_exact(const Nvfp4Matrix& m, int64_t r, int64_t c);

// The bf16 a dequantize kernel must produce: bf16_rne(float(e2m1 * scale) * float(1 / global_scale)).
std::vector<uint16_t> dequantize_to_bf16(const Nvfp4Matrix& m);

}  // namespace fp4moe::reference
