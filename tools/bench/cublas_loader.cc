// cuBLAS loaded at run time (see cublas_loader.h).
// SPDX-License-Identifier: Apache-2.0
#include "bench/cublas_loader.h"

#include <dlfcn.h>

namespace fp4moe::bench {

bool Cublas::load() {
  for (const char* name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so"}) {
    lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lib) break;
  }
  if (!lib) {
    error = "libcublas.so not found (set LD_LIBRARY_PATH)";
    return false;
  }
  auto sym = [&](auto& fn, const char* n) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, n));
    if (!fn) error += std::string(" missing ") + n;
  };
  sym(create, "cublasCreate_v2");
  sym(destroy, "cublasDestroy_v2");
  sym(set_stream, "cublasSetStream_v2");
  sym(gemm_ex, "cublasGemmEx");
  sym(gemm_strided_batched_ex, "cublasGemmStridedBatchedEx");
  if (!error.empty()) return false;
  if (create(&handle) != CUBLAS_STATUS_SUCCESS) {
    error = "cublasCreate failed";
    return false;
  }
  return true;
}

Cublas::~Cublas() {
  if (handle && destroy) destroy(handle);
  if (lib) dlclose(lib);
}

}  // namespace fp4moe::bench
