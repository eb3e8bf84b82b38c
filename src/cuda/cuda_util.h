// Internal CUDA helpers: turn runtime errors into Status, pointer checks, device queries.
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "fp4moe/status.h"

namespace fp4moe::detail {

Status cuda_status(cudaError_t err, const char* what, const char* file, int line);

inline bool is_aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// Status naming the argument when `p` is null or not `bytes`-aligned.
Status check_device_pointer(const void* p, size_t bytes, const char* name);

// kInvalidArgument where `stream` belongs to another device than `device` (the one a layer's weights live on). Not
// checked while the stream captures a graph: cudaStreamGetDevice would invalidate the capture, and a capture on
// another device's stream fails at its first launch instead.
Status check_stream_device(cudaStream_t stream, int device);

// The 32-bit error word a kernel recorded at `word` (device), read on `stream` after the work queued before it
// (synchronises the stream): how every check() reads its flags. The caller has checked `word`
// (check_device_pointer, with the name its API gives it).
Status read_error_word(const uint32_t* word, cudaStream_t stream, uint32_t* out);

}  // namespace fp4moe::detail

// Return a kCudaError Status from the enclosing function when a CUDA call fails.
#define FP4MOE_CUDA_TRY(expr)                                                                     \
  do {                                                                                            \
    cudaError_t _fp4moe_e = (expr);                                                               \
    if (_fp4moe_e != cudaSuccess) return ::fp4moe::detail::cuda_status(_fp4moe_e, #expr, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: report a launch failure as a Status.
#define FP4MOE_CHECK_LAUNCH(name) FP4MOE_CUDA_TRY(cudaGetLastError())
