# CPU tests of the fp4moe Python package: import, the planner, the CLI from Python, the ModelOpt safetensors loader,
# tensor-parallel slicing and the forward call's argument checks. No GPU, no torch needed (numpy stands in).
# SPDX-License-Identifier: Apache-2.0
import os
import subprocess
import sys

import numpy as np
import pytest
import safetensors

import fp4moe
from fp4moe import _checks, modelopt


def test_import_and_build_info():
    info = fp4moe.build_info()
    assert info.startswith("fp4moe " + fp4moe.__version__), info
    assert "CUDA on, kernels for sm_90a sm_120f" in info, info
    assert fp4moe.library_path().is_file()


def test_plan_is_the_planners_json():
    p = fp4moe.plan("glm5", arch="sm_120")
    plans = p["fp4moe"]["sm_120"]["plans"]
    assert p["fp4moe"]["sm_120"]["limit"] == 101376
    first = plans[0]
    assert first["tile"] == [8, 128, 256] and first["gemm"] == "gate_up"
    # 4 stages of 22,656 B and the decode tile's routing tables
    assert first["breakdown"]["routing_tables"] == 1552, first
    assert first["smem_bytes"] == 4 * 22656 + 1552 and first["fits"] and first["shipped"], first
    assert all(q["smem_bytes"] <= 101376 for q in plans if q["fits"])


def test_plan_of_shards_and_cutlass():
    p = fp4moe.plan("qwen3-235b", tp=8, arch="sm_90")["fp4moe"]["sm_90"]["plans"]
    down = [q for q in p if q["gemm"] == "down" and q["fits"]]
    assert [8, 128, 64] in [q["tile"] for q in down], "I = 192: the small-K tile serves the down GEMM"
    with pytest.raises(ValueError, match="--tp 3"):
        fp4moe.plan("glm5", tp=3)
    with pytest.raises(ValueError, match="ambiguous"):
        fp4moe.plan("qwen3")
    c = fp4moe.plan("glm5", arch="sm_120", cutlass="latest")["cutlass"]["tactics"]
    failing = [t for t in c if t["tile"] == [128, 256, 128] and t["epilogue"] == "FINALIZE" and not t["fits"]]
    assert failing and "over by 1,024" in failing[0]["verdict"], failing


def test_python_m_fp4moe_is_the_cli():
    cli = subprocess.run([str(fp4moe.cli_path()), "plan", "--arch", "sm_90"], capture_output=True, text=True)
    py = subprocess.run([sys.executable, "-m", "fp4moe", "plan", "--arch", "sm_90"], capture_output=True, text=True,
                        env=dict(os.environ))
    assert cli.returncode == 0 and py.returncode == 0, py.stderr
    assert py.stdout == cli.stdout
    bad = subprocess.run([sys.executable, "-m", "fp4moe", "plan", "--model", "llama"], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.startswith("error:")


@pytest.mark.skipif(os.path.exists("/dev/nvidia0"), reason="a GPU is here: tune would run")
def test_tune_without_a_gpu_is_a_runtime_error():
    with pytest.raises(RuntimeError, match="no CUDA device"):
        fp4moe.tune("glm5", budget_s=1)


# ---- the ModelOpt safetensors loader -----------------------------------------------------------------------------

def _serialize(arrays):
    """{name: (safetensors dtype, numpy array)} -> the file's bytes, with the safetensors package (its TensorSpec API
    from 0.8, the dict API before)."""
    names = {"F8_E4M3": "float8_e4m3fn", "U8": "uint8", "F32": "float32"}
    if hasattr(safetensors, "TensorSpec"):
        keep = [a for _, a in arrays.values()]  # alive while serialize reads them
        specs = {k: safetensors.TensorSpec(dtype=names[dt], shape=list(a.shape), data_ptr=a.ctypes.data, data_len=a.nbytes)
                 for k, (dt, a) in arrays.items()}
        out = safetensors.serialize(specs)
        del keep
        return out
    return safetensors.serialize({k: {"dtype": dt, "shape": list(a.shape), "data": a.tobytes()} for k, (dt, a) in arrays.items()})


def _write_layer(path, prefix, E, H, I, names=("gate_proj", "up_proj", "down_proj"), rng=None, skip_expert=None):
    """A ModelOpt-layout shard written with the safetensors package itself (float8 scales as F8_E4M3 bytes)."""
    rng = rng or np.random.default_rng(0)
    tensors, want = {}, {}
    for e in range(E):
        if e == skip_expert:
            continue
        for proj, (n, k) in zip(names, ((I, H), (I, H), (H, I))):
            w = rng.integers(0, 256, size=(n, k // 2), dtype=np.uint8)
            s = rng.integers(0x18, 0x58, size=(n, k // 16), dtype=np.uint8)  # finite positive E4M3 bytes
            g = np.array(rng.uniform(1e-4, 1e-2), dtype=np.float32)
            base = f"{prefix}.{e}.{proj}"
            tensors[base + ".weight"] = ("U8", w)
            tensors[base + ".weight_scale"] = ("F8_E4M3", s)
            tensors[base + ".weight_scale_2"] = ("F32", g)
            want[(e, proj)] = (w, s, g)
    tensors["other.layer.weight"] = ("F32", np.zeros(2, np.float32))
    with open(path, "wb") as f:
        f.write(_serialize(tensors))
    return want


@pytest.mark.parametrize("order", ["gate_first", "up_first"])
def test_safetensors_layer_stacks_in_the_given_order(tmp_path, order):
    E, H, I = 4, 256, 128
    path = str(tmp_path / "shard.safetensors")
    want = _write_layer(path, "model.layers.3.mlp.experts", E, H, I)
    t = modelopt.stack_layer(modelopt.read_safetensors(path, framework="numpy"), "model.layers.3.mlp.experts",
                             gate_up_order=order)
    assert t["w13"].shape == (E, 2 * I, H // 2) and t["w13_scale"].shape == (E, 2 * I, H // 16)
    assert t["w2"].shape == (E, H, I // 2) and t["w2_scale"].shape == (E, H, I // 16)
    assert t["w13_scale_2"].shape == (E, 2) and t["w2_scale_2"].shape == (E,)
    first, second = ("gate_proj", "up_proj") if order == "gate_first" else ("up_proj", "gate_proj")
    for e in range(E):
        np.testing.assert_array_equal(t["w13"][e, :I], want[(e, first)][0])
        np.testing.assert_array_equal(t["w13"][e, I:], want[(e, second)][0])
        np.testing.assert_array_equal(t["w13_scale"][e, I:], want[(e, second)][1])
        np.testing.assert_array_equal(t["w2"][e], want[(e, "down_proj")][0])
        assert t["w13_scale_2"][e, 0] == want[(e, "gate_proj")][2] and t["w13_scale_2"][e, 1] == want[(e, "up_proj")][2]
        assert t["w2_scale_2"][e] == want[(e, "down_proj")][2]


def test_safetensors_names_and_errors(tmp_path):
    path = str(tmp_path / "w.safetensors")
    _write_layer(path, "blk.moe", 3, 256, 64, names=("w1", "w3", "w2"))
    t = modelopt.stack_layer(modelopt.read_safetensors(path, framework="numpy"), "blk.moe")
    assert t["w13"].shape == (3, 128, 128)
    with pytest.raises(KeyError, match="no expert 0"):
        modelopt.stack_layer(modelopt.read_safetensors(path, framework="numpy"), "blk.other")
    gap = str(tmp_path / "gap.safetensors")
    _write_layer(gap, "x", 4, 256, 64, skip_expert=2)
    with pytest.raises(KeyError, match=r"experts \[2\] of 4 are missing"):
        modelopt.stack_layer(modelopt.read_safetensors(gap, framework="numpy"), "x")
    with pytest.raises(ValueError, match="gate_up_order"):
        modelopt.stack_layer(modelopt.read_safetensors(path, framework="numpy"), "blk.moe", gate_up_order="sideways")


# ---- tensor-parallel slicing ---------------------------------------------------------------------------------

def test_shard_tp_slices_reassemble_the_layer():
    rng = np.random.default_rng(1)
    E, H, I, tp = 3, 256, 256, 4
    w13 = rng.integers(0, 256, size=(E, 2 * I, H // 2), dtype=np.uint8)
    s13 = rng.integers(0, 256, size=(E, 2 * I, H // 16), dtype=np.uint8)
    w2 = rng.integers(0, 256, size=(E, H, I // 2), dtype=np.uint8)
    s2 = rng.integers(0, 256, size=(E, H, I // 16), dtype=np.uint8)
    shards = [modelopt.shard_tp(w13, s13, w2, s2, tp, r) for r in range(tp)]
    Is = I // tp
    for r, (a, sa, b, sb) in enumerate(shards):
        assert a.shape == (E, 2 * Is, H // 2) and sa.shape == (E, 2 * Is, H // 16)
        assert b.shape == (E, H, Is // 2) and sb.shape == (E, H, Is // 16)
        np.testing.assert_array_equal(a[:, :Is], w13[:, r * Is:(r + 1) * Is])        # gate (first half) rows
        np.testing.assert_array_equal(a[:, Is:], w13[:, I + r * Is:I + (r + 1) * Is])  # up (second half) rows
    np.testing.assert_array_equal(np.concatenate([s[2] for s in shards], axis=2), w2)
    np.testing.assert_array_equal(np.concatenate([s[3] for s in shards], axis=2), s2)
    with pytest.raises(ValueError, match="multiple of 64"):
        modelopt.shard_tp(w13, s13, w2, s2, 8, 0)  # I/tp = 32
    with pytest.raises(ValueError, match="tp_rank"):
        modelopt.shard_tp(w13, s13, w2, s2, 2, 2)
    with pytest.raises(ValueError, match="w2 must be"):
        modelopt.shard_tp(w13, s13, w2[:, :128], s2, 2, 0)


# ---- the forward call's argument checks (what raises before anything is launched) --------------------------------

class FakeTensor:
    """The attributes the checks read, so that they are tested without torch (on the GPU the same checks run on
    real tensors: python/tests/test_gpu.py)."""

    def __init__(self, shape, dtype, device="cuda:0", contiguous=True, ptr=0x1000):
        self.shape, self.dtype, self.device, self._c, self._p = tuple(shape), dtype, device, contiguous, ptr

    def is_contiguous(self):
        return self._c

    def data_ptr(self):
        return self._p


def _args(T=4, H=256, k=2, **over):
    a = dict(hidden=FakeTensor((T, H), "torch.bfloat16"), ids=FakeTensor((T, k), "torch.int32", ptr=0x2000),
             weights=FakeTensor((T, k), "torch.float32", ptr=0x3000), out=FakeTensor((T, H), "torch.bfloat16", ptr=0x4000))
    a.update(over)
    return a


def _check(**over):
    a = _args(**{k: v for k, v in over.items() if k in ("T",)})
    a.update({k: v for k, v in over.items() if k != "T"})
    return _checks.check_forward(a["hidden"], a["ids"], a["weights"], a["out"], hidden_size=256, top_k=2, max_tokens=8,
                                 device="cuda:0")


def test_forward_checks_accept_good_arguments():
    assert _check() == 4
    assert _check(out=None) == 4


@pytest.mark.parametrize("over, exc, match", [
    (dict(hidden=FakeTensor((4, 256), "torch.float16")), TypeError, "hidden_states must be bfloat16"),
    (dict(ids=FakeTensor((4, 2), "torch.int64")), TypeError, "topk_ids must be int32"),
    (dict(weights=FakeTensor((4, 2), "torch.bfloat16")), TypeError, "topk_weights must be float32"),
    (dict(hidden=FakeTensor((4, 128), "torch.bfloat16")), ValueError, r"shape \(4, 256\)"),
    (dict(ids=FakeTensor((4, 3), "torch.int32")), ValueError, r"topk_ids must have shape \(4, 2\)"),
    (dict(out=FakeTensor((3, 256), "torch.bfloat16")), ValueError, "out must have shape"),
    (dict(ids=FakeTensor((4, 2), "torch.int32", device="cuda:1")), ValueError, "cuda:1"),
    (dict(hidden=FakeTensor((4, 256), "torch.bfloat16", device="cpu")), ValueError, "on cpu"),
    (dict(weights=FakeTensor((4, 2), "torch.float32", contiguous=False)), ValueError, "contiguous"),
    (dict(out=FakeTensor((4, 256), "torch.bfloat16", ptr=0x1000)), ValueError, "alias"),
    (dict(hidden=[[1.0]]), ValueError, "hidden_states must be"),
    (dict(ids=[[1, 2]]), TypeError, "topk_ids must be a torch.Tensor"),
])
def test_forward_checks_reject_bad_arguments(over, exc, match):
    with pytest.raises(exc, match=match):
        _check(**over)


def test_forward_checks_bound_the_tokens_by_the_workspace():
    a = _args(T=9)
    with pytest.raises(ValueError, match="max_tokens=8"):
        _checks.check_forward(a["hidden"], a["ids"], a["weights"], a["out"], hidden_size=256, top_k=2, max_tokens=8,
                              device="cuda:0")
