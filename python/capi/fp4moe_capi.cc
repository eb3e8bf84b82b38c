// The C ABI the Python package loads (python/capi/fp4moe_capi.h): thin wrappers over MoeLayer and QuantizeNvfp4.
// SPDX-License-Identifier: Apache-2.0
#include "fp4moe_capi.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>

#include "fp4moe/build_info.h"
#include "fp4moe/moe.h"
#include "fp4moe/quantize.h"

struct fp4moe_layer {
  fp4moe::MoeLayer layer;
};

namespace {

// Copies `text` into buf, NUL-terminated, cut to len bytes.
void copy_text(const std::string& text, char* buf, size_t len) {
  if (buf == nullptr || len == 0) return;
  const size_t n = std::min(text.size(), len - 1);
  std::memcpy(buf, text.data(), n);
  buf[n] = '\0';
}

int fail(const fp4moe::Status& s, char* err, size_t len) {
  copy_text(s.message(), err, len);
  return static_cast<int>(s.code());
}

// Runs f, turning an escaping exception into a Status: nothing crosses the C boundary.
template <class F>
int guarded(char* err, size_t len, F&& f) {
  try {
    const fp4moe::Status s = f();
    return s.is_ok() ? 0 : fail(s, err, len);
  } catch (const std::bad_alloc&) {
    return fail(fp4moe::Status(fp4moe::StatusCode::kResourceExhausted, "out of host memory"), err, len);
  } catch (const std::exception& e) {
    return fail(fp4moe::Status(fp4moe::StatusCode::kInternal, e.what()), err, len);
  } catch (...) {
    return fail(fp4moe::Status(fp4moe::StatusCode::kInternal, "an unknown exception"), err, len);
  }
}

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

}  // namespace

extern "C" {

int fp4moe_capi_version(void) { return FP4MOE_CAPI_VERSION; }

const char* fp4moe_build_text(void) {
  // (a failure to build the text, out of host memory, gives an empty string rather than an exception across the ABI)
  try {
    static const std::string text = fp4moe::build_text();
    return text.c_str();
  } catch (...) {
    return "";
  }
}

int fp4moe_layer_create(const int64_t shape[6], const int32_t options[11], const char* tuning_cache,
                        const void* const w13[3], const void* const w2[3], void* stream, fp4moe_layer** out, char* err,
                        size_t err_len) {
  return guarded(err, err_len, [&]() -> fp4moe::Status {
    if (shape == nullptr || options == nullptr || w13 == nullptr || w2 == nullptr || out == nullptr)
      return fp4moe::invalid_argument("fp4moe_layer_create: a pointer argument is null");
    const fp4moe::MoeShape s{shape[0], shape[1], shape[2], shape[3], shape[4], shape[5]};
    fp4moe::MoeLayerOptions o;
    o.gate_up_order = options[0] ? fp4moe::GateUpOrder::kUpFirst : fp4moe::GateUpOrder::kGateFirst;
    o.global_scale_kind = options[1] ? fp4moe::GlobalScaleKind::kDequantize : fp4moe::GlobalScaleKind::kQuantize;
    // options[2]: 0 deterministic, 1 atomic, 2 deterministic with bf16 partials (fp4moe::FinalizeMode's order)
    if (options[2] < 0 || options[2] > 2) return fp4moe::invalid_argument("fp4moe_layer_create: finalize mode must be 0, 1 or 2");
    o.finalize = static_cast<fp4moe::FinalizeMode>(options[2]);
    o.block_m = options[3];
    o.programmatic_launch = options[4] != 0;
    o.fuse_small_routing = options[5] != 0;
    o.warp_specialized = options[6] != 0;
    o.kernel_arch = options[7];
    o.direct_decode = options[8] != 0;
    o.cluster_decode = options[9] != 0;
    o.gate_up_tail = options[10] != 0;
    o.tuning_cache = tuning_cache ? tuning_cache : "";
    auto l = std::make_unique<fp4moe_layer>();
    const fp4moe::Nvfp4ExpertWeights a{w13[0], w13[1], static_cast<const float*>(w13[2])};
    const fp4moe::Nvfp4ExpertWeights b{w2[0], w2[1], static_cast<const float*>(w2[2])};
    FP4MOE_RETURN_IF_ERROR(l->layer.init(s, o, a, b, as_stream(stream)));
    *out = l.release();
    return fp4moe::Status::ok();
  });
}

void fp4moe_layer_destroy(fp4moe_layer* layer) { delete layer; }

int fp4moe_layer_workspace_size(const fp4moe_layer* layer, int64_t max_tokens, size_t* out, char* err, size_t err_len) {
  return guarded(err, err_len, [&]() -> fp4moe::Status {
    if (layer == nullptr || out == nullptr) return fp4moe::invalid_argument("fp4moe_layer_workspace_size: null argument");
    const size_t n = layer->layer.workspace_size(max_tokens);
    if (n == 0 && max_tokens != 0)
      return fp4moe::invalid_argument("no workspace size for max_tokens " + std::to_string(max_tokens) +
                                      " (negative, or more than the layer takes in one call)");
    *out = n;
    return fp4moe::Status::ok();
  });
}

int fp4moe_layer_run(const fp4moe_layer* layer, const void* hidden, int64_t num_tokens, const int32_t* topk_ids,
                     const float* topk_weights, void* output, void* workspace, size_t workspace_bytes, void* stream,
                     char* err, size_t err_len) {
  return guarded(err, err_len, [&]() -> fp4moe::Status {
    if (layer == nullptr) return fp4moe::invalid_argument("fp4moe_layer_run: the layer is null");
    fp4moe::MoeForwardArgs a;
    a.hidden = hidden;
    a.num_tokens = num_tokens;
    a.topk_ids = topk_ids;
    a.topk_weights = topk_weights;
    a.output = output;
    return layer->layer.run(a, workspace, workspace_bytes, as_stream(stream));
  });
}

int fp4moe_layer_check(const fp4moe_layer* layer, const void* workspace, void* stream, char* err, size_t err_len) {
  return guarded(err, err_len, [&]() -> fp4moe::Status {
    if (layer == nullptr) return fp4moe::invalid_argument("fp4moe_layer_check: the layer is null");
    return layer->layer.check(workspace, as_stream(stream));
  });
}

int fp4moe_layer_plan(const fp4moe_layer* layer, int64_t num_tokens, char* buf, size_t len) {
  return guarded(buf, len, [&]() -> fp4moe::Status {
    if (layer == nullptr) return fp4moe::invalid_argument("fp4moe_layer_plan: the layer is null");
    fp4moe::MoeForwardArgs a;
    a.num_tokens = num_tokens;
    fp4moe::MoeRunPlan p;
    FP4MOE_RETURN_IF_ERROR(layer->layer.plan(a, &p));
    copy_text(p.to_string(), buf, len);  // (an error's message goes to buf too)
    return fp4moe::Status::ok();
  });
}

size_t fp4moe_quantize_workspace_size(void) { return fp4moe::QuantizeNvfp4::workspace_size(fp4moe::QuantizeNvfp4Args{}); }

int fp4moe_quantize(const void* input, int64_t rows, int64_t k, void* packed, void* scales, float* global_scale,
                    void* workspace, size_t workspace_bytes, void* stream, char* err, size_t err_len) {
  return guarded(err, err_len, [&]() -> fp4moe::Status {
    fp4moe::QuantizeNvfp4Args a;
    a.input = input;
    a.rows = rows;
    a.k = k;
    a.packed = packed;
    a.scales = scales;
    a.scale_layout = fp4moe::ScaleLayout::kLinear;
    a.global_scale = global_scale;
    a.compute_global_scale = true;
    return fp4moe::QuantizeNvfp4::run(a, workspace, workspace_bytes, as_stream(stream));
  });
}

int fp4moe_quantize_check(const void* workspace, void* stream, char* err, size_t err_len) {
  return guarded(err, err_len, [&]() { return fp4moe::QuantizeNvfp4::check(workspace, as_stream(stream)); });
}

}  // extern "C"
