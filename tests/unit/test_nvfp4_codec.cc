// Unit tests of the NVFP4 host codec: scalar codes, rounding ties, scale layouts, edge cases, random round trips.
// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cuda_fp8.h>  // NVIDIA's host implementation of E4M3 conversion, an independent oracle

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <random>
#include <set>

#include "fp4moe/bf16.h"
#include "fp4moe/nvfp4.h"
#include "nvfp4_reference.h"
#include "random_data.h"

// ASan, as GCC (__SANITIZE_ADDRESS__) and Clang (__has_feature) say it.
#if defined(__SANITIZE_ADDRESS__)
#define FP4MOE_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FP4MOE_TEST_ASAN 1
#endif
#endif

namespace fp4moe {
namespace {

TEST(E2M1, AllSixteenCodesBothWays) {
  const float mags[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (uint8_t c = 0; c < 16; ++c) {
    const float expect = (c & 8) ? -mags[c & 7] : mags[c & 7];
    EXPECT_EQ(e2m1_to_float(c), expect) << "code " << int(c);
    EXPECT_EQ(std::signbit(e2m1_to_float(c)), (c & 8) != 0) << "code " << int(c);
    EXPECT_EQ(float_to_e2m1(e2m1_to_float(c)), c) << "code " << int(c);
  }
}

TEST(E2M1, MidpointsTieToEven) {
  // Each midpoint between two neighbouring E2M1 values (lo, hi): on it the even code, just below it lo, just above hi.
  struct Case { float in; float lo; float hi; float out; };
  const Case cases[] = {{0.25f, 0.0f, 0.5f, 0.0f}, {0.75f, 0.5f, 1.0f, 1.0f}, {1.25f, 1.0f, 1.5f, 1.0f},
                        {1.75f, 1.5f, 2.0f, 2.0f}, {2.5f, 2.0f, 3.0f, 2.0f},  {3.5f, 3.0f, 4.0f, 4.0f},
                        {5.0f, 4.0f, 6.0f, 4.0f}};
  for (const Case& c : cases) {
    EXPECT_EQ(e2m1_to_float(float_to_e2m1(c.in)), c.out) << c.in;
    EXPECT_EQ(e2m1_to_float(float_to_e2m1(-c.in)), -c.out) << -c.in;
    EXPECT_EQ(e2m1_to_float(float_to_e2m1(std::nextafter(c.in, 0.0f))), c.lo) << "just below " << c.in;
    EXPECT_EQ(e2m1_to_float(float_to_e2m1(std::nextafter(c.in, 9.0f))), c.hi) << "just above " << c.in;
    EXPECT_EQ(e2m1_to_float(float_to_e2m1(-std::nextafter(c.in, 9.0f))), -c.hi) << "just below " << -c.in;
  }
}

TEST(E2M1, SaturatesPastSix) {
  for (float x : {6.0f, 6.5f, 7.0f, 100.0f, 1e30f, INFINITY}) {
    EXPECT_EQ(float_to_e2m1(x), 0x7) << x;
    EXPECT_EQ(float_to_e2m1(-x), 0xF) << -x;
  }
}

TEST(E4M3, DecodeMatchesCudaFp8Header) {
  for (int c = 0; c < 256; ++c) {
    const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(c), __NV_E4M3);
    const float theirs = __half2float(__half(h));
    const float ours = e4m3_to_float(static_cast<uint8_t>(c));
    if (std::isnan(theirs)) {
      EXPECT_TRUE(std::isnan(ours)) << c;
    } else {
      EXPECT_EQ(ours, theirs) << "code " << c;
    }
  }
}

TEST(E4M3, EncodeKnownPoints) {
  EXPECT_EQ(float_to_e4m3_satfinite(448.0f), 0x7E);
  EXPECT_EQ(float_to_e4m3_satfinite(464.0f), 0x7E);  // midpoint to the NaN slot: saturates
  EXPECT_EQ(float_to_e4m3_satfinite(1e9f), 0x7E);
  EXPECT_EQ(float_to_e4m3_satfinite(INFINITY), 0x7E);
  EXPECT_EQ(float_to_e4m3_satfinite(NAN), 0x7F);
  EXPECT_EQ(float_to_e4m3_satfinite(0.0f), 0x00);
  EXPECT_EQ(float_to_e4m3_satfinite(std::ldexp(1.0f, -9)), 0x01);      // smallest subnormal
  EXPECT_EQ(float_to_e4m3_satfinite(std::ldexp(1.0f, -10)), 0x00);     // tie 0 | 2^-9: even (0)
  EXPECT_EQ(float_to_e4m3_satfinite(std::ldexp(3.0f, -10)), 0x02);     // tie 1 | 2: even (2)
  EXPECT_EQ(float_to_e4m3_satfinite(std::ldexp(7.0f, -9)), 0x07);      // largest subnormal
  EXPECT_EQ(float_to_e4m3_satfinite(std::ldexp(1.0f, -6)), 0x08);      // smallest normal
  EXPECT_EQ(float_to_e4m3_satfinite(1.0f), 0x38);
  EXPECT_EQ(float_to_e4m3_satfinite(1.0625f), 0x38);  // tie 1 | 1.125: even (1.0)
  EXPECT_EQ(float_to_e4m3_satfinite(1.1875f), 0x3A);  // tie 1.125 | 1.25: even (1.25)
}

TEST(E4M3, EncodeMatchesCudaFp8HeaderOnRandomAndMidpoints) {
  const uint64_t seed = devdata::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> e(-14.0f, 10.0f), s(1.0f, 2.0f);
  std::vector<float> xs;
  for (int i = 0; i < 200000; ++i) xs.push_back(s(rng) * std::exp2(e(rng)));
  for (int c = 0; c < 126; ++c) {  // every midpoint and its neighbours
    const float m = 0.5f * (e4m3_to_float(uint8_t(c)) + e4m3_to_float(uint8_t(c + 1)));
    xs.push_back(m);
    xs.push_back(std::nextafter(m, 0.0f));
    xs.push_back(std::nextafter(m, 1000.0f));
  }
  for (float x : xs) {
    const auto theirs = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
    ASSERT_EQ(float_to_e4m3_satfinite(x), theirs) << "x = " << x;
    ASSERT_EQ(float_to_e4m3_satfinite(-x), __nv_cvt_float_to_fp8(-x, __NV_SATFINITE, __NV_E4M3)) << "x = " << -x;
  }
}

TEST(ScaleLayout, SwizzledOffsetIsTheRowMajorIndexOfTheLogicalShape) {
  // Logical shape [rows/128, cols/4, 32, 4, 4] indexed by (m/128, k/4, m%32, (m/32)%4, k%4).
  for (auto [rows, k] : {std::pair<int64_t, int64_t>{1, 16}, {37, 48}, {128, 64}, {129, 80}, {300, 7168 / 16 * 16}}) {
    const int64_t nsc = k / 16, kt = ceil_div(nsc, 4);
    const int64_t dims[5] = {ceil_div(rows, 128), kt, 32, 4, 4};
    std::set<int64_t> seen;
    for (int64_t m = 0; m < rows; ++m) {
      for (int64_t c = 0; c < nsc; ++c) {
        const int64_t idx[5] = {m / 128, c / 4, m % 32, (m / 32) % 4, c % 4};
        int64_t lin = 0;
        for (int d = 0; d < 5; ++d) lin = lin * dims[d] + idx[d];
        ASSERT_EQ(swizzled_scale_offset(m, c, nsc), lin) << "row " << m << " col " << c;
        ASSERT_LT(lin, scale_buffer_bytes(rows, k, ScaleLayout::kSwizzled128x4));
        ASSERT_TRUE(seen.insert(lin).second) << "offset used twice";
      }
    }
  }
}

TEST(ScaleLayout, ConversionRoundTripAndZeroPadding) {
  const int64_t rows = 131, k = 16 * 7;
  std::vector<uint8_t> lin(static_cast<size_t>(rows * 7));
  std::mt19937 rng(1234);
  for (auto& b : lin) b = static_cast<uint8_t>(1 + rng() % 126);
  std::vector<uint8_t> sw, back;
  ASSERT_TRUE(convert_scale_layout(lin, rows, k, ScaleLayout::kLinear, ScaleLayout::kSwizzled128x4, &sw).is_ok());
  EXPECT_EQ(static_cast<int64_t>(sw.size()), 256 * 8);
  int64_t nonzero = 0;
  for (uint8_t b : sw) nonzero += b != 0;
  EXPECT_EQ(nonzero, rows * 7);  // every real entry is non-zero, every pad entry zero
  ASSERT_TRUE(convert_scale_layout(sw, rows, k, ScaleLayout::kSwizzled128x4, ScaleLayout::kLinear, &back).is_ok());
  EXPECT_EQ(back, lin);
  std::vector<uint8_t> wrong(5);
  const Status s = convert_scale_layout(wrong, rows, k, ScaleLayout::kLinear, ScaleLayout::kSwizzled128x4, &sw);
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("needs"), std::string::npos);
}

TEST(Quantize, NibbleOrderLowFirst) {
  std::vector<float> x(16, 0.0f);
  x[0] = 0.5f;   // code 1
  x[1] = 6.0f;   // code 7
  x[2] = -1.0f;  // code 0xA
  x[3] = 3.0f;   // code 5
  Nvfp4Matrix m;
  ASSERT_TRUE(quantize_nvfp4(x.data(), 1, 16, 1.0f, ScaleLayout::kLinear, &m).is_ok());
  EXPECT_EQ(m.scales[0], float_to_e4m3_satfinite(1.0f));  // gs * 6 / 6 = 1
  EXPECT_EQ(m.packed[0], 0x71);
  EXPECT_EQ(m.packed[1], 0x5A);
  for (int i = 2; i < 8; ++i) EXPECT_EQ(m.packed[i], 0);
}

TEST(Quantize, RejectsBadShapesAndNonFinite) {
  std::vector<float> x(32, 1.0f);
  Nvfp4Matrix m;
  Status s = quantize_nvfp4(x.data(), 2, 15, std::nullopt, ScaleLayout::kLinear, &m);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("multiple of 16"), std::string::npos);
  x[17] = NAN;
  s = quantize_nvfp4(x.data(), 2, 16, std::nullopt, ScaleLayout::kLinear, &m);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("row 1, col 1"), std::string::npos) << s.message();
  x[17] = -INFINITY;
  EXPECT_FALSE(quantize_nvfp4(x.data(), 2, 16, std::nullopt, ScaleLayout::kLinear, &m).is_ok());
  x[17] = 1.0f;
  EXPECT_FALSE(quantize_nvfp4(x.data(), 2, 16, 0.0f, ScaleLayout::kLinear, &m).is_ok());
  EXPECT_FALSE(quantize_nvfp4(x.data(), 2, 16, NAN, ScaleLayout::kLinear, &m).is_ok());
  EXPECT_FALSE(quantize_nvfp4(nullptr, 2, 16, std::nullopt, ScaleLayout::kLinear, &m).is_ok());
}

TEST(Quantize, AllZeroTensorAndBlocks) {
  std::vector<float> x(64, 0.0f);
  Nvfp4Matrix m;
  ASSERT_TRUE(quantize_nvfp4(x.data(), 2, 32, std::nullopt, ScaleLayout::kLinear, &m).is_ok());
  EXPECT_EQ(m.global_scale, 1.0f);
  for (uint8_t b : m.packed) EXPECT_EQ(b, 0);
  for (uint8_t b : m.scales) EXPECT_EQ(b, 0);
  x[40] = 3.0f;  // one non-zero block; the others stay exactly zero
  ASSERT_TRUE(quantize_nvfp4(x.data(), 2, 32, std::nullopt, ScaleLayout::kLinear, &m).is_ok());
  EXPECT_EQ(m.global_scale, 2688.0f / 3.0f);
  EXPECT_EQ(m.scales[0], 0);
  EXPECT_EQ(m.scales[1], 0);
  EXPECT_EQ(m.scales[3], 0);
  EXPECT_EQ(m.scales[2], 0x7E);  // gs * amax / 6 = 448
  std::vector<float> back;
  ASSERT_TRUE(dequantize_nvfp4(m, &back).is_ok());
  for (int i = 0; i < 64; ++i) EXPECT_FLOAT_EQ(back[i], x[i]) << i;
}

TEST(Quantize, SubnormalScalesAndSaturation) {
  // Tensor amax 2688 sets gs = 1; a block of amax 0.03 gets scale e4m3(0.005), a subnormal (code 3 * 2^-9).
  std::vector<float> x(32, 0.0f);
  x[0] = 2688.0f;
  x[16] = 0.03f;
  x[17] = -0.015f;
  Nvfp4Matrix m;
  ASSERT_TRUE(quantize_nvfp4(x.data(), 1, 32, std::nullopt, ScaleLayout::kLinear, &m).is_ok());
  EXPECT_EQ(m.global_scale, 1.0f);
  EXPECT_EQ(m.scales[1], 0x03) << "expected the subnormal E4M3 scale 3 * 2^-9";
  // A caller scale far too large saturates the block scale at 448 and the elements at +-6.
  ASSERT_TRUE(quantize_nvfp4(x.data(), 1, 32, 1e6f, ScaleLayout::kLinear, &m).is_ok());
  EXPECT_EQ(m.scales[0], 0x7E);
  EXPECT_EQ(m.code(0, 0), 0x7);
  EXPECT_EQ(m.code(0, 17), 0xF);
}

TEST(GlobalScale, Recipe) {
  EXPECT_EQ(nvfp4_global_scale(0.0f), 1.0f);
  EXPECT_EQ(nvfp4_global_scale(2688.0f), 1.0f);
  EXPECT_EQ(nvfp4_global_scale(1.0f), 2688.0f);
  EXPECT_EQ(nvfp4_global_scale(1e-44f), FLT_MAX);
}

// Each element's error is at most half the gap between the two E2M1 values bracketing x / denom
// (or the saturation excess past 6), in units of denom = scale / gs.
void expect_round_trip_bound(const std::vector<float>& x, const Nvfp4Matrix& m) {
  const float mags[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  int64_t checked = 0;
  for (int64_t r = 0; r < m.rows; ++r) {
    for (int64_t c = 0; c < m.k; ++c) {
      const double xv = x[static_cast<size_t>(r * m.k + c)];
      const double sf = e4m3_to_float(m.scale(r, c / 16));
      const double got = reference::decode_exact(m, r, c);
      if (sf == 0.0) {
        ASSERT_EQ(got, 0.0);
        ASSERT_LE(std::fabs(xv) * m.global_scale / 6.0, std::ldexp(1.0, -10) * 1.0001) << "zero scale for a non-tiny block";
        continue;
      }
      const double denom = sf / m.global_scale;
      const double v = std::fabs(xv) / denom;
      double bound;
      if (v >= 6.0) {
        bound = (v - 6.0) * denom;
      } else {
        int i = 0;
        while (mags[i + 1] < v) ++i;
        bound = 0.5 * (mags[i + 1] - mags[i]) * denom;
      }
      ASSERT_LE(std::fabs(got - xv), bound * (1 + 1e-6) + 1e-30) << "row " << r << " col " << c << " x " << xv;
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

TEST(Quantize, RandomRoundTripWithinHalfStepBothLayouts) {
  const uint64_t seed = devdata::fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (auto [rows, k] : {std::pair<int64_t, int64_t>{1, 16}, {3, 48}, {130, 256}, {17, 7168}}) {
    const auto bits = devdata::random_bf16_matrix(rows, k, seed + rows);
    std::vector<float> x(bits.size());
    for (size_t i = 0; i < x.size(); ++i) x[i] = bf16_to_float(bits[i]);
    Nvfp4Matrix lin, sw;
    ASSERT_TRUE(quantize_nvfp4(x.data(), rows, k, std::nullopt, ScaleLayout::kLinear, &lin).is_ok());
    ASSERT_TRUE(quantize_nvfp4_bf16(bits.data(), rows, k, std::nullopt, ScaleLayout::kSwizzled128x4, &sw).is_ok());
    expect_round_trip_bound(x, lin);
    EXPECT_EQ(lin.packed, sw.packed);
    std::vector<uint8_t> conv;
    ASSERT_TRUE(convert_scale_layout(lin.scales, rows, k, ScaleLayout::kLinear, ScaleLayout::kSwizzled128x4, &conv).is_ok());
    EXPECT_EQ(conv, sw.scales);
    // The block scale keeps the block's amax representable: amax / denom lies in [6/(1+2^-4), 6/(1-2^-4)].
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t sc = 0; sc < k / 16; ++sc) {
        float amax = 0.0f;
        for (int i = 0; i < 16; ++i) amax = std::fmax(amax, std::fabs(x[static_cast<size_t>(r * k + sc * 16 + i)]));
        const double sf = e4m3_to_float(lin.scale(r, sc));
        // Only where gs * amax / 6 is in E4M3's normal range: subnormal spacing is coarser.
        if (static_cast<double>(lin.global_scale) * amax / 6.0 < std::ldexp(1.0, -6)) continue;
        const double ratio = amax * lin.global_scale / sf;
        EXPECT_GE(ratio, 6.0 / (1 + 1.0 / 16) * 0.9999);
        EXPECT_LE(ratio, 6.0 / (1 - 1.0 / 16) * 1.0001);
      }
    }
  }
}

// The codec's edges (issue #19): each is rejected with a Status or has a defined result, and a rejected call leaves
// its output as it was.
TEST(Codec, EdgesAreRejectedOrDefined) {
  const std::vector<float> x(32, 1.5f);
  Nvfp4Matrix m;
  m.rows = 77;  // a marker: rejected calls must not touch *out
  // A subnormal (or zero, negative, NaN, inf) caller global scale: 1 / gs would be inf and dequantize to NaN.
  for (float gs : {1e-40f, 0.0f, -3.0f, NAN, INFINITY}) {
    EXPECT_EQ(quantize_nvfp4(x.data(), 2, 16, gs, ScaleLayout::kLinear, &m).code(), StatusCode::kInvalidArgument) << gs;
    EXPECT_EQ(m.rows, 77);
  }
  ASSERT_TRUE(quantize_nvfp4(x.data(), 2, 16, 1e-30f, ScaleLayout::kLinear, &m).is_ok()) << "a normal tiny scale is fine";
  // An out-of-range ScaleLayout is not treated as swizzled.
  const auto bad_layout = static_cast<ScaleLayout>(7);
  Nvfp4Matrix q;
  EXPECT_EQ(quantize_nvfp4(x.data(), 2, 16, std::nullopt, bad_layout, &q).code(), StatusCode::kInvalidArgument);
  std::vector<uint8_t> conv;
  EXPECT_EQ(convert_scale_layout(std::vector<uint8_t>(2, 1), 2, 16, ScaleLayout::kLinear, bad_layout, &conv).code(),
            StatusCode::kInvalidArgument);
  // dequantize: bad global scales and scale bytes that are not a finite non-negative UE4M3.
  ASSERT_TRUE(quantize_nvfp4(x.data(), 2, 16, std::nullopt, ScaleLayout::kLinear, &q).is_ok());
  std::vector<float> out(3, 42.0f);
  for (float gs : {0.0f, -1.0f, NAN, INFINITY, 1e-40f}) {
    Nvfp4Matrix b = q;
    b.global_scale = gs;
    EXPECT_EQ(dequantize_nvfp4(b, &out).code(), StatusCode::kInvalidArgument) << gs;
  }
  for (uint8_t byte : {uint8_t{0x7F}, uint8_t{0xFF}, uint8_t{0x80}, uint8_t{0xB8}}) {
    Nvfp4Matrix b = q;
    b.scales[1] = byte;
    const Status st = dequantize_nvfp4(b, &out);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << int{byte};
    EXPECT_NE(st.message().find("row 1"), std::string::npos) << st.message();
  }
  Nvfp4Matrix b = q;
  b.scale_layout = bad_layout;
  EXPECT_EQ(dequantize_nvfp4(b, &out).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(out, std::vector<float>(3, 42.0f)) << "rejected calls leave the output alone";
  // nvfp4_global_scale: zero amax gives 1, tiny amax clamps to FLT_MAX, a non-finite amax has no scale (NaN).
  EXPECT_EQ(nvfp4_global_scale(0.0f), 1.0f);
  EXPECT_EQ(nvfp4_global_scale(1e-44f), FLT_MAX);
  EXPECT_TRUE(std::isnan(nvfp4_global_scale(INFINITY)));
  EXPECT_TRUE(std::isnan(nvfp4_global_scale(NAN)));
  // Shapes whose element count wraps or cannot be allocated: a Status, not a crash or an exception.
  const uint16_t one = 0x3F80;
  EXPECT_EQ(quantize_nvfp4_bf16(&one, int64_t{1} << 61, 16, std::nullopt, ScaleLayout::kLinear, &q).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(quantize_nvfp4_bf16(&one, int64_t{1} << 31, int64_t{1} << 31, std::nullopt, ScaleLayout::kLinear, &q).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(quantize_nvfp4_bf16(&one, 1, 16, std::nullopt, ScaleLayout::kLinear, nullptr).code(), StatusCode::kInvalidArgument);
}

// 2^30 rows of 2^12 (2^42 > 2^40 elements) are rejected up front; 2^24 rows of 2^16 (2^40, allowed) need 4 TiB for
// the fp32 copy: with the allocation refused, the call reports exhausted memory instead of throwing. The address
// space is capped for the call so that a machine that overcommits memory refuses it too. (Under ASan, operator new
// reports the failure and aborts instead of throwing, so the ASan build checks only the first part.)
TEST(Codec, ShapesBeyondMemoryGiveAStatus) {
  const uint16_t one = 0x3F80;
  Nvfp4Matrix q;
  EXPECT_EQ(quantize_nvfp4_bf16(&one, int64_t{1} << 30, int64_t{1} << 12, std::nullopt, ScaleLayout::kLinear, &q).code(),
            StatusCode::kInvalidArgument);
#if defined(FP4MOE_TEST_ASAN)
  GTEST_SKIP() << "ASan's operator new aborts on a refused allocation instead of throwing bad_alloc";
#else
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_AS, &old), 0);
  rlimit capped = old;
  capped.rlim_cur = std::min<rlim_t>(old.rlim_cur, rlim_t{64} << 30);
  ASSERT_EQ(setrlimit(RLIMIT_AS, &capped), 0);
  const Status big = quantize_nvfp4_bf16(&one, int64_t{1} << 24, int64_t{1} << 16, std::nullopt, ScaleLayout::kLinear, &q);
  ASSERT_EQ(setrlimit(RLIMIT_AS, &old), 0);
  EXPECT_EQ(big.code(), StatusCode::kResourceExhausted) << big.to_string();
#endif
}

}  // namespace
}  // namespace fp4moe
