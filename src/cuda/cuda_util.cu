// Internal CUDA helpers (src/cuda/cuda_util.h).
// SPDX-License-Identifier: Apache-2.0
#include "src/cuda/cuda_util.h"

namespace fp4moe::detail {

Status cuda_status(cudaError_t err, const char* what, const char* file, int line) {
  return Status(StatusCode::kCudaError, std::string(cudaGetErrorName(err)) + " (" + cudaGetErrorString(err) +
                                            ") from " + what + " at " + file + ":" + std::to_string(line));
}

Status check_device_pointer(const void* p, size_t bytes, const char* name) {
  if (p == nullptr) return invalid_argument(std::string(name) + " is null");
  if (!is_aligned(p, bytes))
    return misaligned(std::string(name) + " must be " + std::to_string(bytes) + "-byte aligned");
  return Status::ok();
}

Status check_stream_device(cudaStream_t stream, int device) {
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  FP4MOE_CUDA_TRY(cudaStreamIsCapturing(stream, &capturing));
  if (capturing != cudaStreamCaptureStatusNone) return Status::ok();
  int stream_dev = -1;
  FP4MOE_CUDA_TRY(cudaStreamGetDevice(stream, &stream_dev));
  if (stream_dev != device)
    return invalid_argument("the stream belongs to device " + std::to_string(stream_dev) +
                            "; the layer's weights live on device " + std::to_string(device));
  return Status::ok();
}

Status read_error_word(const uint32_t* word, cudaStream_t stream, uint32_t* out) {
  uint32_t v = 0;
  FP4MOE_CUDA_TRY(cudaMemcpyAsync(&v, word, 4, cudaMemcpyDeviceToHost, stream));
  FP4MOE_CUDA_TRY(cudaStreamSynchronize(stream));
  *out = v;
  return Status::ok();
}

}  // namespace fp4moe::detail
