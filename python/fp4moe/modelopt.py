# ModelOpt NVFP4 checkpoint tensors: reading a layer's experts from safetensors, stacking them, slicing TP shards.
# SPDX-License-Identifier: Apache-2.0
"""The ModelOpt layout, and the tensors fp4moe.MoE.from_modelopt takes.

Per expert and projection a ModelOpt NVFP4 checkpoint stores ``weight`` (uint8 [N, K/2], element 2j in the low
nibble), ``weight_scale`` (float8_e4m3fn [N, K/16], one per 16 elements along K) and ``weight_scale_2`` (fp32
scalar: the dequantization multiplier, x = e2m1 * scale * weight_scale_2). Gate and up ([I, H] each) stack into
w13 [E, 2I, H] in the order given (vLLM: gate first; FlashInfer / TensorRT-LLM: up first), down is w2 [E, H, I].

Everything here works on torch tensors and on numpy arrays (numpy holds float8 scales as their uint8 bits), so
that the layout logic is tested without a GPU.
"""
from __future__ import annotations

import re
from typing import Any, Dict, Optional, Sequence, Tuple

# (gate, up, down) projection names that checkpoints use.
PROJECTION_NAMES = (("gate_proj", "up_proj", "down_proj"), ("w1", "w3", "w2"))


def _is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch")


def _stack(xs: Sequence[Any]) -> Any:
    if _is_torch(xs[0]):
        import torch
        return torch.stack(list(xs))
    import numpy as np
    return np.stack(list(xs))


def _cat(xs: Sequence[Any], dim: int) -> Any:
    if _is_torch(xs[0]):
        import torch
        return torch.cat(list(xs), dim=dim)
    import numpy as np
    return np.concatenate(list(xs), axis=dim)


def read_safetensors(path: str, framework: str = "auto") -> Dict[str, Any]:
    """Every tensor of a safetensors file. framework "pt" (torch tensors; mmapped by safetensors), "numpy" (float8
    tensors as uint8 bits), or "auto" (pt when torch imports)."""
    if framework == "auto":
        try:
            import torch  # noqa: F401  (only whether it imports)
            framework = "pt"
        except ImportError:
            framework = "numpy"
    if framework == "pt":
        from safetensors import safe_open
        with safe_open(path, framework="pt") as f:
            return {k: f.get_tensor(k) for k in f.keys()}
    if framework != "numpy":
        raise ValueError(f"framework must be 'pt', 'numpy' or 'auto', got {framework!r}")
    import numpy as np
    from safetensors import deserialize
    dtypes = {"U8": np.uint8, "I8": np.int8, "F8_E4M3": np.uint8, "F32": np.float32, "F16": np.float16,
              "I32": np.int32, "I64": np.int64, "U16": np.uint16, "BF16": np.uint16}
    with open(path, "rb") as f:
        raw = f.read()
    out = {}
    for name, t in deserialize(raw):
        if t["dtype"] not in dtypes:
            raise ValueError(f"{path}: tensor {name} has dtype {t['dtype']}, which numpy cannot hold")
        out[name] = np.frombuffer(t["data"], dtype=dtypes[t["dtype"]]).reshape(t["shape"])
    return out


def _scalar(x: Any) -> Any:
    return x.reshape(()) if hasattr(x, "reshape") else x


def stack_layer(tensors: Dict[str, Any], prefix: str, *, num_experts: Optional[int] = None,
                names: Optional[Tuple[str, str, str]] = None, gate_up_order: str = "gate_first") -> Dict[str, Any]:
    """The experts of one MoE layer (keys ``{prefix}.{e}.{gate|up|down}.{weight,weight_scale,weight_scale_2}``),
    stacked: w13 [E, 2I, H/2], w13_scale [E, 2I, H/16], w13_scale_2 [E, 2] (gate's, up's), w2 [E, H, I/2],
    w2_scale [E, H, I/16], w2_scale_2 [E]. Experts must be numbered 0..E-1 with none missing."""
    if gate_up_order not in ("gate_first", "up_first"):
        raise ValueError(f"gate_up_order must be 'gate_first' or 'up_first', got {gate_up_order!r}")
    prefix = prefix.rstrip(".")
    if names is None:
        for cand in PROJECTION_NAMES:
            if f"{prefix}.0.{cand[0]}.weight" in tensors:
                names = cand
                break
        else:
            raise KeyError(f"no expert 0 under '{prefix}': expected {prefix}.0.gate_proj.weight or {prefix}.0.w1.weight")
    found = set()
    pat = re.compile(re.escape(prefix) + r"\.(\d+)\.")
    for k in tensors:
        m = pat.match(k)
        if m:
            found.add(int(m.group(1)))
    E = num_experts if num_experts is not None else (max(found) + 1 if found else 0)
    missing = [e for e in range(E) if e not in found]
    if E == 0 or missing:
        raise KeyError(f"'{prefix}': experts {missing[:8]} of {E} are missing" if missing else f"'{prefix}': no experts")

    def get(e: int, proj: str, what: str) -> Any:
        key = f"{prefix}.{e}.{proj}.{what}"
        if key not in tensors:
            raise KeyError(f"missing tensor {key}")
        return tensors[key]

    gate, up, down = names
    first, second = (gate, up) if gate_up_order == "gate_first" else (up, gate)
    out = {
        "w13": _stack([_cat([get(e, first, "weight"), get(e, second, "weight")], 0) for e in range(E)]),
        "w13_scale": _stack([_cat([get(e, first, "weight_scale"), get(e, second, "weight_scale")], 0) for e in range(E)]),
        "w13_scale_2": _stack([_stack([_scalar(get(e, gate, "weight_scale_2")), _scalar(get(e, up, "weight_scale_2"))])
                               for e in range(E)]),
        "w2": _stack([get(e, down, "weight") for e in range(E)]),
        "w2_scale": _stack([get(e, down, "weight_scale") for e in range(E)]),
        "w2_scale_2": _stack([_scalar(get(e, down, "weight_scale_2")) for e in range(E)]),
    }
    check_modelopt_shapes(out)
    return out


def check_modelopt_shapes(t: Dict[str, Any]) -> Tuple[int, int, int]:
    """The shapes of a stacked layer agree (ValueError naming the tensor otherwise); returns E, H, I."""
    w13, w2 = t["w13"], t["w2"]
    if len(w13.shape) != 3 or len(w2.shape) != 3:
        raise ValueError(f"w13 and w2 must be [E, N, K/2], got {tuple(w13.shape)} and {tuple(w2.shape)}")
    E, two_i, half_h = (int(d) for d in w13.shape)
    H, I = 2 * half_h, two_i // 2
    want = {"w13_scale": (E, 2 * I, H // 16), "w2": (E, H, I // 2), "w2_scale": (E, H, I // 16)}
    for name, shape in want.items():
        if tuple(int(d) for d in t[name].shape) != shape:
            raise ValueError(f"{name} must be {shape} for w13 {tuple(w13.shape)}, got {tuple(t[name].shape)}")
    if two_i % 2:
        raise ValueError(f"w13 must stack gate and up: {two_i} rows is odd")
    return E, H, I


def shard_tp(w13: Any, w13_scale: Any, w2: Any, w2_scale: Any, tp_size: int, tp_rank: int) -> Tuple[Any, Any, Any, Any]:
    """Tensor-parallel rank `tp_rank` of `tp_size`: intermediate columns [r I/tp, (r+1) I/tp) of every expert. Each
    half of w13 [E, 2I, H/2] (and its scales) keeps its rows of the slice, in their order; w2 [E, H, I/2] and its
    scales keep their columns. Global scales are per expert and unchanged. I/tp must be a multiple of 64. Returns
    (w13, w13_scale, w2, w2_scale) of the rank: views where the layout allows, copies for w13."""
    if not (isinstance(tp_size, int) and isinstance(tp_rank, int)) or tp_size < 1 or not 0 <= tp_rank < tp_size:
        raise ValueError(f"tp_rank must be in [0, tp_size), got rank {tp_rank!r} of {tp_size!r}")
    E, H, I = check_modelopt_shapes({"w13": w13, "w13_scale": w13_scale, "w2": w2, "w2_scale": w2_scale})
    if I % tp_size or (I // tp_size) % 64:
        raise ValueError(f"intermediate {I} / tp_size {tp_size} must be a whole multiple of 64")
    s = I // tp_size
    lo, hi = tp_rank * s, (tp_rank + 1) * s
    w13_r = _cat([w13[:, lo:hi], w13[:, I + lo:I + hi]], 1)
    s13_r = _cat([w13_scale[:, lo:hi], w13_scale[:, I + lo:I + hi]], 1)
    return w13_r, s13_r, w2[:, :, lo // 2:hi // 2], w2_scale[:, :, lo // 16:hi // 16]
