// Host launcher for kernels/quantize_nvfp4.cuh: argument checks, workspace, launches.
// SPDX-License-Identifier: Apache-2.0
#include "fp4moe/quantize.h"
#include "fp4moe/nvfp4.h"
#include "kernels/quantize_nvfp4.cuh"
#include "src/cuda/cuda_util.h"

namespace fp4moe {
namespace {
constexpr int kThreads = 256;
constexpr size_t kWorkspaceBytes = 16;  // [0] amax bits, [1] error flags (uint32 each)
}  // namespace

Status QuantizeNvfp4::can_implement(const QuantizeNvfp4Args& a) {
  FP4MOE_RETURN_IF_ERROR(validate_scale_layout(a.scale_layout));
  FP4MOE_RETURN_IF_ERROR(validate_nvfp4_shape(a.rows, a.k));
  if (a.rows == 0) return Status::ok();
  FP4MOE_RETURN_IF_ERROR(detail::check_device_pointer(a.input, 16, "input"));
  FP4MOE_RETURN_IF_ERROR(detail::check_device_pointer(a.packed, 8, "packed"));
  FP4MOE_RETURN_IF_ERROR(detail::check_device_pointer(a.scales, 1, "scales"));
  FP4MOE_RETURN_IF_ERROR(detail::check_device_pointer(a.global_scale, 4, "global_scale"));
  return Status::ok();
}

size_t QuantizeNvfp4::workspace_size(const QuantizeNvfp4Args&) { return kWorkspaceBytes; }

Status QuantizeNvfp4::run(const QuantizeNvfp4Args& a, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  FP4MOE_RETURN_IF_ERROR(can_implement(a));
  if (workspace_bytes < kWorkspaceBytes)
    return Status(StatusCode::kResourceExhausted, "workspace holds " + std::to_string(workspace_bytes) +
                                                      " bytes, needs " + std::to_string(kWorkspaceBytes));
  FP4MOE_RETURN_IF_ERROR(detail::check_device_pointer(workspace, 4, "workspace"));
  auto* ws = static_cast<uint32_t*>(workspace);
  FP4MOE_CUDA_TRY(cudaMemsetAsync(ws, 0, kWorkspaceBytes, stream));
  if (a.rows == 0) return Status::ok();

  if (a.compute_global_scale) {
    const int64_t num_vec8 = a.rows * a.k / 8;
    int dev = 0, sms = 0;
    FP4MOE_CUDA_TRY(cudaGetDevice(&dev));
    FP4MOE_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    const int64_t want = ceil_div(num_vec8, kThreads);
    const int blocks = static_cast<int>(want < int64_t{sms} * 8 ? want : int64_t{sms} * 8);
    kernels::nvfp4_amax_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const uint4*>(a.input), num_vec8,
                                                                 ws + 0, ws + 1);
    FP4MOE_CHECK_LAUNCH("nvfp4_amax_kernel");
  }
  kernels::QuantizeNvfp4Params p{};
  p.in = static_cast<const __nv_bfloat16*>(a.input);
  p.packed = static_cast<uint8_t*>(a.packed);
  p.scales = static_cast<uint8_t*>(a.scales);
  p.gs_in = a.compute_global_scale ? nullptr : a.global_scale;
  p.amax_bits = ws + 0;
  p.gs_out = a.compute_global_scale ? a.global_scale : nullptr;
  p.error_flags = ws + 1;
  p.rows = a.rows;
  p.k = a.k;
  p.layout = a.scale_layout;
  const int64_t units = scale_rows_padded(a.rows, a.scale_layout) * scale_cols_padded(a.k, a.scale_layout);
  kernels::quantize_nvfp4_kernel<<<static_cast<unsigned>(ceil_div(units, kThreads)), kThreads, 0, stream>>>(p);
  FP4MOE_CHECK_LAUNCH("quantize_nvfp4_kernel");
  return Status::ok();
}

Status QuantizeNvfp4::check(const void* workspace, cudaStream_t stream) {
  FP4MOE_RETURN_IF_ERROR(detail::check_device_pointer(workspace, 4, "workspace"));
  uint32_t flags = 0;
  FP4MOE_RETURN_IF_ERROR(detail::read_error_word(static_cast<const uint32_t*>(workspace) + 1, stream, &flags));
  if (flags & kernels::kErrNonFiniteInput)
    return invalid_argument("input holds Inf or NaN; NVFP4 cannot represent it (outputs of that run are undefined)");
  if (flags & kernels::kErrBadGlobalScale)
    return invalid_argument("the global scale given is not finite, positive and normal (outputs of that run are undefined)");
  return Status::ok();
}

}  // namespace fp4moe
