// NVFP4 host codec. Written for clarity, not speed: table look-ups with explicit tie rules, so that it
// can serve as the bit-exact reference the GPU kernels (which round with compares and PTX) are tested against.
// SPDX-License-Identifier: Apache-2.0
#include "fp4moe/nvfp4.h"

#include <array>
#include <cfloat>
#include <cmath>
#include <new>
#include <string>

#include "fp4moe/bf16.h"

namespace fp4moe {
namespace {

constexpr std::array<float, 8> kE2M1Magnitudes = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

// The 127 non-negative finite E4M3 values, indexed by code 0x00..0x7E; strictly increasing.
std::array<float, 127> make_e4m3_table() {
  std::array<float, 127> t{};
  for (int c = 0; c < 127; ++c) t[c] = e4m3_to_float(static_cast<uint8_t>(c));
  return t;
}
const std::array<float, 127>& e4m3_table() {
  static const std::array<float, 127> t = make_e4m3_table();
  return t;
}

std::string hex_byte(uint8_t b) {
  const char* d = "0123456789abcdef";
  return std::string("0x") + d[b >> 4] + d[b & 15];
}

}  // namespace

const char* scale_layout_name(ScaleLayout layout) {
  return layout == ScaleLayout::kLinear ? "linear" : "swizzled128x4";
}

float e2m1_to_float(uint8_t code) {
  const float m = kE2M1Magnitudes[code & 0x7];
  return (code & 0x8) ? -m : m;
}

uint8_t float_to_e2m1(float x) {
  const float a = std::fabs(x);
  const uint8_t sign = std::signbit(x) ? 0x8 : 0x0;
  uint8_t code = 7;  // |x| >= 6 saturates
  for (uint8_t i = 0; i < 7; ++i) {
    const float lo = kE2M1Magnitudes[i], hi = kE2M1Magnitudes[i + 1];
    if (a < hi) {
      const float mid = 0.5f * (lo + hi);  // exact: both have at most 2 significant bits
      if (a < mid) code = i;
      else if (a > mid) code = i + 1;
      else code = (i % 2 == 0) ? i : i + 1;  // tie: the even code (mantissa bit 0)
      break;
    }
  }
  return sign | code;
}

float e4m3_to_float(uint8_t code) {
  const int exp = (code >> 3) & 0xF;
  const int man = code & 0x7;
  float mag;
  if (exp == 0xF && man == 0x7) {
    mag = NAN;
  } else if (exp == 0) {
    mag = std::ldexp(static_cast<float>(man), -9);  // subnormal: man/8 * 2^-6
  } else {
    mag = std::ldexp(1.0f + man / 8.0f, exp - 7);
  }
  return (code & 0x80) ? -mag : mag;
}

uint8_t float_to_e4m3_satfinite(float x) {
  if (std::isnan(x)) return 0x7F;
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const float a = std::fabs(x);
  const auto& t = e4m3_table();
  if (a >= t[126]) return sign | 0x7E;  // satfinite: everything from 448 up, inf included
  // First code whose value is >= a.
  int hi = 0;
  int lo_i = 0, hi_i = 126;
  while (lo_i < hi_i) {
    const int mid = (lo_i + hi_i) / 2;
    if (t[mid] >= a) hi_i = mid; else lo_i = mid + 1;
  }
  hi = lo_i;
  if (t[hi] == a || hi == 0) return sign | static_cast<uint8_t>(hi);
  const int lo = hi - 1;
  const double mid = 0.5 * (static_cast<double>(t[lo]) + static_cast<double>(t[hi]));
  int code;
  if (a < mid) code = lo;
  else if (a > mid) code = hi;
  else code = (lo % 2 == 0) ? lo : hi;  // tie: even mantissa
  return sign | static_cast<uint8_t>(code);
}

float nvfp4_global_scale(float amax) {
  if (!std::isfinite(amax)) return NAN;  // no scale maps an infinite or NaN amax into range
  if (!(amax > 0.0f)) return 1.0f;
  const float gs = (kE4M3Max * kE2M1Max) / amax;
  return std::isinf(gs) ? FLT_MAX : gs;
}

uint8_t nvfp4_block_scale(float global_scale, float block_amax) {
  float v = global_scale * block_amax;
  v = v / kE2M1Max;
  return float_to_e4m3_satfinite(v);
}

uint8_t Nvfp4Matrix::code(int64_t r, int64_t c) const {
  const uint8_t byte = packed[static_cast<size_t>(r * (k / 2) + c / 2)];
  return (c % 2 == 0) ? (byte & 0xF) : (byte >> 4);
}

uint8_t Nvfp4Matrix::scale(int64_t r, int64_t sc) const {
  return scales[static_cast<size_t>(scale_offset(r, sc, num_scale_cols(), scale_layout))];
}

Status validate_scale_layout(ScaleLayout layout) {
  if (layout != ScaleLayout::kLinear && layout != ScaleLayout::kSwizzled128x4)
    return invalid_argument("scale layout " + std::to_string(static_cast<int>(layout)) +
                            " is not a ScaleLayout (kLinear or kSwizzled128x4)");
  return Status::ok();
}

Status validate_global_scale(float gs) {
  // 1 / gs must be finite too: the dequantization multiplies by it (a subnormal gs would give inf, then NaN).
  if (!usable_global_scale(gs))
    return invalid_argument("global scale must be a finite normal float > 0 (1 / scale finite), got " + std::to_string(gs));
  return Status::ok();
}

Status validate_nvfp4_shape(int64_t rows, int64_t k) {
  if (rows < 0) return invalid_argument("rows must be >= 0, got " + std::to_string(rows));
  if (k <= 0 || k % kNvfp4BlockSize != 0)
    return invalid_argument("K must be a positive multiple of 16 (one UE4M3 scale per 16 elements), got " +
                            std::to_string(k));
  if (rows > (int64_t{1} << 40) / k) return invalid_argument("rows * K is too large (over 2^40 elements)");
  return Status::ok();
}

Status validate_quantize_input(const float* x, int64_t rows, int64_t k) {
  FP4MOE_RETURN_IF_ERROR(validate_nvfp4_shape(rows, k));
  if (rows > 0 && x == nullptr) return invalid_argument("input pointer is null");
  for (int64_t i = 0; i < rows * k; ++i) {
    if (!std::isfinite(x[i]))
      return invalid_argument("input element " + std::to_string(i) + " (row " + std::to_string(i / k) +
                              ", col " + std::to_string(i % k) + ") is not finite; NVFP4 has no Inf/NaN");
  }
  return Status::ok();
}

Status quantize_nvfp4(const float* x, int64_t rows, int64_t k, std::optional<float> global_scale,
                      ScaleLayout layout, Nvfp4Matrix* out) {
  if (out == nullptr) return invalid_argument("output matrix pointer is null");
  FP4MOE_RETURN_IF_ERROR(validate_scale_layout(layout));
  FP4MOE_RETURN_IF_ERROR(validate_quantize_input(x, rows, k));
  float gs;
  if (global_scale) {
    gs = *global_scale;
    FP4MOE_RETURN_IF_ERROR(validate_global_scale(gs));
  } else {
    float amax = 0.0f;
    for (int64_t i = 0; i < rows * k; ++i) amax = std::fmax(amax, std::fabs(x[i]));
    gs = nvfp4_global_scale(amax);
  }
  Nvfp4Matrix m;
  m.rows = rows;
  m.k = k;
  m.scale_layout = layout;
  m.global_scale = gs;
  try {
    m.packed.assign(static_cast<size_t>(rows * k / 2), 0);
    m.scales.assign(static_cast<size_t>(scale_buffer_bytes(rows, k, layout)), 0);
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kResourceExhausted, "out of host memory for a [" + std::to_string(rows) + ", " +
                                                      std::to_string(k) + "] NVFP4 matrix");
  }
  const int64_t nsc = k / kNvfp4BlockSize;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t sc = 0; sc < nsc; ++sc) {
      const float* blk = x + r * k + sc * kNvfp4BlockSize;
      float bmax = 0.0f;
      for (int i = 0; i < kNvfp4BlockSize; ++i) bmax = std::fmax(bmax, std::fabs(blk[i]));
      const uint8_t sf = nvfp4_block_scale(gs, bmax);
      m.scales[static_cast<size_t>(scale_offset(r, sc, nsc, layout))] = sf;
      const float sf_f = e4m3_to_float(sf);
      // One division per block, then a multiply per element (as the published GPU recipes do); clamped
      // so that a denormal-range block cannot turn 0 * inf into NaN.
      const float inv = sf_f != 0.0f ? std::fmin(gs / sf_f, FLT_MAX) : 0.0f;
      for (int i = 0; i < kNvfp4BlockSize; ++i) {
        const uint8_t q = sf_f != 0.0f ? float_to_e2m1(blk[i] * inv) : 0;
        const int64_t c = sc * kNvfp4BlockSize + i;
        uint8_t& byte = m.packed[static_cast<size_t>(r * (k / 2) + c / 2)];
        byte |= (c % 2 == 0) ? q : static_cast<uint8_t>(q << 4);
      }
    }
  }
  *out = std::move(m);
  return Status::ok();
}

Status quantize_nvfp4_bf16(const uint16_t* x, int64_t rows, int64_t k, std::optional<float> global_scale,
                           ScaleLayout layout, Nvfp4Matrix* out) {
  if (out == nullptr) return invalid_argument("output matrix pointer is null");
  // The shape first: rows * k sizes the conversion buffer below.
  FP4MOE_RETURN_IF_ERROR(validate_nvfp4_shape(rows, k));
  if (rows > 0 && x == nullptr) return invalid_argument("input pointer is null");
  std::vector<float> f;
  try {
    f.resize(static_cast<size_t>(rows * k));
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kResourceExhausted, "out of host memory for a [" + std::to_string(rows) + ", " +
                                                      std::to_string(k) + "] fp32 copy of the input");
  }
  for (size_t i = 0; i < f.size(); ++i) f[i] = bf16_to_float(x[i]);
  return quantize_nvfp4(f.data(), rows, k, global_scale, layout, out);
}

Status dequantize_nvfp4(const Nvfp4Matrix& m, std::vector<float>* out) {
  if (out == nullptr) return invalid_argument("output vector pointer is null");
  FP4MOE_RETURN_IF_ERROR(validate_scale_layout(m.scale_layout));
  FP4MOE_RETURN_IF_ERROR(validate_nvfp4_shape(m.rows, m.k));
  FP4MOE_RETURN_IF_ERROR(validate_global_scale(m.global_scale));
  if (static_cast<int64_t>(m.packed.size()) != m.rows * m.k / 2 ||
      static_cast<int64_t>(m.scales.size()) != scale_buffer_bytes(m.rows, m.k, m.scale_layout))
    return invalid_argument("packed/scale buffer sizes do not match the matrix shape");
  // UE4M3 block scales are non-negative and finite: a sign bit or the NaN code (0x7F) is not a scale.
  const int64_t nsc = m.k / kNvfp4BlockSize;
  for (int64_t r = 0; r < m.rows; ++r)
    for (int64_t sc = 0; sc < nsc; ++sc) {
      const uint8_t b = m.scale(r, sc);
      if (!usable_ue4m3_scale(b))
        return invalid_argument("block scale (row " + std::to_string(r) + ", block " + std::to_string(sc) + ") is " +
                                hex_byte(b) + ": UE4M3 scales must be finite and >= 0");
    }
  std::vector<float> v;
  try {
    v.resize(static_cast<size_t>(m.rows * m.k));
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kResourceExhausted, "out of host memory for the dequantized matrix");
  }
  const float inv_gs = 1.0f / m.global_scale;
  for (int64_t r = 0; r < m.rows; ++r) {
    for (int64_t c = 0; c < m.k; ++c) {
      const float prod = e2m1_to_float(m.code(r, c)) * e4m3_to_float(m.scale(r, c / kNvfp4BlockSize));
      v[static_cast<size_t>(r * m.k + c)] = prod * inv_gs;
    }
  }
  *out = std::move(v);
  return Status::ok();
}

Status convert_scale_layout(const std::vector<uint8_t>& in, int64_t rows, int64_t k, ScaleLayout from,
                            ScaleLayout to, std::vector<uint8_t>* out) {
  if (out == nullptr) return invalid_argument("output vector pointer is null");
  FP4MOE_RETURN_IF_ERROR(validate_scale_layout(from));
  FP4MOE_RETURN_IF_ERROR(validate_scale_layout(to));
  FP4MOE_RETURN_IF_ERROR(validate_nvfp4_shape(rows, k));
  if (static_cast<int64_t>(in.size()) != scale_buffer_bytes(rows, k, from))
    return invalid_argument("scale buffer holds " + std::to_string(in.size()) + " bytes, the " +
                            scale_layout_name(from) + " layout of [" + std::to_string(rows) + ", " +
                            std::to_string(k) + "] needs " + std::to_string(scale_buffer_bytes(rows, k, from)));
  const int64_t nsc = k / kNvfp4BlockSize;
  std::vector<uint8_t> v;
  try {
    v.assign(static_cast<size_t>(scale_buffer_bytes(rows, k, to)), 0);
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kResourceExhausted, "out of host memory for the converted scales");
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t sc = 0; sc < nsc; ++sc)
      v[static_cast<size_t>(scale_offset(r, sc, nsc, to))] = in[static_cast<size_t>(scale_offset(r, sc, nsc, from))];
  *out = std::move(v);
  return Status::ok();
}

}  // namespace fp4moe
