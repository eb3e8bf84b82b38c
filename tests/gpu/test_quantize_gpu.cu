// GPU tests: the NVFP4 quantize/dequantize kernels against the host codec, bit for bit.
// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include <cmath>
#include <optional>

#include "fp4moe/bf16.h"
#include "fp4moe/nvfp4.h"
#include "fp4moe/quantize.h"
#include "nvfp4_reference.h"
#include "random_data.h"
#include "tests/gpu/gpu_test_util.h"

namespace fp4moe {
namespace {

using testing::DeviceBuffer;

struct Shape { int64_t rows, k; };
const Shape kShapes[] = {{1, 16}, {1, 7168}, {3, 48}, {127, 16}, {129, 272}, {300, 6144}, {64, 7168}, {1000, 2048}};

// Quantize on the GPU (global scale computed or given) and compare every output byte with the codec.
void check_quantize(const Shape& sh, ScaleLayout layout, bool compute_gs, uint64_t seed) {
  SCOPED_TRACE("rows " + std::to_string(sh.rows) + " k " + std::to_string(sh.k) + " layout " +
               scale_layout_name(layout) + (compute_gs ? " computed gs" : " given gs") + " seed " + std::to_string(seed));
  const auto bits = devdata::random_bf16_matrix(sh.rows, sh.k, seed);
  const float given_gs = 37.25f;
  Nvfp4Matrix ref;
  ASSERT_TRUE(quantize_nvfp4_bf16(bits.data(), sh.rows, sh.k, compute_gs ? std::nullopt : std::optional<float>(given_gs),
                                  layout, &ref).is_ok());
  const size_t sbytes = static_cast<size_t>(scale_buffer_bytes(sh.rows, sh.k, layout));
  DeviceBuffer in(bits.size() * 2), packed(ref.packed.size()), scales(sbytes), gs(4);
  ASSERT_TRUE(in.upload(bits));
  ASSERT_TRUE(packed.poison());
  ASSERT_TRUE(scales.poison());
  ASSERT_TRUE(gs.upload(std::vector<float>{compute_gs ? -1.0f : given_gs}));
  QuantizeNvfp4Args a;
  a.input = in.get();
  a.rows = sh.rows;
  a.k = sh.k;
  a.packed = packed.get();
  a.scales = scales.get();
  a.scale_layout = layout;
  a.global_scale = gs.as<float>();
  a.compute_global_scale = compute_gs;
  ASSERT_TRUE(QuantizeNvfp4::can_implement(a).is_ok());
  DeviceBuffer ws(QuantizeNvfp4::workspace_size(a));
  ASSERT_TRUE(ws.poison());
  const Status s = QuantizeNvfp4::run(a, ws.get(), ws.bytes(), nullptr);
  ASSERT_TRUE(s.is_ok()) << s.to_string();
  const Status chk = QuantizeNvfp4::check(ws.get(), nullptr);
  ASSERT_TRUE(chk.is_ok()) << chk.to_string();
  const auto got_p = packed.download<uint8_t>(ref.packed.size());
  const auto got_s = scales.download<uint8_t>(sbytes);
  const auto got_g = gs.download<float>(1);
  ASSERT_EQ(got_g.size(), 1u);
  EXPECT_EQ(got_g[0], ref.global_scale);
  ASSERT_EQ(got_p.size(), ref.packed.size());
  for (size_t i = 0; i < got_p.size(); ++i)
    ASSERT_EQ(got_p[i], ref.packed[i]) << "packed byte " << i << " (row " << i / (sh.k / 2) << ")";
  for (size_t i = 0; i < got_s.size(); ++i) ASSERT_EQ(got_s[i], ref.scales[i]) << "scale byte " << i;

  // Dequantize back on the GPU: bit-exact with the reference's bf16.
  DeviceBuffer out(bits.size() * 2);
  ASSERT_TRUE(out.poison(0xFF));  // 0xFFFF is a NaN: an unwritten element cannot pass
  DequantizeNvfp4Args d;
  d.packed = packed.get();
  d.scales = scales.get();
  d.scale_layout = layout;
  d.global_scale = gs.as<float>();
  d.rows = sh.rows;
  d.k = sh.k;
  d.output = out.get();
  DeviceBuffer flags(4);
  ASSERT_TRUE(flags.poison(0xFF));  // (run() zeroes it: a stale word would report here)
  d.error_flags = flags.as<uint32_t>();
  const Status ds = DequantizeNvfp4::run(d, nullptr);
  ASSERT_TRUE(ds.is_ok()) << ds.to_string();
  const Status dc = DequantizeNvfp4::check(d.error_flags, nullptr);
  EXPECT_TRUE(dc.is_ok()) << dc.to_string();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto got_x = out.download<uint16_t>(bits.size());
  const auto want_x = reference::dequantize_to_bf16(ref);
  ASSERT_EQ(want_x.size(), got_x.size());
  for (size_t i = 0; i < got_x.size(); ++i) ASSERT_EQ(got_x[i], want_x[i]) << "element " << i;
}

TEST(QuantizeGpu, BitExactWithHostCodecAllShapesLayoutsModes) {
  FP4MOE_SKIP_WITHOUT_GPU();
  const uint64_t seed = devdata::fresh_seed();
  for (const Shape& sh : kShapes)
    for (ScaleLayout layout : {ScaleLayout::kLinear, ScaleLayout::kSwizzled128x4})
      for (bool compute_gs : {true, false}) {
        check_quantize(sh, layout, compute_gs, seed + static_cast<uint64_t>(sh.rows * 131 + sh.k));
        if (HasFatalFailure()) return;
      }
}

// A rows x k bf16 input (fresh random values unless given) quantized on the GPU into buffers of its size, outputs and
// workspace poisoned before each run, and its check().
struct SmallQuantize {
  int64_t rows, k;
  std::vector<uint16_t> bits;
  DeviceBuffer in, packed, scales, gs{4}, ws;
  QuantizeNvfp4Args a;
  explicit SmallQuantize(int64_t r = 4, int64_t kk = 64, std::vector<uint16_t> given = {})
      : rows(r), k(kk), bits(given.empty() ? devdata::random_bf16_matrix(r, kk, devdata::fresh_seed()) : std::move(given)),
        in(bits.size() * 2), packed(static_cast<size_t>(r * kk / 2)), scales(static_cast<size_t>(r * kk / 16)) {
    a.input = in.get();
    a.rows = rows;
    a.k = k;
    a.packed = packed.get();
    a.scales = scales.get();
    a.global_scale = gs.as<float>();
    EXPECT_TRUE(QuantizeNvfp4::can_implement(a).is_ok());
    ws.alloc(QuantizeNvfp4::workspace_size(a));
  }
  // Uploads `bits` and the global scale `g` (none where the run computes it), runs, and returns check()'s Status.
  Status run_and_check(std::optional<float> g = std::nullopt) {
    a.compute_global_scale = !g.has_value();
    EXPECT_TRUE(in.upload(bits) && packed.poison() && scales.poison() && ws.poison());
    if (g) EXPECT_TRUE(gs.upload(std::vector<float>{*g}));
    const Status r = QuantizeNvfp4::run(a, ws.get(), ws.bytes(), nullptr);
    EXPECT_TRUE(r.is_ok()) << r.to_string();
    return QuantizeNvfp4::check(ws.get(), nullptr);
  }
};

TEST(QuantizeGpu, RoundingMidpointsTieToEvenOnDevice) {
  FP4MOE_SKIP_WITHOUT_GPU();
  // gs = 1 and a block amax of 6 give scale 1.0, so the kernel rounds the values themselves.
  const float vals[16] = {6.0f, 0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f,
                          -0.25f, -0.75f, -1.25f, -1.75f, -2.5f, -3.5f, -5.0f, 0.1f};
  std::vector<uint16_t> bits;
  for (int r = 0; r < 3; ++r)
    for (float v : vals) bits.push_back(float_to_bf16(v));
  Nvfp4Matrix ref;
  ASSERT_TRUE(quantize_nvfp4_bf16(bits.data(), 3, 16, 1.0f, ScaleLayout::kLinear, &ref).is_ok());
  SmallQuantize q(3, 16, bits);
  const Status st = q.run_and_check(1.0f);
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  const auto got = q.packed.download<uint8_t>(24);
  const auto got_s = q.scales.download<uint8_t>(3);
  ASSERT_EQ(got.size(), 24u);
  ASSERT_EQ(got_s.size(), 3u);
  for (int i = 0; i < 24; ++i) EXPECT_EQ(got[static_cast<size_t>(i)], ref.packed[static_cast<size_t>(i)]) << "byte " << i;
  for (int r = 0; r < 3; ++r) EXPECT_EQ(got_s[static_cast<size_t>(r)], 0x38) << "row " << r << "'s scale: 1.0 as UE4M3";
  // And the GPU's values themselves, decoded from its bytes: 0.25->0, 0.75->1, 1.25->1, 1.75->2, 2.5->2, 3.5->4, 5->4
  // (ties to even), the negatives alike, 0.1->0.
  Nvfp4Matrix dev = ref;
  dev.packed = got;
  dev.scales = got_s;
  const float want[16] = {6, 0, 1, 1, 2, 2, 4, 4, -0.0f, -1, -1, -2, -2, -4, -4, 0};
  for (int r = 0; r < 3; ++r)
    for (int j = 0; j < 16; ++j) {
      const float v = e2m1_to_float(dev.code(r, j));
      EXPECT_EQ(v, want[j]) << "row " << r << ", element " << j << " (" << vals[j] << ")";
      EXPECT_EQ(std::signbit(v), std::signbit(want[j])) << "row " << r << ", element " << j;
    }
}

// Global scales the codec cannot use (usable_global_scale): 0, negative, subnormal, Inf, NaN.
const float kUnusableGlobalScales[] = {0.0f, -1.0f, 1e-40f, INFINITY, NAN};

TEST(QuantizeGpu, NonFiniteInputIsReported) {
  FP4MOE_SKIP_WITHOUT_GPU();
  SmallQuantize q;
  q.bits[77] = 0x7F80;  // +Inf
  const Status s = q.run_and_check();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("Inf or NaN"), std::string::npos);
  // A clean run afterwards clears the flag.
  q.bits[77] = 0x3F80;
  EXPECT_TRUE(q.run_and_check().is_ok());
}

// A given global scale the codec cannot use is reported by check(), as the host codec rejects it; a usable one
// afterwards clears the report.
TEST(QuantizeGpu, AnUnusableGivenGlobalScaleIsReported) {
  FP4MOE_SKIP_WITHOUT_GPU();
  SmallQuantize q;
  for (float bad : kUnusableGlobalScales) {
    SCOPED_TRACE("global scale " + std::to_string(bad));
    const Status s = q.run_and_check(bad);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("global scale"), std::string::npos) << s.to_string();
  }
  const Status ok = q.run_and_check(448.0f * 6.0f / 3.0f);
  EXPECT_TRUE(ok.is_ok()) << ok.to_string();
}

// The GPU dequantizer with error_flags records what the host codec rejects: a global scale of 0, negative,
// subnormal, Inf or NaN, and a scale byte with the sign bit or the NaN pattern; a clean run afterwards clears it.
TEST(QuantizeGpu, DequantizeReportsWhatTheHostCodecRejects) {
  FP4MOE_SKIP_WITHOUT_GPU();
  const std::vector<uint16_t> bits = devdata::random_bf16_matrix(4, 64, devdata::fresh_seed());
  Nvfp4Matrix ref;
  ASSERT_TRUE(quantize_nvfp4_bf16(bits.data(), 4, 64, std::nullopt, ScaleLayout::kLinear, &ref).is_ok());
  DeviceBuffer packed(ref.packed.size()), scales(ref.scales.size()), gs(4), out(4 * 64 * 2), flags(4);
  ASSERT_TRUE(packed.upload(ref.packed) && scales.upload(ref.scales) && gs.upload(std::vector<float>{ref.global_scale}));
  DequantizeNvfp4Args d;
  d.packed = packed.get();
  d.scales = scales.get();
  d.global_scale = gs.as<float>();
  d.rows = 4;
  d.k = 64;
  d.output = out.get();
  d.error_flags = flags.as<uint32_t>();
  auto run_and_check = [&]() {
    const Status r = DequantizeNvfp4::run(d, nullptr);
    EXPECT_TRUE(r.is_ok()) << r.to_string();
    return DequantizeNvfp4::check(d.error_flags, nullptr);
  };
  for (float bad : kUnusableGlobalScales) {
    SCOPED_TRACE("global scale " + std::to_string(bad));
    ASSERT_TRUE(gs.upload(std::vector<float>{bad}));
    const Status s = run_and_check();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("global scale"), std::string::npos) << s.to_string();
  }
  ASSERT_TRUE(gs.upload(std::vector<float>{ref.global_scale}));
  EXPECT_TRUE(run_and_check().is_ok());
  for (uint8_t bad : {uint8_t{0xB8}, uint8_t{0x7F}, uint8_t{0xFF}}) {  // -1.0, NaN, -NaN as UE4M3 bytes
    SCOPED_TRACE("scale byte " + std::to_string(bad));
    std::vector<uint8_t> sc = ref.scales;
    sc[9] = bad;
    ASSERT_TRUE(scales.upload(sc));
    const Status s = run_and_check();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("scale byte"), std::string::npos) << s.to_string();
  }
  ASSERT_TRUE(scales.upload(ref.scales));
  EXPECT_TRUE(run_and_check().is_ok());
  EXPECT_EQ(DequantizeNvfp4::check(nullptr, nullptr).code(), StatusCode::kInvalidArgument);
}

TEST(QuantizeGpu, BadArgumentsAreRejectedWithoutLaunching) {
  // Argument checks need no device: they run in CI too.
  QuantizeNvfp4Args a;
  a.rows = 4;
  a.k = 24;
  EXPECT_NE(QuantizeNvfp4::can_implement(a).message().find("multiple of 16"), std::string::npos);
  a.k = 32;
  EXPECT_NE(QuantizeNvfp4::can_implement(a).message().find("input is null"), std::string::npos);
  alignas(16) static char buf[256];
  a.input = buf + 8;
  EXPECT_EQ(QuantizeNvfp4::can_implement(a).code(), StatusCode::kMisaligned);
  a.input = buf;
  a.packed = buf;
  a.scales = buf;
  a.global_scale = reinterpret_cast<float*>(buf);
  EXPECT_TRUE(QuantizeNvfp4::can_implement(a).is_ok());
  EXPECT_EQ(QuantizeNvfp4::run(a, buf, 4, nullptr).code(), StatusCode::kResourceExhausted);
  a.rows = -1;
  EXPECT_FALSE(QuantizeNvfp4::can_implement(a).is_ok());
  DequantizeNvfp4Args d;
  d.rows = 2;
  d.k = 15;
  EXPECT_FALSE(DequantizeNvfp4::can_implement(d).is_ok());
}

}  // namespace
}  // namespace fp4moe
