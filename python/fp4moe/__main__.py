# `python -m fp4moe ARGS`: the fp4moe CLI the package ships, with the same arguments and exit codes.
# SPDX-License-Identifier: Apache-2.0
"""python -m fp4moe plan --arch sm_120 --cutlass   (as `fp4moe plan ...`)"""
from __future__ import annotations

import os
import sys

from ._cli import cli_path


def main() -> None:
    exe = cli_path()
    if not exe.is_file():
        sys.exit(f"error: the fp4moe CLI is missing: {exe} (install the wheel, or set FP4MOE_CLI)")
    os.execv(str(exe), [str(exe), *sys.argv[1:]])


if __name__ == "__main__":
    main()
