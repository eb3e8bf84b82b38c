# fp4moe for Python: NVFP4 MoE layers as PyTorch modules and custom ops, the planner, quantization, TP/EP slicing.
# SPDX-License-Identifier: Apache-2.0
"""fp4moe: NVFP4 Mixture-of-Experts layers for NVIDIA GPUs.

Quick start (a CUDA GPU with sm_90, or compile-verified sm_120)::

    import torch, fp4moe
    moe = fp4moe.MoE.from_modelopt(w13, w13_scale, w13_scale_2, w2, w2_scale, w2_scale_2, top_k=8,
                                   gate_up_order="gate_first", expert_range=(0, 256), num_global_experts=256)
    out = moe(hidden_states, topk_ids, topk_weights)   # bf16 [T, H]

Without a GPU: :func:`plan` (the shared-memory planner), :func:`shard_tp`, :mod:`fp4moe.modelopt`.
"""
from __future__ import annotations

from ._capi import Fp4moeError, library_path
from ._cli import cli_path, plan, run_cli, tune
from .modelopt import read_safetensors, shard_tp, stack_layer

__version__ = "0.3.0"


def build_info() -> str:
    """The native library's build: version, git hash, CUDA targets ("fp4moe 0.3.0 (git ..., CUDA on, ...)")."""
    from . import _capi
    return _capi.lib().fp4moe_build_text().decode()


try:  # The module and the ops need torch; everything above works without it.
    import torch as _torch  # noqa: F401
except ImportError:  # pragma: no cover - exercised where torch is absent
    _torch = None
if _torch is not None:
    from ._torch import MoE, quantize_nvfp4  # noqa: E402  (registers torch.ops.fp4moe.*)

__all__ = ["Fp4moeError", "MoE", "build_info", "cli_path", "library_path", "plan", "quantize_nvfp4",
           "read_safetensors", "run_cli", "shard_tp", "stack_layer", "tune"]
