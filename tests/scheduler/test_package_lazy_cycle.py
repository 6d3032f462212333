"""The scheduler package gives :func:`run_cycle` on first use: the lifecycle model, which needs the
scheduler's types only, does not import the cycle and all under it (bench/README.md, "Issue 23,
fifth pass": 260M instructions of every such import)."""

from __future__ import annotations

import subprocess
import sys

import pytest


def test_the_lifecycle_model_does_not_import_the_cycle_and_run_cycle_still_resolves() -> None:
    code = (
        "import sys, labgang.launcher.lifecycle.machine\n"
        "print('labgang.launcher.scheduler.cycle' in sys.modules)\n"
        "from labgang.launcher.scheduler import run_cycle\n"
        "print(run_cycle.__module__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["False", "labgang.launcher.scheduler.cycle"]


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    from labgang.launcher import scheduler

    with pytest.raises(AttributeError, match="has no attribute 'run_cycles'"):
        scheduler.run_cycles  # noqa: B018
