// GPU NVFP4 quantize (bf16 -> NVFP4) and dequantize (NVFP4 -> bf16): can_implement -> workspace_size -> run.
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "fp4moe/scale_layout.h"
#include "fp4moe/status.h"

namespace fp4moe {

struct QuantizeNvfp4Args {
  const void* input = nullptr;   // bf16 [rows, k], row-major, 16-byte aligned (device)
  int64_t rows = 0;              // >= 0; 0 is a no-op
  int64_t k = 0;                 // > 0, multiple of 16
  void* packed = nullptr;        // uint8 [rows, k/2], 8-byte aligned (device)
  void* scales = nullptr;        // UE4M3, scale_buffer_bytes(rows, k, scale_layout) bytes (device)
  ScaleLayout scale_layout = ScaleLayout::kLinear;
  // Global scale (device float). compute_global_scale=false: read from here (e.g. a calibrated
  // input_scale). true: 448*6/amax is computed on the device (no host sync) and written here.
  float* global_scale = nullptr;
  bool compute_global_scale = false;
};

class QuantizeNvfp4 {
 public:
  static Status can_implement(const QuantizeNvfp4Args& args);
  static size_t workspace_size(const QuantizeNvfp4Args& args);
  // Enqueues the work on `stream`; no allocation, no host synchronisation.
  static Status run(const QuantizeNvfp4Args& args, void* workspace, size_t workspace_bytes, cudaStream_t stream);
  // Synchronises `stream` and reports device-side errors recorded in the workspace by the last run
  // (non-finite input; a given global scale that is not finite, positive and normal). Optional: call it when you
  // can afford the sync.
  static Status check(const void* workspace, cudaStream_t stream);
};

struct DequantizeNvfp4Args {
  const void* packed = nullptr;  // uint8 [rows, k/2], 8-byte aligned (device)
  const void* scales = nullptr;  // UE4M3 in scale_layout (device)
  ScaleLayout scale_layout = ScaleLayout::kLinear;
  const float* global_scale = nullptr;  // device float
  int64_t rows = 0;
  int64_t k = 0;
  void* output = nullptr;  // bf16 [rows, k], 16-byte aligned (device)
  // Optional: a device word, 4-byte aligned, where run() records what the host codec would reject (a global scale that
  // is not finite, positive and normal; a scale byte with the sign bit or the NaN pattern); check() reports it.
  // run() zeroes it first. Null: nothing is recorded.
  uint32_t* error_flags = nullptr;
};

// The GPU dequantizer reads its device-resident values (the global scale, the scale bytes) as they are and does not
// synchronise: a global scale of 0 gives Inf and NaN outputs and a NaN scale byte NaN ones, as the arithmetic says.
// With DequantizeNvfp4Args::error_flags it records them, and check() reports them as the host codec's
// dequantize_nvfp4 would.
class DequantizeNvfp4 {
 public:
  static Status can_implement(const DequantizeNvfp4Args& args);
  static size_t workspace_size(const DequantizeNvfp4Args&) { return 0; }
  static Status run(const DequantizeNvfp4Args& args, cudaStream_t stream);
  // Synchronises `stream` and reports what the last run with these error_flags recorded.
  static Status check(const uint32_t* error_flags, cudaStream_t stream);
};

}  // namespace fp4moe
