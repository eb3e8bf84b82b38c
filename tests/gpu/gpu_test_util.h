// Helpers for GPU tests: skip without a device, checked CUDA calls, RAII device buffers.
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace fp4moe::testing {

inline bool have_gpu() {
  int n = 0;
  const bool ok = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
  if (!ok) cudaGetLastError();
  return ok;
}

#define FP4MOE_SKIP_WITHOUT_GPU() \
  if (!::fp4moe::testing::have_gpu()) GTEST_SKIP() << "no CUDA device"

// Device 0's compute capability major (9 on H100 / H200), or -1 where it cannot be read.
inline int compute_capability_major() {
  int major = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return major;
}
// Skips a test of sm_90-only kernels (wgmma, the warp-specialized tiles) elsewhere, saying why.
#define FP4MOE_SKIP_UNLESS_SM90(why) \
  if (::fp4moe::testing::compute_capability_major() != 9) GTEST_SKIP() << why << ": built for sm_90 only"

#define CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr << ": " << cudaGetErrorString(cudaGetLastError())

// A device allocation freed on scope exit; poisoned (every byte = `poison`) on request.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) { alloc(bytes); }
  ~DeviceBuffer() { if (p_) cudaFree(p_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void alloc(size_t bytes) {
    if (p_) cudaFree(p_);
    bytes_ = bytes;
    if (cudaMalloc(&p_, bytes ? bytes : 16) != cudaSuccess) p_ = nullptr;
  }
  void* get() const { return p_; }
  template <class T> T* as() const { return static_cast<T*>(p_); }
  size_t bytes() const { return bytes_; }
  bool poison(uint8_t v = 0xA5) const { return cudaMemset(p_, v, bytes_) == cudaSuccess; }
  template <class T> bool upload(const std::vector<T>& h) const {
    return h.size() * sizeof(T) <= bytes_ && cudaMemcpy(p_, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess;
  }
  // A failed or oversized copy fails the calling test (and returns an empty vector), so that a caller looping over
  // the result cannot pass by checking nothing.
  template <class T> std::vector<T> download(size_t n) const {
    std::vector<T> h(n);
    if (n * sizeof(T) > bytes_) {
      ADD_FAILURE() << "download of " << n * sizeof(T) << " bytes from a buffer of " << bytes_;
      h.clear();
    } else if (const cudaError_t e = cudaMemcpy(h.data(), p_, n * sizeof(T), cudaMemcpyDeviceToHost); e != cudaSuccess) {
      ADD_FAILURE() << "cudaMemcpy to the host: " << cudaGetErrorString(e);
      cudaGetLastError();
      h.clear();
    }
    return h;
  }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace fp4moe::testing
