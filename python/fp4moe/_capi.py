# Loads libfp4moe_capi.so (the library's C ABI, python/capi/fp4moe_capi.h) with ctypes and maps its errors.
# SPDX-License-Identifier: Apache-2.0
"""The native library, its function signatures, and fp4moe Status codes as Python exceptions."""
from __future__ import annotations

import ctypes
import os
from pathlib import Path
from typing import Optional

CAPI_VERSION = 5
_ERR_LEN = 2048

# fp4moe::StatusCode -> the exception a Python caller gets.
_STATUS = {
    1: ("invalid argument", ValueError),
    2: ("misaligned", ValueError),
    3: ("unsupported", ValueError),
    4: ("resource exhausted", RuntimeError),
    5: ("CUDA error", RuntimeError),
    6: ("internal error", RuntimeError),
    7: ("not found", FileNotFoundError),
}


class Fp4moeError(RuntimeError):
    """An fp4moe error that is not a caller's bad input (CUDA errors, exhausted resources)."""


def library_path() -> Path:
    """$FP4MOE_CAPI_LIBRARY, else the libfp4moe_capi.so inside the installed package."""
    env = os.environ.get("FP4MOE_CAPI_LIBRARY")
    if env:
        return Path(env)
    return Path(__file__).resolve().parent / "lib" / "libfp4moe_capi.so"


_lib: Optional[ctypes.CDLL] = None


def lib() -> ctypes.CDLL:
    """The loaded library (loaded on first use, so that importing fp4moe never fails for it)."""
    global _lib
    if _lib is not None:
        return _lib
    path = library_path()
    if not path.is_file():
        raise ImportError(f"fp4moe's native library is missing: {path} (install the wheel, or set FP4MOE_CAPI_LIBRARY)")
    l = ctypes.CDLL(str(path))
    c_i64p, c_i32p, c_vp = ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_int32), ctypes.c_void_p
    sig = {
        "fp4moe_capi_version": (ctypes.c_int, []),
        "fp4moe_build_text": (ctypes.c_char_p, []),
        "fp4moe_layer_create": (ctypes.c_int, [c_i64p, c_i32p, ctypes.c_char_p, ctypes.POINTER(c_vp),
                                               ctypes.POINTER(c_vp), c_vp, ctypes.POINTER(c_vp), ctypes.c_char_p,
                                               ctypes.c_size_t]),
        "fp4moe_layer_destroy": (None, [c_vp]),
        "fp4moe_layer_workspace_size": (ctypes.c_int, [c_vp, ctypes.c_int64, ctypes.POINTER(ctypes.c_size_t),
                                                       ctypes.c_char_p, ctypes.c_size_t]),
        "fp4moe_layer_run": (ctypes.c_int, [c_vp, c_vp, ctypes.c_int64, c_vp, c_vp, c_vp, c_vp, ctypes.c_size_t, c_vp,
                                            ctypes.c_char_p, ctypes.c_size_t]),
        "fp4moe_layer_check": (ctypes.c_int, [c_vp, c_vp, c_vp, ctypes.c_char_p, ctypes.c_size_t]),
        "fp4moe_layer_plan": (ctypes.c_int, [c_vp, ctypes.c_int64, ctypes.c_char_p, ctypes.c_size_t]),
        "fp4moe_quantize_workspace_size": (ctypes.c_size_t, []),
        "fp4moe_quantize": (ctypes.c_int, [c_vp, ctypes.c_int64, ctypes.c_int64, c_vp, c_vp, c_vp, c_vp,
                                           ctypes.c_size_t, c_vp, ctypes.c_char_p, ctypes.c_size_t]),
        "fp4moe_quantize_check": (ctypes.c_int, [c_vp, c_vp, ctypes.c_char_p, ctypes.c_size_t]),
    }
    for name, (res, args) in sig.items():
        f = getattr(l, name)
        f.restype = res
        f.argtypes = args
    if l.fp4moe_capi_version() != CAPI_VERSION:
        raise ImportError(f"{path} has C ABI version {l.fp4moe_capi_version()}, this package needs {CAPI_VERSION}")
    _lib = l
    return l


def error_buffer() -> ctypes.Array:
    return ctypes.create_string_buffer(_ERR_LEN)


def check(code: int, err: ctypes.Array, what: str) -> None:
    """Raises the exception of a non-zero fp4moe status code, with the library's message."""
    if code == 0:
        return
    name, exc = _STATUS.get(code, ("error", RuntimeError))
    message = err.value.decode("utf-8", "replace")
    if exc is RuntimeError:
        raise Fp4moeError(f"{what}: {name}: {message}")
    raise exc(f"{what}: {message}")
