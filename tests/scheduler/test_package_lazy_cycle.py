"""The scheduler package gives :func:`run_cycle` and :func:`check_schedulable` on first use: the
lifecycle model, which needs the scheduler's types only, does not import the cycle, the
schedulability check and all under them (bench/README.md, "Issue 23, fifth pass": 260M
instructions of every such import; "sixth pass": 136M more for the check, the quota book and the
shares' book)."""

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


def test_the_lifecycle_model_imports_neither_the_check_nor_the_books_and_the_check_still_resolves() -> None:
    code = (
        "import sys, labgang.launcher.lifecycle.machine\n"
        "print(*(name in sys.modules for name in ('labgang.launcher.scheduler.unschedulable',"
        " 'labgang.launcher.scheduler.quota', 'labgang.launcher.scheduler.shares')))\n"
        "from labgang.launcher.scheduler import check_schedulable\n"
        "print(check_schedulable.__module__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["False", "False", "False", "labgang.launcher.scheduler.unschedulable"]


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    from labgang.launcher import scheduler

    with pytest.raises(AttributeError, match="has no attribute 'run_cycles'"):
        scheduler.run_cycles  # noqa: B018
