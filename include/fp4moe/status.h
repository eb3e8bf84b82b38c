// fp4moe::Status: the one error type every public host entry point returns (no exceptions cross the API).
// SPDX-License-Identifier: Apache-2.0
#pragma once

#include <string>
#include <utility>

namespace fp4moe {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,   // a caller-supplied value breaks a documented rule
  kMisaligned,        // a pointer or size is not aligned as the kernel needs
  kUnsupported,       // valid input, but no shipped kernel/config handles it
  kResourceExhausted, // workspace too small, shared memory over budget, ...
  kCudaError,         // a CUDA runtime call failed
  kInternal,          // a bug in fp4moe
  kNotFound,          // a file, preset or cache entry does not exist
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return Status(); }
  bool is_ok() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "ok" or "<code name>: <message>".
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status invalid_argument(std::string m) { return Status(StatusCode::kInvalidArgument, std::move(m)); }
inline Status misaligned(std::string m) { return Status(StatusCode::kMisaligned, std::move(m)); }
inline Status unsupported(std::string m) { return Status(StatusCode::kUnsupported, std::move(m)); }

}  // namespace fp4moe

// Return early from a function returning Status when an expression yields a non-ok Status.
#define FP4MOE_RETURN_IF_ERROR(expr)            \
  do {                                          \
    ::fp4moe::Status _fp4moe_s = (expr);        \
    if (!_fp4moe_s.is_ok()) return _fp4moe_s;   \
  } while (0)
