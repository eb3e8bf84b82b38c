# Writes OUT (a header defining FP4MOE_GIT_HASH) from `git rev-parse` in SRC, only when the text changes, so
# that a new commit updates `fp4moe --version` without recompiling anything else. Run at build time.
# SPDX-License-Identifier: Apache-2.0
execute_process(COMMAND git -C "${SRC}" rev-parse --short=12 HEAD OUTPUT_VARIABLE hash ERROR_QUIET
                OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR hash STREQUAL "")
  set(hash "unknown")
else()
  execute_process(COMMAND git -C "${SRC}" status --porcelain --untracked-files=no OUTPUT_VARIABLE dirty ERROR_QUIET)
  if(NOT dirty STREQUAL "")
    set(hash "${hash}-dirty")
  endif()
endif()
set(text "// Generated at build time by cmake/git_hash.cmake.\n#pragma once\n#define FP4MOE_GIT_HASH \"${hash}\"\n")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
else()
  set(old "")
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
