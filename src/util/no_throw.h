// no_throw: a public entry point's body run so that an exception from inside it becomes a Status.
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <exception>
#include <new>
#include <string>

#include "fp4moe/status.h"

namespace fp4moe::detail {

// f()'s Status, with an exception from inside it (host memory running out in an allocation, a container's
// length_error) turned into one: a public entry point wraps its body in this so that nothing crosses the API. The
// messages of the fallbacks fit std::string's inline buffer, so building them allocates nothing.
template <class F>
Status no_throw(F&& f) noexcept {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kResourceExhausted, "out of memory");
  } catch (const std::exception& e) {
    try {
      return Status(StatusCode::kInternal, std::string("unexpected exception: ") + e.what());
    } catch (...) {
      return Status(StatusCode::kInternal, "exception");
    }
  } catch (...) {
    return Status(StatusCode::kInternal, "exception");
  }
}

}  // namespace fp4moe::detail
