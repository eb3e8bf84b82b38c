# Where the host time of one eager fp4moe call from PyTorch goes: the C ABI alone, the argument checks, the custom op.
# SPDX-License-Identifier: Apache-2.0
"""python tools/bench/python_overhead.py

Host microseconds per call (time.perf_counter over 2000 calls after warm-up, GPU work kept tiny: the GLM-5 TP8 shard
at T=1, the stream drained between rounds) of each layer of the Python call path, from the bottom up, next to an
empty torch op (torch.empty_like) for the machine's dispatch cost. The GPU time of the call is what fp4moe bench
measures; these numbers say how much a serving stack pays on the host when it does not replay a CUDA graph.
"""
import ctypes
import statistics
import time

import torch

import fp4moe
from fp4moe import _capi, _checks, _torch


def per_call_us(fn, n=2000, rounds=5):
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        out.append((time.perf_counter() - t0) / n * 1e6)
        torch.cuda.synchronize()
    return statistics.median(out)


def main():
    dev = torch.device("cuda", 0)
    torch.manual_seed(0)
    E, H, I, k = 256, 6144, 256, 8
    t = dict(w13=torch.randint(0, 256, (E, 2 * I, H // 2), dtype=torch.uint8, device=dev),
             w13_scale=torch.full((E, 2 * I, H // 16), 1.0, device=dev).to(torch.float8_e4m3fn),
             w13_scale_2=torch.full((E,), 1e-3, device=dev),
             w2=torch.randint(0, 256, (E, H, I // 2), dtype=torch.uint8, device=dev),
             w2_scale=torch.full((E, H, I // 16), 1.0, device=dev).to(torch.float8_e4m3fn),
             w2_scale_2=torch.full((E,), 1e-3, device=dev))
    moe = fp4moe.MoE.from_modelopt(**t, top_k=k, tuning_cache="none", max_tokens=16)
    x = torch.randn(1, H, device=dev).to(torch.bfloat16)
    ids = torch.randperm(E, device=dev)[:k].to(torch.int32).reshape(1, k)
    w = torch.full((1, k), 1.0 / k, device=dev)
    out = torch.empty_like(x)
    lib = _capi.lib()
    err = _capi.error_buffer()
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    args = [ctypes.c_void_p(a.data_ptr()) for a in (x, ids, w, out, moe.workspace)]

    def capi():
        lib.fp4moe_layer_run(moe._layer, args[0], 1, args[1], args[2], args[3], args[4], moe.workspace.numel(),
                             stream, err, len(err))

    rows = [
        ("torch.empty_like (dispatch cost of a trivial op)", lambda: torch.empty_like(x)),
        ("C ABI fp4moe_layer_run (ctypes, pointers ready)", capi),
        ("argument checks (_checks.check_forward)", lambda: _checks.check_forward(
            x, ids, w, out, hidden_size=H, top_k=k, max_tokens=16, device=dev)),
        ("_run: checks + pointers + stream + C ABI", lambda: _torch._run(moe, x, ids, w, out)),
        ("torch.ops.fp4moe.moe_out (custom op)", lambda: torch.ops.fp4moe.moe_out(x, ids, w, moe._handle, out)),
        ("moe(x, ids, w, out=out) (module)", lambda: moe(x, ids, w, out=out)),
        ("moe(x, ids, w) (allocates the output)", lambda: moe(x, ids, w)),
    ]
    print(f"{fp4moe.build_info()}; torch {torch.__version__}; {torch.cuda.get_device_name()}")
    print(f"{'host us per call':>17}  path")
    for name, fn in rows:
        print(f"{per_call_us(fn):>17.1f}  {name}")


if __name__ == "__main__":
    main()
