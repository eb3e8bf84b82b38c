# A model's MoE block written as a user would (router, top-k, fp4moe), on a GLM-5 shard with random weights, timed
# next to a bf16 PyTorch implementation of the same block.
# SPDX-License-Identifier: Apache-2.0
"""python examples/moe_block.py [--shard tp8|ep8|full] [--tokens 1 8 64 512 2048]

The weights are random bf16, quantized to NVFP4 with fp4moe.quantize_nvfp4 (the ModelOpt layout a checkpoint
would hold); the bf16 block uses the same weights before quantization. Each time is the median per call of CUDA
events over 16 different inputs in turn (so that the routed experts' weights are not the same call after call),
eager and replayed from a CUDA graph. The error columns compare each block with an fp64 evaluation of the bf16
block: fp4moe's is NVFP4's quantization error, not a bug.
"""
import argparse
import statistics

import torch

import fp4moe

SHARDS = {  # GLM-5: E 256, H 6144, I 2048, top-8
    "tp8": dict(E=256, H=6144, I=256, first=0, G=256),   # one of 8 tensor-parallel ranks
    "ep8": dict(E=32, H=6144, I=2048, first=0, G=256),   # one of 8 expert-parallel ranks: experts 0..31 of 256
    "full": dict(E=256, H=6144, I=2048, first=0, G=256),
}


class Router(torch.nn.Module):
    """softmax over the router logits, top-k, renormalised (the usual MoE gate)."""

    def __init__(self, hidden, experts, k):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(experts, hidden) / hidden ** 0.5, requires_grad=False)
        self.k = k

    def forward(self, x):
        probs = torch.softmax((x @ self.weight.T).float(), dim=-1)
        w, ids = probs.topk(self.k, dim=-1)
        return ids.to(torch.int32), w / w.sum(-1, keepdim=True)


class Bf16Experts(torch.nn.Module):
    """The same experts in bf16: the (token, slot) pairs sorted by expert into a batch padded to `cap` tokens per
    expert, two torch.bmm, SwiGLU, a weighted scatter back. Only local experts [first, first + E) count (an EP
    rank's partial sum). No host synchronisation (CUDA-graph capturable): `cap` is given, at least the busiest
    expert's token count."""

    def __init__(self, w13, w2, first):
        super().__init__()
        self.w13, self.w2, self.first = w13, w2, first  # [E, 2I, H], [E, H, I]

    def forward(self, x, ids, weights, cap):
        E, two_i, H = self.w13.shape
        T, k = ids.shape
        local = ids.long().flatten() - self.first
        e = torch.where((local >= 0) & (local < E), local, E)  # other ranks' experts into bucket E, dropped below
        e, order = torch.sort(e, stable=True)
        tok = order // k
        counts = torch.zeros(E + 1, dtype=torch.long, device=x.device).scatter_add_(0, e, torch.ones_like(e))
        pos = torch.arange(e.numel(), device=x.device) - (torch.cumsum(counts, 0) - counts)[e]
        keep = e < E
        pos = torch.where(keep, pos, 0)
        batch = x.new_zeros(E + 1, cap, H)
        batch[e, pos] = x[tok]
        gu = torch.bmm(batch[:E], self.w13.transpose(1, 2))
        act = torch.nn.functional.silu(gu[..., :two_i // 2]) * gu[..., two_i // 2:]
        y = torch.bmm(act, self.w2.transpose(1, 2))
        y = torch.cat([y, y.new_zeros(1, cap, H)])[e, pos]
        rw = torch.where(keep, weights.flatten()[order], 0).to(x.dtype)
        return torch.zeros_like(x).index_add_(0, tok, y * rw[:, None])


def quantize_experts(w):
    """bf16 [E, N, K] -> ModelOpt tensors: packed [E, N, K/2], scales [E, N, K/16], multipliers [E]."""
    q = [fp4moe.quantize_nvfp4(w[e]) for e in range(w.shape[0])]
    return torch.stack([a for a, _, _ in q]), torch.stack([s for _, s, _ in q]), torch.stack([g for _, _, g in q]).float()


def time_per_call(fn, inputs, graph):
    """Median over 30 rounds of (one pass over all inputs) / len(inputs), in us."""
    if graph:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for x in inputs:
                fn(x)
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for x in inputs:
                fn(x)
        run = g.replay
    else:
        def run():
            for x in inputs:
                fn(x)
    for _ in range(3):
        run()
    times = []
    for _ in range(30):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        run()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1000 / len(inputs))
    return statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shard", choices=sorted(SHARDS), default="tp8")
    p.add_argument("--tokens", type=int, nargs="+", default=[1, 8, 64, 512, 2048])
    p.add_argument("--no-graph", action="store_true", help="skip the CUDA-graph timings")
    a = p.parse_args()
    s = SHARDS[a.shard]
    E, H, I, G, k = s["E"], s["H"], s["I"], s["G"], 8
    torch.manual_seed(0)
    dev = torch.device("cuda")
    torch.set_default_device(dev)
    w13 = (torch.randn(E, 2 * I, H) / H ** 0.5).to(torch.bfloat16)  # [gate; up] per expert (vLLM's order)
    w2 = (torch.randn(E, H, I) / I ** 0.5).to(torch.bfloat16)
    router = Router(H, G, k).to(torch.bfloat16)
    q13, q2 = quantize_experts(w13), quantize_experts(w2)
    moe = fp4moe.MoE.from_modelopt(*q13, *q2, top_k=k, gate_up_order="gate_first",
                                   expert_range=(s["first"], s["first"] + E), num_global_experts=G,
                                   max_tokens=max(a.tokens))
    bf16 = Bf16Experts(w13, w2, s["first"])
    print(f"GLM-5 {a.shard} shard: {moe}")
    print(f"{fp4moe.build_info()}; torch {torch.__version__}; {torch.cuda.get_device_name()}")
    print(f"{'T':>6} {'fp4moe us':>10} {'graph us':>9} {'bf16 us':>9} {'graph us':>9} {'x (graph)':>9}"
          f" {'fp4moe err':>10} {'bf16 err':>9}  plan")
    for T in a.tokens:
        inputs = [torch.randn(T, H).to(torch.bfloat16) for _ in range(16)]

        def fp4(x):
            ids, w = router(x)
            return moe(x, ids, w)

        cap = 1  # the busiest local expert over the inputs (counted here, so that the timed block never syncs)
        for x in inputs:
            local = router(x)[0].long().flatten() - s["first"]
            local = local[(local >= 0) & (local < E)]
            cap = max(cap, int(torch.bincount(local).max()) if local.numel() else 1)

        def ref(x):
            ids, w = router(x)
            return bf16(x, ids, w, cap)

        x = inputs[0]
        ids, w = router(x)
        exact = Bf16Experts(w13.double(), w2.double(), s["first"])(x.double(), ids, w.double(), cap)
        scale = exact.abs().mean().item() + 1e-30
        e4 = (fp4(x).double() - exact).abs().mean().item() / scale
        e16 = (ref(x).double() - exact).abs().mean().item() / scale
        t4, t16 = time_per_call(fp4, inputs, False), time_per_call(ref, inputs, False)
        g4 = g16 = float("nan")
        if not a.no_graph:
            g4 = time_per_call(fp4, inputs, True)
            g16 = time_per_call(ref, inputs, True)
        speedup = g16 / g4 if not a.no_graph else t16 / t4
        print(f"{T:>6} {t4:>10.1f} {g4:>9.1f} {t16:>9.1f} {g16:>9.1f} {speedup:>8.2f}x {e4:>10.2%} {e16:>9.2%}  "
              f"{moe.plan(T)}")


if __name__ == "__main__":
    main()
