// NVFP4 host codec: E2M1 elements, UE4M3 block scales (16 along K), FP32 global scale; the recipe in docs/format.md.
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "fp4moe/scale_layout.h"
#include "fp4moe/status.h"

namespace fp4moe {

inline constexpr float kE2M1Max = 6.0f;    // largest E2M1 magnitude
inline constexpr float kE4M3Max = 448.0f;  // largest finite E4M3 magnitude

// ---- scalar codecs ----------------------------------------------------------------------
// E2M1 code (low 4 bits: sign, 2 exponent bits, 1 mantissa bit) -> value in {0,.5,1,1.5,2,3,4,6} with sign.
float e2m1_to_float(uint8_t code);
// Nearest E2M1 value, ties to even mantissa, |x| > 6 saturates to 6. Sign kept (a negative value that
// rounds to zero gives code 0x8, -0). Precondition: x is not NaN.
uint8_t float_to_e2m1(float x);
// E4M3 (1-4-3, bias 7, no infinities, 0x7F/0xFF NaN) -> float.
float e4m3_to_float(uint8_t code);
// Nearest E4M3, ties to even, saturating to +-448 (the `satfinite` rule); NaN -> 0x7F.
uint8_t float_to_e4m3_satfinite(float x);

// Global scale of the recipe: 448 * 6 / amax. amax == 0 gives 1 (the tensor is all zeros); a result above FLT_MAX
// (amax tiny) is clamped to FLT_MAX; an infinite or NaN amax gives NaN (no scale exists; quantize rejects it).
float nvfp4_global_scale(float amax);

// One UE4M3 block scale from the block's amax: e4m3(gs * amax / 6), computed in fp32 as written.
uint8_t nvfp4_block_scale(float global_scale, float block_amax);

// ---- tensors ---------------------------------------------------------------------------
// An NVFP4 matrix [rows, k]: `packed` is uint8 [rows, k/2], element 2j in the low nibble of byte j;
// `scales` holds one UE4M3 per 16 elements of a row, laid out as `scale_layout` says.
struct Nvfp4Matrix {
  int64_t rows = 0;
  int64_t k = 0;
  ScaleLayout scale_layout = ScaleLayout::kLinear;
  std::vector<uint8_t> packed;
  std::vector<uint8_t> scales;
  float global_scale = 1.0f;

  int64_t num_scale_cols() const { return k / kNvfp4BlockSize; }
  uint8_t code(int64_t r, int64_t c) const;   // E2M1 code of element (r, c)
  uint8_t scale(int64_t r, int64_t sc) const;  // UE4M3 code of block (r, sc)
};

// A ScaleLayout value that is one of the enumerators (a cast integer may not be).
Status validate_scale_layout(ScaleLayout layout);
// A global scale the codec can use both ways: finite, > 0 and normal, so that 1 / scale is finite too.
Status validate_global_scale(float global_scale);

// The shape rules every NVFP4 entry point shares (host codec and GPU kernels): rows >= 0, k a positive
// multiple of 16 (one scale per 16 elements), rows * k at most 2^40 elements.
Status validate_nvfp4_shape(int64_t rows, int64_t k);

// Validates shape and values: validate_nvfp4_shape, and every value finite.
Status validate_quantize_input(const float* x, int64_t rows, int64_t k);

// Quantize row-major fp32 [rows, k] with the recipe. `global_scale`: the caller's (validate_global_scale), or
// computed from the tensor's amax when empty. Rejects NaN/Inf, k % 16 != 0 and a bad layout with a Status; out of
// host memory is kResourceExhausted. *out is written only on success.
Status quantize_nvfp4(const float* x, int64_t rows, int64_t k, std::optional<float> global_scale,
                      ScaleLayout layout, Nvfp4Matrix* out);
// Same, from bf16 bits.
Status quantize_nvfp4_bf16(const uint16_t* x, int64_t rows, int64_t k, std::optional<float> global_scale,
                           ScaleLayout layout, Nvfp4Matrix* out);

// x ~= e2m1 * float(scale) * (1 / global_scale), in fp32: the product is exact, 1/gs and the last multiply round.
// Rejects a global scale validate_global_scale rejects and scale bytes that are not a finite non-negative UE4M3
// (the sign bit set, or 0x7F).
Status dequantize_nvfp4(const Nvfp4Matrix& m, std::vector<float>* out);

// Re-lay the scales of a matrix (linear <-> swizzled). Padding entries of a swizzled buffer are zero.
Status convert_scale_layout(const std::vector<uint8_t>& in, int64_t rows, int64_t k, ScaleLayout from,
                            ScaleLayout to, std::vector<uint8_t>* out);

}  // namespace fp4moe
