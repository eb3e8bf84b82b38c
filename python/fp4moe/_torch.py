# The PyTorch side: the MoE module over the C ABI, the fp4moe:: custom ops, and NVFP4 quantization of tensors.
# SPDX-License-Identifier: Apache-2.0
"""fp4moe.MoE and the ``torch.ops.fp4moe`` operators (needs torch; imported by fp4moe when torch is there)."""
from __future__ import annotations

import ctypes
import itertools
import threading
import warnings
import weakref
from typing import Any, Optional, Tuple

import torch

from . import _capi, _checks
from .modelopt import check_modelopt_shapes, read_safetensors, stack_layer

# MoE objects by handle, so that the operators (which take plain ints) reach a layer and its workspace. Weak: a
# layer the caller drops is freed (its __del__ releases the native layer); a handle that outlives it then raises.
_LAYERS: "weakref.WeakValueDictionary[int, MoE]" = weakref.WeakValueDictionary()
_NEXT = itertools.count(1)
_LOCK = threading.Lock()


def _stream(device: torch.device) -> ctypes.c_void_p:
    return ctypes.c_void_p(torch.cuda.current_stream(device).cuda_stream)


def _ptr(t: Optional[torch.Tensor]) -> ctypes.c_void_p:
    return ctypes.c_void_p(t.data_ptr() if t is not None else 0)


class MoE(torch.nn.Module):
    """One GPU's NVFP4 MoE layer (W4A16): routing, gate_up + SwiGLU, down + router-weighted finalize.

    Build it with :meth:`from_modelopt` or :meth:`from_safetensors`. Calling it runs ``torch.ops.fp4moe.moe``: it
    enqueues on the current CUDA stream of the layer's device, allocates nothing but the output (the workspace is
    the module's, sized for ``max_tokens``), never synchronises, and is CUDA-graph capturable and
    ``torch.compile(fullgraph=True)``-traceable. ``torch.ops.fp4moe.moe(hidden, ids, weights, handle)`` and
    ``torch.ops.fp4moe.moe_out(..., out)`` are the operators (``handle``: :attr:`handle`).
    """

    def __init__(self, handle: int, layer: ctypes.c_void_p, device: torch.device, shape: Tuple[int, ...],
                 max_tokens: int, workspace: torch.Tensor):
        super().__init__()
        self._handle = handle
        self._layer = layer
        self.device = device
        self.num_experts, self.hidden_size, self.intermediate_size, self.top_k, self.num_global_experts, \
            self.first_expert = shape
        self.max_tokens = max_tokens
        self.register_buffer("workspace", workspace, persistent=False)

    @property
    def handle(self) -> int:
        """The int the ``torch.ops.fp4moe`` operators take to find this layer and its workspace."""
        return self._handle

    # ---- construction ---------------------------------------------------------------------------------------
    @classmethod
    def from_modelopt(cls, w13: torch.Tensor, w13_scale: torch.Tensor, w13_scale_2: torch.Tensor, w2: torch.Tensor,
                      w2_scale: torch.Tensor, w2_scale_2: torch.Tensor, *, top_k: int,
                      gate_up_order: str = "gate_first", expert_range: Optional[Tuple[int, int]] = None,
                      num_global_experts: Optional[int] = None, deterministic: bool = True, max_tokens: int = 8192,
                      device: Any = None, w13_scale_2_mismatch: str = "error", tuning_cache: str = "",
                      kernel_arch: int = 0, bf16_partials: bool = False, direct_decode: bool = True,
                      cluster_decode: bool = True, gate_up_tail: bool = True) -> "MoE":
        """A layer from ModelOpt NVFP4 tensors: w13 uint8 [E, 2I, H/2] (gate and up stacked in `gate_up_order`:
        "gate_first" as vLLM, "up_first" as FlashInfer / TensorRT-LLM), w13_scale float8_e4m3fn [E, 2I, H/16],
        w13_scale_2 fp32 [E] or [E, 2] (weight_scale_2, the dequantization multipliers), w2 uint8 [E, H, I/2],
        w2_scale [E, H, I/16], w2_scale_2 [E].

        Expert parallelism: ``expert_range=(first, last)`` are this rank's experts of ``num_global_experts``; the
        tensors hold either just those or all of them (then sliced). ``topk_ids`` stay global ids; pairs of other
        ranks' experts contribute nothing; the output is this rank's partial sum. Tensor parallelism: slice with
        :func:`fp4moe.shard_tp` first. The tensors are prepacked into the layer's own memory (they may be freed
        after). ``deterministic``: a fixed summation order (bit-identical reruns); else fp32 atomics.
        ``bf16_partials`` (deterministic only): each expert's output row is rounded to bf16 before the fixed-order
        fp32 sum, as vLLM's fused MoE keeps them: half the bytes of that phase, one more rounding per term.
        ``direct_decode``: steps of one or two tokens on a shard run two kernels with the finalize folded in, and a TP
        shard's steps of up to 32 pairs past those (4 tokens of GLM-5's TP8) run down with the finalize folded in after
        the tiled gate_up (the layer's plan decides where; ``False``: the tiled kernels at every step). ``cluster_decode`` (sm_90): a TP
        shard's steps just past those (I = 256: TP8 of the I = 2048 models, 3 and 5 tokens on an H200) run gate_up
        and down as one kernel of thread-block clusters, bit for bit the tiled kernels' sums (``False``: the tiled
        kernels). ``gate_up_tail`` (sm_90): a shard's steps of at most 64 tokens whose gate_up tiles fill one to
        three rounds of the GPU's blocks (16 to 64 tokens on GLM-5's TP8 and EP8 shards) run the last, partial
        round's tiles as K pieces in a second kernel (``False``: whole, a block each; the same results within the
        tolerance, each bit-identical run to run).
        """
        if bf16_partials and not deterministic:
            raise ValueError("bf16_partials applies to the deterministic finalize (deterministic=True)")
        if not torch.cuda.is_available():
            raise RuntimeError("fp4moe.MoE needs a CUDA device")
        dev = torch.device(device) if device is not None else (w13.device if w13.is_cuda else torch.device("cuda"))
        if dev.type != "cuda":
            raise ValueError(f"device must be a CUDA device, got {dev}")
        if dev.index is None:
            dev = torch.device("cuda", torch.cuda.current_device())
        for name, t, dtype in (("w13", w13, torch.uint8), ("w13_scale", w13_scale, torch.float8_e4m3fn),
                               ("w2", w2, torch.uint8), ("w2_scale", w2_scale, torch.float8_e4m3fn),
                               ("w13_scale_2", w13_scale_2, torch.float32), ("w2_scale_2", w2_scale_2, torch.float32)):
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
            if t.dtype != dtype:
                raise TypeError(f"{name} must be {dtype}, got {t.dtype}")
        E_t, H, I = check_modelopt_shapes({"w13": w13, "w13_scale": w13_scale, "w2": w2, "w2_scale": w2_scale})
        if w13_scale_2.dim() == 2:
            if tuple(w13_scale_2.shape) != (E_t, 2):
                raise ValueError(f"w13_scale_2 must be [E] or [E, 2], got {tuple(w13_scale_2.shape)}")
            if not torch.equal(w13_scale_2[:, 0], w13_scale_2[:, 1]):
                if w13_scale_2_mismatch != "use_first":
                    raise ValueError("w13_scale_2: gate's and up's global scales differ, but the layer applies one per "
                                     "expert; pass w13_scale_2_mismatch='use_first' to use gate's (as vLLM does) and "
                                     "accept the error on up")
                warnings.warn("fp4moe: w13_scale_2 of gate and up differ; using gate's for both", stacklevel=2)
            w13_scale_2 = w13_scale_2[:, 0]
        for name, t in (("w13_scale_2", w13_scale_2), ("w2_scale_2", w2_scale_2)):
            if tuple(t.shape) != (E_t,):
                raise ValueError(f"{name} must be [E] = [{E_t}], got {tuple(t.shape)}")
        G = num_global_experts if num_global_experts is not None else E_t
        first, last = expert_range if expert_range is not None else (0, G)
        if not (0 <= first < last <= G):
            raise ValueError(f"expert_range {expert_range} must satisfy 0 <= first < last <= num_global_experts = {G}")
        local = last - first
        if gate_up_order not in ("gate_first", "up_first"):
            raise ValueError(f"gate_up_order must be 'gate_first' or 'up_first', got {gate_up_order!r}")
        if not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValueError(f"max_tokens must be a positive int, got {max_tokens!r}")
        # The C ABI takes these as int64 / int32 (ctypes would wrap larger values silently): the layer's own checks
        # then see the value given or none at all.
        for name, v in (("top_k", top_k), ("max_tokens", max_tokens), ("num_global_experts", G), ("expert_range", first)):
            if isinstance(v, bool) or not isinstance(v, int) or not -2 ** 63 <= v < 2 ** 63:
                raise ValueError(f"{name} must be an int that fits in 64 bits, got {v!r}")
        if isinstance(kernel_arch, bool) or not isinstance(kernel_arch, int) or not 0 <= kernel_arch < 2 ** 31:
            raise ValueError(f"kernel_arch must be 0 (the device's) or an sm number such as 120, got {kernel_arch!r}")
        ts = [w13, w13_scale, w13_scale_2, w2, w2_scale, w2_scale_2]
        if E_t == G and local != G:
            ts = [t[first:last] for t in ts]
        elif E_t != local:
            raise ValueError(f"the tensors hold {E_t} experts: neither the {local} of expert_range nor all {G}")
        with torch.cuda.device(dev):
            # (float8 scales travel as their bytes: the C ABI reads UE4M3 bits)
            ts = [t.to(dev).contiguous() for t in ts]
            stream = _stream(dev)
            shape = (ctypes.c_int64 * 6)(local, H, I, top_k, G, first)
            mode = (2 if bf16_partials else 0) if deterministic else 1  # fp4moe::FinalizeMode
            opts = (ctypes.c_int32 * 11)(1 if gate_up_order == "up_first" else 0, 1, mode, 0, 1, 1, 1, kernel_arch,
                                         1 if direct_decode else 0, 1 if cluster_decode else 0,
                                         1 if gate_up_tail else 0)
            p13 = (ctypes.c_void_p * 3)(*(t.data_ptr() for t in ts[:3]))
            p2 = (ctypes.c_void_p * 3)(*(t.data_ptr() for t in ts[3:]))
            layer = ctypes.c_void_p()
            err = _capi.error_buffer()
            lib = _capi.lib()
            _capi.check(lib.fp4moe_layer_create(shape, opts, tuning_cache.encode(), p13, p2, stream,
                                                ctypes.byref(layer), err, len(err)), err, "fp4moe.MoE")
            try:
                size = ctypes.c_size_t()
                _capi.check(lib.fp4moe_layer_workspace_size(layer, max_tokens, ctypes.byref(size), err, len(err)), err,
                            "fp4moe.MoE workspace")
                workspace = torch.empty(max(int(size.value), 256), dtype=torch.uint8, device=dev)
            except Exception:
                lib.fp4moe_layer_destroy(layer)
                raise
        with _LOCK:
            handle = next(_NEXT)
            moe = cls(handle, layer, dev, (local, H, I, top_k, G, first), max_tokens, workspace)
            _LAYERS[handle] = moe
        return moe

    @classmethod
    def from_safetensors(cls, path: str, layer_prefix: str, *, top_k: int, names: Optional[Tuple[str, str, str]] = None,
                         gate_up_order: str = "gate_first", **kwargs: Any) -> "MoE":
        """A layer from a ModelOpt-layout safetensors shard: the experts under ``layer_prefix`` (e.g.
        "model.layers.3.mlp.experts"), named gate_proj/up_proj/down_proj or w1/w3/w2 (`names`). Other arguments as
        :meth:`from_modelopt`."""
        t = stack_layer(read_safetensors(path, framework="pt"), layer_prefix, names=names, gate_up_order=gate_up_order)
        return cls.from_modelopt(t["w13"], t["w13_scale"].view(torch.float8_e4m3fn), t["w13_scale_2"], t["w2"],
                                 t["w2_scale"].view(torch.float8_e4m3fn), t["w2_scale_2"], top_k=top_k,
                                 gate_up_order=gate_up_order, **kwargs)

    def __del__(self) -> None:
        layer = getattr(self, "_layer", None)
        if not layer:
            return
        self._layer = None
        # At interpreter shutdown the module's globals may already be None: then the process is ending and the
        # driver frees the device memory with it.
        try:
            with _LOCK:
                _LAYERS.pop(self._handle, None)
            _capi.lib().fp4moe_layer_destroy(layer)
        except (AttributeError, TypeError, ImportError):
            pass

    # ---- the forward ------------------------------------------------------------------------------------------
    def forward(self, hidden_states: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor,
                out: Optional[torch.Tensor] = None) -> torch.Tensor:
        """hidden_states bf16 [T, H], topk_ids int32 [T, k] (global expert ids), topk_weights fp32 [T, k] ->
        bf16 [T, H] (into `out` when given). Bad dtypes, devices, shapes, layouts and T > max_tokens raise before
        anything is written; ids outside [0, num_global_experts) and non-finite weights are skipped and reported by
        :meth:`check`."""
        if out is None:
            return torch.ops.fp4moe.moe(hidden_states, topk_ids, topk_weights, self._handle)
        torch.ops.fp4moe.moe_out(hidden_states, topk_ids, topk_weights, self._handle, out)
        return out

    def check(self) -> None:
        """Synchronises the current stream; ValueError if the last call saw bad topk ids or router weights."""
        err = _capi.error_buffer()
        with torch.cuda.device(self.device):
            _capi.check(_capi.lib().fp4moe_layer_check(self._layer, _ptr(self.workspace), _stream(self.device), err,
                                                       len(err)), err, "fp4moe.MoE.check")

    def plan(self, num_tokens: int) -> str:
        """The plan of a call of num_tokens tokens (configs, block size, splits, routing path), as one line."""
        buf = _capi.error_buffer()
        _capi.check(_capi.lib().fp4moe_layer_plan(self._layer, int(num_tokens), buf, len(buf)), buf, "fp4moe.MoE.plan")
        return buf.value.decode()

    def extra_repr(self) -> str:
        ep = f", experts {self.first_expert}..{self.first_expert + self.num_experts - 1} of {self.num_global_experts}" \
            if self.num_global_experts != self.num_experts else ""
        return (f"E={self.num_experts}, H={self.hidden_size}, I={self.intermediate_size}, top_k={self.top_k}{ep}, "
                f"max_tokens={self.max_tokens}, device={self.device}")


_TLS = threading.local()


def _err() -> ctypes.Array:
    """This thread's error buffer (one per thread, not one per call)."""
    buf = getattr(_TLS, "err", None)
    if buf is None:
        buf = _TLS.err = _capi.error_buffer()
    return buf


def _run(moe: "MoE", hidden: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor, out: torch.Tensor,
         checked_tokens: Optional[int] = None) -> None:
    """The C ABI call; the arguments are checked first unless the caller did (checked_tokens: their T)."""
    T = checked_tokens if checked_tokens is not None else _checks.check_forward(
        hidden, ids, weights, out, hidden_size=moe.hidden_size, top_k=moe.top_k, max_tokens=moe.max_tokens,
        device=moe.device)
    err = _err()
    lib = _capi.lib()
    args = (moe._layer, hidden.data_ptr(), T, ids.data_ptr(), weights.data_ptr(), out.data_ptr(),
            moe.workspace.data_ptr(), moe.workspace.numel())
    if torch.cuda.current_device() == moe.device.index:
        code = lib.fp4moe_layer_run(*args, torch.cuda.current_stream().cuda_stream, err, len(err))
    else:  # the library runs on the current device: switch for the call
        with torch.cuda.device(moe.device):
            code = lib.fp4moe_layer_run(*args, torch.cuda.current_stream().cuda_stream, err, len(err))
    _capi.check(code, err, "fp4moe.MoE")


def _layer(handle: int) -> "MoE":
    moe = _LAYERS.get(int(handle))
    if moe is None:
        raise ValueError(f"no fp4moe.MoE with handle {handle} (it was freed)")
    return moe


# The operators, defined with torch.library.Library rather than torch.library.custom_op: the same schema, fake
# kernels and torch.compile / CUDA-graph behaviour, at a fraction of custom_op's per-call Python cost
# (tools/bench/python_overhead.py on the H200 machine: 122 us of host time per call with custom_op, 37 us so;
# docs/perf/python.md). The kernels are registered for CPU too, so that a CPU tensor reaches the argument checks and gets
# their ValueError instead of the dispatcher's "no kernel for CPU".
_LIB = torch.library.Library("fp4moe", "DEF")
_LIB.define("moe(Tensor hidden, Tensor topk_ids, Tensor topk_weights, int handle) -> Tensor")
_LIB.define("moe_out(Tensor hidden, Tensor topk_ids, Tensor topk_weights, int handle, Tensor(a!) out) -> ()")


def _moe_op(hidden: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor, handle: int) -> torch.Tensor:
    moe = _layer(handle)
    # Checked once, before the output is allocated; the output is empty_like(hidden), so it passes what out= would.
    T = _checks.check_forward(hidden, topk_ids, topk_weights, None, hidden_size=moe.hidden_size, top_k=moe.top_k,
                              max_tokens=moe.max_tokens, device=moe.device)
    out = torch.empty_like(hidden)
    _run(moe, hidden, topk_ids, topk_weights, out, checked_tokens=T)
    return out


def _moe_out_op(hidden: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor, handle: int,
                out: torch.Tensor) -> None:
    _run(_layer(handle), hidden, topk_ids, topk_weights, out)


for _key in ("CUDA", "CPU"):
    _LIB.impl("moe", _moe_op, _key)
    _LIB.impl("moe_out", _moe_out_op, _key)


@torch.library.register_fake("fp4moe::moe", lib=_LIB)
def _(hidden: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor, handle: int) -> torch.Tensor:
    return torch.empty_like(hidden)


@torch.library.register_fake("fp4moe::moe_out", lib=_LIB)
def _(hidden: torch.Tensor, topk_ids: torch.Tensor, topk_weights: torch.Tensor, handle: int, out: torch.Tensor) -> None:
    return None


def quantize_nvfp4(x: torch.Tensor, check: bool = True) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """NVFP4 of a bf16 CUDA tensor [rows, K] (K a multiple of 16) with fp4moe's recipe, on the current stream:
    (packed uint8 [rows, K/2], scales float8_e4m3fn [rows, K/16], global_scale fp32 []) in the ModelOpt layout,
    global_scale being weight_scale_2 (x ~= e2m1 * scale * global_scale). With ``check`` (the default) it synchronises
    the stream and raises ValueError where x holds Inf or NaN (NVFP4 cannot represent them); ``check=False`` does not
    synchronise, and the outputs of such an x are undefined. An x of no rows gives empty codes and a global_scale of 1."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype != torch.bfloat16:
        raise TypeError(f"x must be bfloat16, got {x.dtype}")
    if not x.is_cuda:
        raise ValueError(f"x must be on a CUDA device, got {x.device}")
    if x.dim() != 2 or x.shape[1] % 16 or x.shape[1] == 0:
        raise ValueError(f"x must be [rows, K] with K a positive multiple of 16, got {tuple(x.shape)}")
    x = x.contiguous()
    rows, k = x.shape
    if rows == 0:  # (no kernel runs, so nothing would write the global scale)
        return (torch.empty(0, k // 2, dtype=torch.uint8, device=x.device),
                torch.empty(0, k // 16, dtype=torch.uint8, device=x.device).view(torch.float8_e4m3fn),
                torch.ones((), dtype=torch.float32, device=x.device))
    packed = torch.empty(rows, k // 2, dtype=torch.uint8, device=x.device)
    scales = torch.empty(rows, k // 16, dtype=torch.uint8, device=x.device)
    gs = torch.empty((), dtype=torch.float32, device=x.device)
    lib = _capi.lib()
    ws = torch.empty(max(int(lib.fp4moe_quantize_workspace_size()), 16), dtype=torch.uint8, device=x.device)
    err = _capi.error_buffer()
    with torch.cuda.device(x.device):
        _capi.check(lib.fp4moe_quantize(_ptr(x), rows, k, _ptr(packed), _ptr(scales), _ptr(gs), _ptr(ws), ws.numel(),
                                        _stream(x.device), err, len(err)), err, "fp4moe.quantize_nvfp4")
        if check:
            _capi.check(lib.fp4moe_quantize_check(_ptr(ws), _stream(x.device), err, len(err)), err,
                        "fp4moe.quantize_nvfp4")
    return packed, scales.view(torch.float8_e4m3fn), 1.0 / gs
