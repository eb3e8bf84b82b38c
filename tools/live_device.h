// The GPU the tool runs on, if any (properties read from the CUDA runtime; absent without CUDA or a GPU).
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <cstdint>
#include <string>

namespace fp4moe::cli {

struct LiveDevice {
  bool present = false;
  std::string name;
  int cc = 0, sms = 0;
  int64_t smem_per_block = 0, smem_per_sm = 0;
};
LiveDevice query_live_device();

}  // namespace fp4moe::cli
