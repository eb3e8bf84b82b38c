# The fp4moe command-line tool from Python: plan() and tune() return its JSON as Python objects.
# SPDX-License-Identifier: Apache-2.0
"""Runs the CLI the package ships (bin/fp4moe) with an argument vector, no shell."""
from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence


def cli_path() -> Path:
    """$FP4MOE_CLI, else the fp4moe binary inside the installed package."""
    env = os.environ.get("FP4MOE_CLI")
    if env:
        return Path(env)
    return Path(__file__).resolve().parent / "bin" / "fp4moe"


def run_cli(args: Sequence[str], check: bool = True) -> subprocess.CompletedProcess:
    """fp4moe ARGS...; with check, ValueError for exit code 2 (a wrong command line) and RuntimeError for 1."""
    exe = cli_path()
    if not exe.is_file():
        raise FileNotFoundError(f"the fp4moe CLI is missing: {exe} (install the wheel, or set FP4MOE_CLI)")
    r = subprocess.run([str(exe), *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        msg = (r.stderr.strip() or r.stdout.strip()).removeprefix("error: ")
        raise (ValueError if r.returncode == 2 else RuntimeError)(f"fp4moe {' '.join(args)}: {msg}")
    return r


def _model_args(model: Optional[str], shape: Optional[Sequence[int]], tp: int, ep: int) -> List[str]:
    a: List[str] = []
    if shape is not None:
        if len(shape) != 4:
            raise ValueError(f"shape must be (E, H, I, k), got {shape!r}")
        a += ["--shape", ",".join(str(int(v)) for v in shape)]
    elif model is not None:
        a += ["--model", model]
    return a + ["--tp", str(int(tp)), "--ep", str(int(ep))]


def plan(model: Optional[str] = "glm5", *, shape: Optional[Sequence[int]] = None, tp: int = 1, ep: int = 1,
         arch: str = "all", gpu: Optional[str] = None, tile: Optional[str] = None,
         cutlass: Optional[str] = None) -> Dict[str, Any]:
    """The shared-memory plan of every kernel config (no GPU needed), as `fp4moe plan --json` gives it: a dict with
    "fp4moe" -> {arch name -> {"limit", "smem_per_sm", "plans": [...]}} and, with `cutlass` ("latest", "4.2.1"),
    "cutlass" -> CUTLASS's sm_120 MoE tactics with verdicts."""
    a = ["plan", "--json", *_model_args(model, shape, tp, ep)]
    a += ["--gpu", gpu] if gpu else ["--arch", arch]
    if tile:
        a += ["--tile", tile]
    if cutlass is not None:
        a += [f"--cutlass={'' if cutlass == 'latest' else cutlass}"]
    return json.loads(run_cli(a).stdout)


def tune(model: Optional[str] = "glm5", *, shape: Optional[Sequence[int]] = None, tp: int = 1, ep: int = 1,
         cache: Optional[str] = None, budget_s: float = 10.0, max_tokens: int = 4096) -> Dict[str, Any]:
    """`fp4moe tune` (a GPU): times every shipped config per tokens bucket, writes the tuning cache that MoE layers
    read at construction, and returns the tuned table {"gpu", "seconds", "cache", "buckets": [...]}."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "tune.json")
        a = ["tune", *_model_args(model, shape, tp, ep), "--budget-s", str(float(budget_s)), "--max-tokens",
             str(int(max_tokens)), "--json", out]
        if cache:
            a += ["--cache", cache]
        run_cli(a)
        with open(out, encoding="utf-8") as f:
            return json.load(f)
