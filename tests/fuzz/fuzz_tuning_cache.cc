// libFuzzer target: the tuning-cache parser on arbitrary bytes never crashes, throws or leaks, and a cache it accepts
// survives a round trip through its own JSON.
// SPDX-License-Identifier: Apache-2.0
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "fp4moe/tuning.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const fp4moe::TuningEnvironment env{"NVIDIA H200", 132, 13000, 13000, "0.3.0"};
  const std::string text(reinterpret_cast<const char*>(data), size);
  fp4moe::TuningCache c;
  std::string note;
  if (!fp4moe::TuningCache::parse(text, env, &c, &note).is_ok()) std::abort();  // only a null output is an error
  if (c.size() > 0) {
    fp4moe::TuningCache back;
    if (!fp4moe::TuningCache::parse(c.to_json(), env, &back, &note).is_ok() || back.size() != c.size()) std::abort();
  }
  return 0;
}
