// Unit tests of fp4moe::Status.
// SPDX-License-Identifier: Apache-2.0
#include <gtest/gtest.h>

#include "fp4moe/status.h"

namespace fp4moe {
namespace {

Status fails() { return invalid_argument("k must be a multiple of 16"); }
Status forwards() {
  FP4MOE_RETURN_IF_ERROR(fails());
  return Status(StatusCode::kInternal, "not reached");
}

TEST(Status, OkAndErrors) {
  EXPECT_TRUE(Status::ok().is_ok());
  EXPECT_EQ(Status::ok().to_string(), "ok");
  const Status s = forwards();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.to_string(), "invalid argument: k must be a multiple of 16");
  EXPECT_FALSE(static_cast<bool>(s));
}

}  // namespace
}  // namespace fp4moe
