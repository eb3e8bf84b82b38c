// CPU reference helpers: exact NVFP4 decode (see nvfp4_reference.h).
// SPDX-License-Identifier: Apache-2.0
#include "nvfp4_reference.h"

#include "fp4moe/bf16.h"

namespace fp4moe::reference {

double decode_exact(const Nvfp4Matrix& m, int64_t r, int64_t c) {
  return static_cast<double>(e2m1_to_float(m.code(r, c))) *
         static_cast<double>(e4m3_to_float(m.scale(r, c / kNvfp4BlockSize))) / static_cast<double>(m.global_scale);
}

std::vector<uint16_t> dequantize_to_bf16(const Nvfp4Matrix& m) {
  std::vector<float> f;
  std::vector<uint16_t> out;
  if (!dequantize_nvfp4(m, &f).is_ok()) return out;
  out.resize(f.size());
  for (size_t i = 0; i < f.size(); ++i) out[i] = float_to_bf16(f[i]);
  return out;
}

}  // namespace fp4moe::reference
