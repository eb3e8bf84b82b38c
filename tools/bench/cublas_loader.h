// cuBLAS loaded at run time (dlopen), so fp4moe's tools run without it and the baseline is skipped then.
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cublas_v2.h>

#include <string>

namespace fp4moe::bench {

struct Cublas {
  void* lib = nullptr;
  cublasHandle_t handle = nullptr;
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  using GemmExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                      const void*, const void*, cudaDataType, int, const void*, cudaDataType, int,
                                      const void*, void*, cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
  using GemmStridedBatchedExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                                    int, const void*, const void*, cudaDataType, int, long long,
                                                    const void*, cudaDataType, int, long long, const void*, void*,
                                                    cudaDataType, int, long long, int, cublasComputeType_t,
                                                    cublasGemmAlgo_t);
  GemmExFn gemm_ex = nullptr;  // the 32-bit-int (non _64) entry points
  GemmStridedBatchedExFn gemm_strided_batched_ex = nullptr;
  std::string error;  // why it is not available

  bool load();  // true when every symbol was found and a handle created
  ~Cublas();
};

}  // namespace fp4moe::bench
