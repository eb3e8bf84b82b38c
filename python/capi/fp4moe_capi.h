/* The C ABI of fp4moe that the Python package loads with ctypes (libfp4moe_capi.so): plain types, no exceptions.
 * SPDX-License-Identifier: Apache-2.0
 *
 * Every function returning int returns 0 on success or an fp4moe::StatusCode (1 invalid argument, 2 misaligned,
 * 3 unsupported, 4 resource exhausted, 5 CUDA error, 6 internal, 7 not found) and writes the message, NUL-terminated
 * and cut to err_len bytes, into err (when err is not NULL). Streams are cudaStream_t values (0: the legacy stream).
 */
#ifndef FP4MOE_CAPI_H_
#define FP4MOE_CAPI_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FP4MOE_CAPI_VERSION 5
#define FP4MOE_CAPI __attribute__((visibility("default")))

typedef struct fp4moe_layer fp4moe_layer;

/* FP4MOE_CAPI_VERSION of the library (the package refuses a library of another version). */
FP4MOE_CAPI int fp4moe_capi_version(void);
/* "fp4moe 0.3.0 (git ..., CUDA on, kernels for sm_90a sm_120f)". */
FP4MOE_CAPI const char* fp4moe_build_text(void);

/* shape: E, H, I, k, E_global (0: E), first_expert. options: gate_up_order (0 gate first, 1 up first),
 * global_scale_kind (0 quantize-style gs, 1 ModelOpt dequantize multiplier), finalize (0 deterministic, 1 atomic, 2 deterministic with bf16
 * partials),
 * block_m (0: per call), programmatic_launch, fuse_small_routing, warp_specialized, kernel_arch (0: the device's),
 * direct_decode, cluster_decode, gate_up_tail (fp4moe::MoeLayerOptions; version 2 added direct_decode, 3 cluster_decode,
 * 4 gate_up_tail; 5 added fp4moe_quantize_check).
 * tuning_cache: "" default location, "none", or a path. w13/w2: packed, scales, global_scale device pointers.
 * The layer lives on the current device; init synchronises `stream` once. */
FP4MOE_CAPI int fp4moe_layer_create(const int64_t shape[6], const int32_t options[11], const char* tuning_cache,
                        const void* const w13[3], const void* const w2[3], void* stream, fp4moe_layer** out, char* err,
                        size_t err_len);
FP4MOE_CAPI void fp4moe_layer_destroy(fp4moe_layer* layer);
FP4MOE_CAPI int fp4moe_layer_workspace_size(const fp4moe_layer* layer, int64_t max_tokens, size_t* out, char* err, size_t err_len);
/* Enqueues a forward pass on `stream` (no allocation, no synchronisation). */
FP4MOE_CAPI int fp4moe_layer_run(const fp4moe_layer* layer, const void* hidden, int64_t num_tokens, const int32_t* topk_ids,
                     const float* topk_weights, void* output, void* workspace, size_t workspace_bytes, void* stream,
                     char* err, size_t err_len);
/* Synchronises `stream`; reports bad ids or weights of the last run (an error code and message). */
FP4MOE_CAPI int fp4moe_layer_check(const fp4moe_layer* layer, const void* workspace, void* stream, char* err, size_t err_len);
/* The plan of a call of num_tokens tokens (MoeRunPlan::to_string) into buf. */
FP4MOE_CAPI int fp4moe_layer_plan(const fp4moe_layer* layer, int64_t num_tokens, char* buf, size_t len);

/* NVFP4 quantization on the GPU (the recipe of docs/format.md): bf16 [rows, k] -> packed uint8 [rows, k/2], linear
 * UE4M3 scales [rows, k/16], and the tensor's global scale gs = 448 * 6 / amax written to global_scale (device fp32),
 * all on `stream` without synchronising. */
FP4MOE_CAPI size_t fp4moe_quantize_workspace_size(void);
FP4MOE_CAPI int fp4moe_quantize(const void* input, int64_t rows, int64_t k, void* packed, void* scales, float* global_scale,
                    void* workspace, size_t workspace_bytes, void* stream, char* err, size_t err_len);
/* Synchronises `stream`; reports what the last fp4moe_quantize into `workspace` found (Inf or NaN input). Version 5. */
FP4MOE_CAPI int fp4moe_quantize_check(const void* workspace, void* stream, char* err, size_t err_len);

#ifdef __cplusplus
}
#endif

#endif /* FP4MOE_CAPI_H_ */
