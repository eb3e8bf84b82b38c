# GPU tests of the fp4moe Python package: the PyTorch op against an fp64 reference (the GLM-5 layer's TP8 and EP8
# shards among them), CUDA-graph replay, torch.compile(fullgraph=True), determinism, streams, bad input, quantization.
# SPDX-License-Identifier: Apache-2.0
"""Every check draws fresh random weights and inputs, poisons the output with NaN first, and compares every element
with an exact reference: NVFP4 decoded in fp64, fp64 accumulation, and an element-wise tolerance built from the
kernels' fp32 accumulation over K and their two bf16 roundings (the SwiGLU output, the layer output)."""
import os

import pytest

torch = pytest.importorskip("torch", reason="the GPU tests need torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU: the GPU tests of the Python package skip (scripts/gpu-suite runs them on the H200)",
                allow_module_level=True)

import fp4moe  # noqa: E402

DEV = torch.device("cuda", 0)
GLM5 = dict(E=256, H=6144, I=2048, k=8)
E2M1 = torch.tensor([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6], dtype=torch.float64, device=DEV)
_SEED = [int.from_bytes(os.urandom(4), "little")]


def gen():
    """A fresh generator per check, its seed drawn from os.urandom (assert_close names it, to rerun a failure)."""
    _SEED[0] += 1
    return torch.Generator(device=DEV).manual_seed(_SEED[0])


def random_layer(E, H, I, g):
    """ModelOpt-layout tensors of E experts: every FP4 code (both zeros too), E4M3 scales in [0.5, 2), dequantization
    multipliers that keep gate, up and the output of order one."""
    def scales(n, k):
        return torch.randint(0x30, 0x40, (E, n, k // 16), dtype=torch.uint8, device=DEV, generator=g).view(
            torch.float8_e4m3fn)

    def multipliers(k):
        return (torch.rand(E, device=DEV, generator=g) + 0.5) / (2.7 * k ** 0.5)

    return dict(w13=torch.randint(0, 256, (E, 2 * I, H // 2), dtype=torch.uint8, device=DEV, generator=g),
                w13_scale=scales(2 * I, H), w13_scale_2=multipliers(H),
                w2=torch.randint(0, 256, (E, H, I // 2), dtype=torch.uint8, device=DEV, generator=g),
                w2_scale=scales(H, I), w2_scale_2=multipliers(I) * 4)


def random_inputs(T, H, k, num_global, g, ids_from=None):
    hidden = torch.randn(T, H, device=DEV, generator=g).to(torch.bfloat16)
    pool = num_global if ids_from is None else ids_from
    ids = torch.rand(T, pool, device=DEV, generator=g).topk(k, dim=1).indices.to(torch.int32)
    weights = torch.rand(T, k, device=DEV, generator=g) + 0.05
    return hidden, ids, (weights / weights.sum(1, keepdim=True)).contiguous()


def decode(packed, scales, mult):
    """[N, K/2] uint8 (element 2j in the low nibble), [N, K/16] E4M3, scalar -> fp64 [N, K]."""
    n = packed.shape[0]
    v = torch.stack([E2M1[(packed & 15).long()], E2M1[(packed >> 4).long()]], dim=-1).reshape(n, -1)
    return v * scales.to(torch.float64).repeat_interleave(16, dim=1) * float(mult)


def reference(t, hidden, ids, weights, first=0, gate_first=True, bf16_partials=False):
    """The layer's output [T, H] in fp64 and its element-wise tolerance. t holds the local experts first..first+E-1;
    other ids (other ranks' experts) contribute nothing. bf16_partials: each term is rounded to bf16 once more
    (whole terms: right while the layer does not split the down GEMM's K, as at T > 64 tokens; a split call rounds
    each K range's partial, which reference/moe_reference.cc's bound covers)."""
    T, H = hidden.shape
    E, two_i = t["w13"].shape[:2]
    I = two_i // 2
    K = ids.shape[1]
    x = hidden.to(torch.float64)
    out = torch.zeros(T, H, dtype=torch.float64, device=DEV)
    bound = torch.zeros_like(out)  # sum over pairs and j of |rw w2| (|act| eps_down + act_tol)
    eps_up, eps_down = H * 2.0 ** -23, (I + K) * 2.0 ** -23
    local = ids.long() - first
    for e in torch.unique(local[(local >= 0) & (local < E)]).tolist():
        tok, slot = torch.nonzero(local == e, as_tuple=True)
        w13 = decode(t["w13"][e], t["w13_scale"][e], t["w13_scale_2"][e])
        xe = x[tok]
        v, a = xe @ w13.T, xe.abs() @ w13.abs().T
        g_rows, u_rows = (slice(0, I), slice(I, 2 * I)) if gate_first else (slice(I, 2 * I), slice(0, I))
        gate, up, ga, ua = v[:, g_rows], v[:, u_rows], a[:, g_rows], a[:, u_rows]
        silu = gate * torch.sigmoid(gate)
        act = silu * up
        # the SwiGLU output: fp32 accumulation over H (|d silu / d gate| <= 1.1), then rounded to bf16
        act_tol = act.abs() * (2.0 ** -8 + 2.0 ** -20) + 1.01 * eps_up * (1.1 * up.abs() * ga + silu.abs() * ua)
        w2 = decode(t["w2"][e], t["w2_scale"][e], t["w2_scale_2"][e])
        rw = weights[tok, slot].to(torch.float64)[:, None]
        term = rw * (act @ w2.T)
        out.index_add_(0, tok, term)
        if bf16_partials:
            bound.index_add_(0, tok, term.abs() * (2.0 ** -8 * 1.01))
        bound.index_add_(0, tok, rw.abs() * ((act.abs() * eps_down * 1.01 + act_tol) @ w2.abs().T))
    return out, out.abs() * 2.0 ** -8 + bound + 1e-30


def assert_close(got, want, tol, what):
    assert got.dtype == torch.bfloat16 and got.shape == want.shape
    g = got.to(torch.float64)
    assert torch.isfinite(g).all(), f"{what}: {int((~torch.isfinite(g)).sum())} elements not written (NaN poison)"
    err = (g - want).abs()
    bad = err > tol
    if bad.any():
        i = int(torch.nonzero(bad.flatten())[0])
        raise AssertionError(f"{what} (seed {_SEED[0]}): {int(bad.sum())} of {bad.numel()} elements off; first at {divmod(i, got.shape[1])}:"
                             f" got {g.flatten()[i].item()}, want {want.flatten()[i].item()} +- {tol.flatten()[i].item()}")


def make(t, k, **kw):
    return fp4moe.MoE.from_modelopt(t["w13"], t["w13_scale"], t["w13_scale_2"], t["w2"], t["w2_scale"],
                                    t["w2_scale_2"], top_k=k, device=DEV, tuning_cache="none", **kw)


def with_nan_allocation(like, call):
    """call() right after a NaN block the size of `like` is freed on the current stream: the caching allocator hands
    that block to the next allocation of the size, the allocating op's output (torch.empty_like), so an element the op
    leaves unwritten stays NaN and fails the caller's comparison with the reference."""
    poison = torch.full_like(like, float("nan"))
    ptr = poison.data_ptr()
    del poison
    out = call()
    assert out.data_ptr() == ptr, "the output did not reuse the NaN block: this check would prove nothing"
    return out


def run_checked(moe, hidden, ids, weights):
    out = torch.full_like(hidden, float("nan"))
    moe(hidden, ids, weights, out=out)
    return out


# ---- correctness against the reference ---------------------------------------------------------------------------

@pytest.mark.parametrize("T", [1, 4, 16, 64, 300])
def test_glm5_tp8_shard(T):
    """GLM-5 under TP8: one rank's slice, E=256, H=6144, I=2048/8=256 (the small-K tile of the down GEMM)."""
    g = gen()
    full_i = GLM5["I"] // 8
    t = random_layer(GLM5["E"], GLM5["H"], full_i, g)
    moe = make(t, GLM5["k"], max_tokens=512)
    hidden, ids, w = random_inputs(T, GLM5["H"], GLM5["k"], GLM5["E"], g)
    want, tol = reference(t, hidden, ids, w)
    assert_close(run_checked(moe, hidden, ids, w), want, tol, f"TP8 shard T={T} ({moe.plan(T)})")
    moe.check()


def tp8_step_with_and_without(T, option, plan_text):
    """A GLM-5 TP8 step of T tokens on a layer with `option` on (the default: its plan says `plan_text`) and one with
    it off (its plan does not); both against the reference. Returns the two outputs."""
    g = gen()
    t = random_layer(GLM5["E"], GLM5["H"], GLM5["I"] // 8, g)
    hidden, ids, w = random_inputs(T, GLM5["H"], GLM5["k"], GLM5["E"], g)
    want, tol = reference(t, hidden, ids, w)
    on = make(t, GLM5["k"], max_tokens=max(8, T))
    off = make(t, GLM5["k"], max_tokens=max(8, T), **{option: False})
    assert plan_text in on.plan(T), on.plan(T)
    assert plan_text not in off.plan(T), off.plan(T)
    outs = [run_checked(moe, hidden, ids, w) for moe in (on, off)]
    for moe, out in zip((on, off), outs):
        assert_close(out, want, tol, moe.plan(T))
    return outs


def test_gate_up_tail_is_the_default_for_a_tp8_step_of_64_tokens_and_can_be_turned_off():
    """A GLM-5 TP8 step of 64 tokens runs gate_up's last, partial round of tiles as K pieces in a second kernel by
    default (sm_90), those tiles whole with gate_up_tail=False; both match the reference."""
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("planned on sm_90 only")
    tp8_step_with_and_without(64, "gate_up_tail", "in a second kernel")


def test_direct_decode_is_the_default_for_a_shard_step_and_can_be_turned_off():
    """A TP8 step of one token runs the direct decode path by default, the tiled kernels with direct_decode=False;
    both match the reference."""
    tp8_step_with_and_without(1, "direct_decode", "direct decode")


def test_down_with_the_finalize_is_the_default_for_a_tp8_step_of_four_tokens_and_can_be_turned_off():
    """A GLM-5 TP8 step of 4 tokens runs down and the finalize as one kernel after the tiled gate_up by default (on a GPU
    where its 384 blocks are resident at once, as on an H200), the tiled down kernel and finalize with
    direct_decode=False: bit for bit the same output (the same gate_up, down's K unsplit in both), both against the
    reference."""
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("planned on sm_90 only")
    if 3 * torch.cuda.get_device_properties(0).multi_processor_count < GLM5["H"] // 16:
        pytest.skip("planned where its 384 blocks are resident at once (3 an SM: 128 SMs or more)")
    on, off = tp8_step_with_and_without(4, "direct_decode", "down and the finalize in one kernel")
    assert torch.equal(on, off)


def test_cluster_decode_is_the_default_for_a_tp8_step_of_three_tokens_and_can_be_turned_off():
    """A GLM-5 TP8 step of 3 tokens runs the cluster decode kernel by default (on an H200), the tiled kernels with
    cluster_decode=False; both match the reference. (Not bit for bit: the tiled plan splits gate_up's K in 8 there, the
    cluster kernel in 2; the C++ test compares it with the tiled kernels forced to 2.)"""
    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("the cluster decode kernel is planned on sm_90 only")
    tp8_step_with_and_without(3, "cluster_decode", "gate_up and down in one kernel")


@pytest.mark.parametrize("T", [1, 8, 128])
def test_glm5_ep8_shard(T):
    """GLM-5 under EP8: rank 5 holds experts 160..191 of 256 (full H and I); topk ids stay global."""
    g = gen()
    t = random_layer(32, GLM5["H"], GLM5["I"], g)
    moe = make(t, GLM5["k"], expert_range=(160, 192), num_global_experts=256, max_tokens=256)
    assert moe.num_experts == 32 and moe.first_expert == 160
    hidden, ids, w = random_inputs(T, GLM5["H"], GLM5["k"], 256, g)
    ids[0, 0] = 170  # at least one local pair
    want, tol = reference(t, hidden, ids, w, first=160)
    assert want.abs().max() > 0
    assert_close(run_checked(moe, hidden, ids, w), want, tol, f"EP8 shard T={T}")


def test_ep_ranks_sum_to_the_whole_layer_and_tp_slices_too():
    """Four EP ranks' partial outputs add up to the unsharded layer; so do four TP slices (fp4moe.shard_tp)."""
    g = gen()
    E, H, I, k, T = 16, 1024, 512, 4, 24
    t = random_layer(E, H, I, g)
    hidden, ids, w = random_inputs(T, H, k, E, g)
    want, tol = reference(t, hidden, ids, w)
    whole = run_checked(make(t, k), hidden, ids, w)
    assert_close(whole, want, tol, "unsharded")
    ep = sum(run_checked(make(t, k, expert_range=(r * 4, r * 4 + 4), num_global_experts=E), hidden, ids, w).double()
             for r in range(4))
    tp = 0
    for r in range(4):
        a, sa, b, sb = fp4moe.shard_tp(t["w13"], t["w13_scale"], t["w2"], t["w2_scale"], 4, r)
        part = dict(t, w13=a, w13_scale=sa, w2=b, w2_scale=sb)
        tp = tp + run_checked(make(part, k), hidden, ids, w).double()
    # Each partial is within its own tolerance and rounded to bf16 (2^-9 of |partial|, which the bound term already
    # covers twice over): the partials' errors add to at most twice the whole layer's tolerance, plus the final
    # rounding of the fp64 sum to bf16.
    assert_close(ep.to(torch.bfloat16), want, tol * 2 + want.abs() * 2.0 ** -8, "sum of 4 EP ranks")
    assert_close(tp.to(torch.bfloat16), want, tol * 2 + want.abs() * 2.0 ** -8, "sum of 4 TP slices")


def test_up_first_order_and_the_check_can_fail():
    """gate_up_order="up_first" (FlashInfer / TensorRT-LLM) matches its reference, and not the gate-first one: the
    comparison is sharp enough to see the halves swapped."""
    g = gen()
    t = random_layer(8, 512, 256, g)
    hidden, ids, w = random_inputs(32, 512, 2, 8, g)
    got = run_checked(make(t, 2, gate_up_order="up_first"), hidden, ids, w)
    want, tol = reference(t, hidden, ids, w, gate_first=False)
    assert_close(got, want, tol, "up_first")
    wrong, wtol = reference(t, hidden, ids, w, gate_first=True)
    with pytest.raises(AssertionError, match="elements off"):
        assert_close(got, wrong, wtol, "up_first against gate_first's reference")


def test_bad_ids_and_weights_are_skipped_and_reported():
    g = gen()
    t = random_layer(8, 512, 128, g)
    moe = make(t, 2)
    hidden, ids, w = random_inputs(6, 512, 2, 8, g)
    ids[1, 0], ids[3, 1] = 8, -1
    w[4, 0] = float("nan")
    got = run_checked(moe, hidden, ids, w)
    keep = ids.clone()
    keep[4, 0] = -1  # the reference skips out-of-range ids; the non-finite weight's pair is skipped too
    want, tol = reference(t, hidden, keep, torch.nan_to_num(w))
    assert_close(got, want, tol, "bad pairs skipped")
    with pytest.raises(ValueError, match="topk"):
        moe.check()


# ---- serving-stack use: graphs, compile, streams, determinism ----------------------------------------------------

def test_cuda_graph_replay_matches_eager_bit_for_bit():
    g = gen()
    t = random_layer(64, 2048, 256, g)
    moe = make(t, 8, max_tokens=64)
    T = 16
    hidden, ids, w = random_inputs(T, 2048, 8, 64, g)
    out = torch.full_like(hidden, float("nan"))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the capture stream, as torch.cuda.graph asks
        moe(hidden, ids, w, out=out)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        moe(hidden, ids, w, out=out)
    for _ in range(3):  # new inputs into the captured buffers, replay, compare with an eager call
        h2, i2, w2 = random_inputs(T, 2048, 8, 64, g)
        hidden.copy_(h2), ids.copy_(i2), w.copy_(w2)
        out.fill_(float("nan"))
        graph.replay()
        eager = run_checked(moe, hidden, ids, w)
        assert torch.equal(out, eager), "graph replay differs from the eager call"
        want, tol = reference(t, hidden, ids, w)
        assert_close(out, want, tol, "graph replay")


def test_torch_compile_fullgraph_moe_block():
    """A router + top-k + fp4moe block compiles with fullgraph=True (no graph break at the op) and matches eager."""
    g = gen()
    E, H, I, k, T = 32, 1024, 256, 4, 40
    t = random_layer(E, H, I, g)
    moe = make(t, k, max_tokens=64)
    router = (torch.randn(E, H, device=DEV, generator=g) / H ** 0.5).to(torch.bfloat16)

    def block(x, out=None):
        logits = (x @ router.T).float()
        vals, ids = logits.topk(k, dim=-1)
        weights = torch.softmax(vals, dim=-1)
        return moe(x, ids.to(torch.int32), weights, out=out)

    x = torch.randn(T, H, device=DEV, generator=g).to(torch.bfloat16)
    # Into NaN outputs (the op with out=, eager and compiled), so that an element left unwritten fails the comparison;
    # and the allocating op compiled.
    eager = block(x, torch.full_like(x, float("nan")))
    compiled = torch.compile(block, fullgraph=True)
    got = compiled(x, torch.full_like(x, float("nan")))
    got_alloc = compiled(x)
    logits = (x @ router.T).float()
    vals, ids = logits.topk(k, dim=-1)
    want, tol = reference(t, x, ids.to(torch.int32), torch.softmax(vals, dim=-1))
    assert_close(got, want, tol, "compiled block")
    assert_close(got_alloc, want, tol, "compiled block, allocating")
    assert_close(eager, want, tol, "eager block")


def test_deterministic_reruns_are_bit_identical_and_atomic_is_close():
    g = gen()
    t = random_layer(32, 2048, 512, g)
    hidden, ids, w = random_inputs(96, 2048, 8, 32, g)
    det = make(t, 8)
    a, b = run_checked(det, hidden, ids, w), run_checked(det, hidden, ids, w)
    assert torch.equal(a, b)
    want, tol = reference(t, hidden, ids, w)
    assert_close(run_checked(make(t, 8, deterministic=False), hidden, ids, w), want, tol, "atomic finalize")


def test_bf16_partials_match_the_reference_and_rerun_bit_identically():
    g = gen()
    t = random_layer(32, 2048, 512, g)
    hidden, ids, w = random_inputs(96, 2048, 8, 32, g)
    moe = make(t, 8, bf16_partials=True)
    a, b = run_checked(moe, hidden, ids, w), run_checked(moe, hidden, ids, w)
    assert torch.equal(a, b)
    want, tol = reference(t, hidden, ids, w, bf16_partials=True)
    assert_close(a, want, tol, "bf16 partials")
    assert not torch.equal(a, run_checked(make(t, 8), hidden, ids, w)), "bf16 partials rounded nothing"
    with pytest.raises(ValueError, match="deterministic"):
        make(t, 8, bf16_partials=True, deterministic=False)


def test_runs_on_the_current_stream_and_t_zero():
    g = gen()
    t = random_layer(8, 512, 128, g)
    moe = make(t, 2)
    hidden, ids, w = random_inputs(20, 512, 2, 8, g)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        out = with_nan_allocation(hidden, lambda: moe(hidden, ids, w))
    s.synchronize()
    want, tol = reference(t, hidden, ids, w)
    assert_close(out, want, tol, "side stream")
    empty = moe(hidden[:0], ids[:0], w[:0])
    assert empty.shape == (0, 512)


def test_sm120_configs_on_the_h200():
    """kernel_arch=120: the sm_120 configs (the 101,376 B budget) run on the H200 in a build with
    FP4MOE_SM120_ON_SM90 (scripts/gpu-build's), for the GLM-5 TP8 shard."""
    g = gen()
    t = random_layer(GLM5["E"], GLM5["H"], GLM5["I"] // 8, g)
    try:
        moe = make(t, 8, kernel_arch=120, max_tokens=256)
    except ValueError as e:
        if "FP4MOE_SM120_ON_SM90" in str(e):
            pytest.skip("this build has no sm_120 kernels for sm_90 (FP4MOE_SM120_ON_SM90 off): " + str(e)[:80])
        raise
    for T in (2, 200):
        hidden, ids, w = random_inputs(T, GLM5["H"], 8, GLM5["E"], g)
        want, tol = reference(t, hidden, ids, w)
        assert_close(run_checked(moe, hidden, ids, w), want, tol, f"sm_120 configs T={T} ({moe.plan(T)})")


# ---- bad input: an exception, nothing written ---------------------------------------------------------------------

def test_bad_input_raises_and_leaves_out_untouched():
    g = gen()
    t = random_layer(8, 512, 128, g)
    moe = make(t, 2, max_tokens=16)
    hidden, ids, w = random_inputs(4, 512, 2, 8, g)
    out = torch.full_like(hidden, 7.0)
    cases = [
        (dict(hidden=hidden.half()), TypeError, "bfloat16"),
        (dict(ids=ids.long()), TypeError, "int32"),
        (dict(weights=w.double()), TypeError, "float32"),
        (dict(hidden=hidden.cpu()), ValueError, "cpu"),
        (dict(hidden=hidden[:, :256]), ValueError, "shape"),
        (dict(ids=ids[:, :1]), ValueError, "shape"),
        (dict(weights=torch.rand(2, 4, device=DEV).T), ValueError, "contiguous"),
    ]
    for over, exc, match in cases:
        a = dict(hidden=hidden, ids=ids, weights=w)
        a.update(over)
        with pytest.raises(exc, match=match):
            moe(a["hidden"], a["ids"], a["weights"], out=out)
        with pytest.raises(exc, match=match):
            moe(a["hidden"], a["ids"], a["weights"])
    with pytest.raises(ValueError, match="max_tokens=16"):
        moe(*random_inputs(17, 512, 2, 8, g))
    with pytest.raises(ValueError, match="out must have shape"):
        moe(hidden, ids, w, out=out[:3])
    with pytest.raises(ValueError, match="alias"):
        moe(hidden, ids, w, out=hidden)
    torch.cuda.synchronize()
    assert bool((out == 7.0).all()), "a rejected call wrote to out"


def test_a_dropped_layer_frees_its_memory_and_its_handle_raises():
    import gc
    g = gen()
    t = random_layer(64, 2048, 512, g)
    torch.cuda.synchronize()
    gc.collect()
    torch.cuda.empty_cache()
    before = torch.cuda.mem_get_info()[0]
    moe = make(t, 4, max_tokens=16)
    handle = moe.handle
    hidden, ids, w = random_inputs(4, 2048, 4, 64, g)
    assert torch.isfinite(moe(hidden, ids, w).float()).all()
    del moe
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    # The prepacked weights (64 x 3 x 512 x 2048 x 0.5625 B = 113 MB, the library's own allocation) are back.
    assert torch.cuda.mem_get_info()[0] >= before - 16 * 2 ** 20
    with pytest.raises(ValueError, match="freed"):
        torch.ops.fp4moe.moe(hidden, ids, w, handle)


def test_bad_weights_raise_at_construction():
    g = gen()
    t = random_layer(4, 512, 128, g)
    with pytest.raises(TypeError, match="float8_e4m3fn"):
        fp4moe.MoE.from_modelopt(t["w13"], t["w13_scale"].view(torch.uint8), t["w13_scale_2"], t["w2"],
                                 t["w2_scale"], t["w2_scale_2"], top_k=2)
    with pytest.raises(ValueError, match="w2 must be"):
        make(dict(t, w2=t["w2"][:, :256]), 2)
    with pytest.raises(ValueError, match="expert_range"):
        make(t, 2, expert_range=(3, 9), num_global_experts=8)
    with pytest.raises(ValueError):  # I = 96 is not a multiple of 64
        make(random_layer(4, 512, 96, g), 2)
    with pytest.raises(ValueError):  # top_k above E
        make(t, 5)
    with pytest.raises(ValueError, match="64 bits"):  # would wrap to 2 in the C ABI's int64
        make(t, 2 ** 64 + 2)
    with pytest.raises(ValueError, match="kernel_arch"):  # would wrap to 120 in its int32
        make(t, 2, kernel_arch=2 ** 32 + 120)
    s2 = torch.stack([t["w13_scale_2"], t["w13_scale_2"] * 2], 1)
    with pytest.raises(ValueError, match="differ"):
        make(dict(t, w13_scale_2=s2), 2)
    with pytest.warns(UserWarning, match="differ"):
        make(dict(t, w13_scale_2=s2), 2, w13_scale_2_mismatch="use_first")


# ---- quantization and loading ------------------------------------------------------------------------------------

def test_quantize_nvfp4_round_trip_and_a_quantized_layer():
    g = gen()
    x = (torch.randn(256, 1024, device=DEV, generator=g) * 3).to(torch.bfloat16)
    packed, scales, mult = fp4moe.quantize_nvfp4(x)
    assert packed.shape == (256, 512) and scales.shape == (256, 64) and scales.dtype == torch.float8_e4m3fn
    y = decode(packed, scales, mult)
    blocks = x.double().reshape(256, 64, 16)
    amax = blocks.abs().amax(-1, keepdim=True)
    err = (y.reshape(256, 64, 16) - blocks).abs()
    # one e2m1 step (at most 2 of 6 at the top of the grid, so half of it rounding) of the block's scale, the scale
    # itself within E4M3's 2^-4 rounding of amax / 6
    assert bool((err <= amax / 6 * 1.07 + 1e-30).all()), float((err / (amax / 6)).max())
    assert float((y.reshape(256, 64, 16).abs().amax(-1) / amax.squeeze(-1)).min()) > 0.85
    # a layer from quantized bf16 weights (gate/up/down as ModelOpt would store them)
    E, H, I, k = 4, 512, 128, 2
    w13b = (torch.randn(E, 2 * I, H, device=DEV, generator=g) / H ** 0.5).to(torch.bfloat16)
    w2b = (torch.randn(E, H, I, device=DEV, generator=g) / I ** 0.5).to(torch.bfloat16)
    q13 = [fp4moe.quantize_nvfp4(w13b[e]) for e in range(E)]
    q2 = [fp4moe.quantize_nvfp4(w2b[e]) for e in range(E)]
    t = dict(w13=torch.stack([q[0] for q in q13]), w13_scale=torch.stack([q[1] for q in q13]),
             w13_scale_2=torch.stack([q[2] for q in q13]).float(), w2=torch.stack([q[0] for q in q2]),
             w2_scale=torch.stack([q[1] for q in q2]), w2_scale_2=torch.stack([q[2] for q in q2]).float())
    hidden, ids, w = random_inputs(12, H, k, E, g)
    want, tol = reference(t, hidden, ids, w)
    assert_close(run_checked(make(t, k), hidden, ids, w), want, tol, "quantized layer")
    with pytest.raises(ValueError, match="multiple of 16"):
        fp4moe.quantize_nvfp4(x[:, :24])
    with pytest.raises(TypeError, match="bfloat16"):
        fp4moe.quantize_nvfp4(x.float())
    # Inf or NaN input is reported (the check synchronises); without the check the call returns without a sync
    bad = x.clone()
    bad[7, 100] = float("inf")
    with pytest.raises(ValueError, match="Inf or NaN"):
        fp4moe.quantize_nvfp4(bad)
    bad[7, 100] = float("nan")
    with pytest.raises(ValueError, match="Inf or NaN"):
        fp4moe.quantize_nvfp4(bad)
    fp4moe.quantize_nvfp4(bad, check=False)
    fp4moe.quantize_nvfp4(x)  # (a clean call afterwards passes its check)
    # no rows: empty codes, and a global scale that is 1, not an unwritten value
    p0, s0, m0 = fp4moe.quantize_nvfp4(x[:0])
    assert p0.shape == (0, 512) and s0.shape == (0, 64) and s0.dtype == torch.float8_e4m3fn and float(m0) == 1.0


def test_from_safetensors_matches_from_modelopt(tmp_path):
    from safetensors.torch import save_file
    g = gen()
    E, H, I, k = 4, 512, 128, 2
    t = random_layer(E, H, I, g)
    tensors = {}
    for e in range(E):
        for proj, rows in (("gate_proj", slice(0, I)), ("up_proj", slice(I, 2 * I))):
            tensors[f"m.experts.{e}.{proj}.weight"] = t["w13"][e, rows].cpu().contiguous()
            tensors[f"m.experts.{e}.{proj}.weight_scale"] = t["w13_scale"][e, rows].cpu().contiguous()
            tensors[f"m.experts.{e}.{proj}.weight_scale_2"] = t["w13_scale_2"][e].cpu().reshape(())
        tensors[f"m.experts.{e}.down_proj.weight"] = t["w2"][e].cpu().contiguous()
        tensors[f"m.experts.{e}.down_proj.weight_scale"] = t["w2_scale"][e].cpu().contiguous()
        tensors[f"m.experts.{e}.down_proj.weight_scale_2"] = t["w2_scale_2"][e].cpu().reshape(())
    path = str(tmp_path / "layer.safetensors")
    save_file(tensors, path)
    moe = fp4moe.MoE.from_safetensors(path, "m.experts", top_k=k, device=DEV, tuning_cache="none")
    hidden, ids, w = random_inputs(10, H, k, E, g)
    want, tol = reference(t, hidden, ids, w)
    assert_close(run_checked(moe, hidden, ids, w), want, tol, "from_safetensors")
