// NVFP4 block-scale layouts (linear [rows, K/16] and the 128x4 swizzle read by cuBLASLt/CUTLASS tensor cores), and
// which scale values are usable: the rules the host codec and the GPU quantizer and dequantizer share.
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cfloat>
#include <cstdint>

#include "fp4moe/detail/hd.h"

namespace fp4moe {

enum class ScaleLayout {
  kLinear,         // [rows, K/16] row-major, as checkpoints (ModelOpt) store it
  kSwizzled128x4,  // rows padded to 128, scale columns padded to 4; [rows/128, cols/4, 32, 4, 4]
};

const char* scale_layout_name(ScaleLayout layout);

inline constexpr int64_t kNvfp4BlockSize = 16;  // elements per UE4M3 block scale, along K

// A global scale is usable when it is finite, positive and normal (so 1 / scale is finite too: dequantization
// multiplies by it). Both comparisons are false for NaN.
FP4MOE_HD constexpr bool usable_global_scale(float gs) { return gs >= FLT_MIN && gs <= FLT_MAX; }
// A UE4M3 block scale byte is usable when it is non-negative and not NaN (0x7F): no sign bit.
FP4MOE_HD constexpr bool usable_ue4m3_scale(uint8_t b) { return (b & 0x80) == 0 && b != 0x7F; }

FP4MOE_HD constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
FP4MOE_HD constexpr int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

// Rows and scale columns a buffer of this layout holds (padding included).
FP4MOE_HD constexpr int64_t scale_rows_padded(int64_t rows, ScaleLayout layout) {
  return layout == ScaleLayout::kLinear ? rows : round_up(rows, 128);
}
FP4MOE_HD constexpr int64_t scale_cols_padded(int64_t k, ScaleLayout layout) {
  return layout == ScaleLayout::kLinear ? k / kNvfp4BlockSize : round_up(k / kNvfp4BlockSize, 4);
}
// Bytes of a scale buffer (one UE4M3 byte per entry).
FP4MOE_HD constexpr int64_t scale_buffer_bytes(int64_t rows, int64_t k, ScaleLayout layout) {
  return scale_rows_padded(rows, layout) * scale_cols_padded(k, layout);
}

// Byte offset of the scale of (row, scale column `sc`) in the 128x4 swizzled layout.
// A 128-row x 4-column tile is 512 contiguous bytes; inside it row m sits at
// (m % 32) * 16 + ((m / 32) % 4) * 4 and the column adds sc % 4. Tiles run along K first.
// `num_scale_cols` is the unpadded K/16.
FP4MOE_HD constexpr int64_t swizzled_scale_offset(int64_t row, int64_t sc, int64_t num_scale_cols) {
  const int64_t k_tiles = ceil_div(num_scale_cols, 4);
  return ((row / 128) * k_tiles + sc / 4) * 512 + (row % 32) * 16 + ((row / 32) % 4) * 4 + (sc % 4);
}

FP4MOE_HD constexpr int64_t scale_offset(int64_t row, int64_t sc, int64_t num_scale_cols, ScaleLayout layout) {
  return layout == ScaleLayout::kLinear ? row * num_scale_cols + sc
                                        : swizzled_scale_offset(row, sc, num_scale_cols);
}

}  // namespace fp4moe
