// Host launcher for kernels/dequantize_nvfp4.cuh.
// SPDX-License-Identifier: Apache-2.0
#include "fp4moe/quantize.h"
#include "fp4moe/nvfp4.h"
#include "kernels/dequantize_nvfp4.cuh"
#include "src/cuda/cuda_util.h"

namespace fp4moe {

Status DequantizeNvfp4::can_implement(const DequantizeNvfp4Args& a) {
  FP4MOE_RETURN_IF_ERROR(validate_scale_layout(a.scale_layout));
  FP4MOE_RETURN_IF_ERROR(validate_nvfp4_shape(a.rows, a.k));
  if (a.rows == 0) return Status::ok();
  FP4MOE_RETURN_IF_ERROR(detail::check_device_pointer(a.packed, 8, "packed"));
  FP4MOE_RETURN_IF_ERROR(detail::check_device_pointer(a.scales, 1, "scales"));
  FP4MOE_RETURN_IF_ERROR(detail::check_device_pointer(a.global_scale, 4, "global_scale"));
  FP4MOE_RETURN_IF_ERROR(detail::check_device_pointer(a.output, 16, "output"));
  if (a.error_flags != nullptr) FP4MOE_RETURN_IF_ERROR(detail::check_device_pointer(a.error_flags, 4, "error_flags"));
  return Status::ok();
}

Status DequantizeNvfp4::run(const DequantizeNvfp4Args& a, cudaStream_t stream) {
  FP4MOE_RETURN_IF_ERROR(can_implement(a));
  if (a.error_flags != nullptr) FP4MOE_CUDA_TRY(cudaMemsetAsync(a.error_flags, 0, 4, stream));
  if (a.rows == 0) return Status::ok();
  kernels::DequantizeNvfp4Params p{};
  p.packed = static_cast<const uint8_t*>(a.packed);
  p.scales = static_cast<const uint8_t*>(a.scales);
  p.gs = a.global_scale;
  p.out = static_cast<__nv_bfloat16*>(a.output);
  p.rows = a.rows;
  p.k = a.k;
  p.layout = a.scale_layout;
  p.error_flags = a.error_flags;
  constexpr int kThreads = 256;
  const int64_t units = a.rows * (a.k / kNvfp4BlockSize);
  kernels::dequantize_nvfp4_kernel<<<static_cast<unsigned>(ceil_div(units, kThreads)), kThreads, 0, stream>>>(p);
  FP4MOE_CHECK_LAUNCH("dequantize_nvfp4_kernel");
  return Status::ok();
}

Status DequantizeNvfp4::check(const uint32_t* error_flags, cudaStream_t stream) {
  FP4MOE_RETURN_IF_ERROR(detail::check_device_pointer(error_flags, 4, "error_flags"));
  uint32_t flags = 0;
  FP4MOE_RETURN_IF_ERROR(detail::read_error_word(error_flags, stream, &flags));
  if (flags & kernels::kErrDequantBadGlobalScale)
    return invalid_argument("the global scale is not finite, positive and normal (outputs of that run are undefined)");
  if (flags & kernels::kErrDequantBadScaleByte)
    return invalid_argument("a scale byte has the sign bit set or is NaN (outputs of that run are undefined)");
  return Status::ok();
}

}  // namespace fp4moe
