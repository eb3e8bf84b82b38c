// FP4MOE_HD: marks small constexpr helpers shared by host code and device kernels.
// SPDX-License-Identifier: Apache-2.0
#pragma once
#if defined(__CUDACC__)
#define FP4MOE_HD __host__ __device__
#else
#define FP4MOE_HD
#endif
