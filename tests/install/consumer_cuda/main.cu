// Validates a GLM-5 layer shape with MoeLayer::can_implement through the installed fp4moe (no GPU needed) and
// rejects a bad one with a Status.
// SPDX-License-Identifier: Apache-2.0
#include <cstdio>

#include "fp4moe/moe.h"

int main() {
  const fp4moe::MoeShape glm5{256, 6144, 2048, 8}, bad{256, 6144, 2048, 0};
  const fp4moe::Status ok = fp4moe::MoeLayer::can_implement(glm5, fp4moe::MoeLayerOptions{});
  const fp4moe::Status no = fp4moe::MoeLayer::can_implement(bad, fp4moe::MoeLayerOptions{});
  std::printf("can_implement(GLM-5): %s; top_k 0: %s\n", ok.to_string().c_str(), no.to_string().c_str());
  return ok.is_ok() && !no.is_ok() ? 0 : 1;
}
