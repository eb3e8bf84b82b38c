# Argument checks of the MoE forward call, done in Python before anything is launched (nothing is written then).
# SPDX-License-Identifier: Apache-2.0
"""Validation of the tensors a forward call takes: dtype, device, shape, contiguity, the token bound."""
from __future__ import annotations

from typing import Any, Optional, Sequence


def _dtype_name(t: Any) -> str:
    return str(getattr(t, "dtype", type(t).__name__)).replace("torch.", "")


def check_tensor(name: str, t: Any, dtype: str, shape: Sequence[int], device: Any) -> None:
    """TypeError for a non-tensor or the wrong dtype; ValueError for the wrong device, shape or layout."""
    if not hasattr(t, "dtype") or not hasattr(t, "shape") or not hasattr(t, "device"):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if _dtype_name(t) != dtype:
        raise TypeError(f"{name} must be {dtype}, got {_dtype_name(t)}")
    if str(t.device) != str(device):
        raise ValueError(f"{name} is on {t.device}; the MoE layer's weights are on {device}")
    if tuple(t.shape) != tuple(shape):
        raise ValueError(f"{name} must have shape {tuple(shape)}, got {tuple(t.shape)}")
    if not t.is_contiguous():
        raise ValueError(f"{name} must be contiguous (row-major); call .contiguous() first")


def check_forward(hidden: Any, topk_ids: Any, topk_weights: Any, out: Optional[Any], *, hidden_size: int, top_k: int,
                  max_tokens: int, device: Any) -> int:
    """The forward call's arguments; returns T. Raises before anything runs."""
    shape = getattr(hidden, "shape", None)
    if shape is None or len(shape) != 2:
        raise ValueError(f"hidden_states must be [T, {hidden_size}], got shape {None if shape is None else tuple(shape)}")
    T = int(shape[0])
    if T > max_tokens:
        raise ValueError(f"{T} tokens exceed the max_tokens={max_tokens} this MoE was built for (its workspace)")
    check_tensor("hidden_states", hidden, "bfloat16", (T, hidden_size), device)
    check_tensor("topk_ids", topk_ids, "int32", (T, top_k), device)
    check_tensor("topk_weights", topk_weights, "float32", (T, top_k), device)
    if out is not None:
        check_tensor("out", out, "bfloat16", (T, hidden_size), device)
        if out.data_ptr() == hidden.data_ptr() and T > 0:
            raise ValueError("out must not alias hidden_states")
    return T
