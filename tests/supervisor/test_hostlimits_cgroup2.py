"""Host CPU/memory limits for real: a temporary cgroup v2 mount, the probe enabling ``+cpu
+memory`` for the ranks' folder, and ``cpu.max``/``memory.max`` written into a rank's cgroup
and read back from the kernel.

Skips, saying why, where no cgroup v2 hierarchy can be mounted (not root, a container) or the
``cpu``/``memory`` controllers are not available to it (a cgroup v1 or hybrid host binds them
to v1 hierarchies: the reason the agent itself would give is the skip message).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from labgang.agent.confine import RankCgroups
from labgang.agent.confine.hostlimits import RankLimits, apply_limits, decide_limits, probe_limits, v1_controllers

GIB = 1 << 30


@pytest.fixture
def cgroup2_mount() -> Iterator[Path]:
    """A cgroup v2 hierarchy mounted on a temporary folder (unmounted afterwards)."""
    where = Path(tempfile.mkdtemp(prefix="lg-cg2-lim-", dir="/tmp"))
    done = subprocess.run(["mount", "-t", "cgroup2", "none", str(where)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        where.rmdir()
        pytest.skip(f"cannot mount a cgroup v2 hierarchy here: {done.stderr.strip() or done.returncode}")
    try:
        yield where
    finally:
        for folder in sorted(where.glob("labgang-lim-*/**/"), key=lambda p: len(p.parts), reverse=True):
            folder.rmdir()
        subprocess.run(["umount", str(where)], check=True)
        where.rmdir()


def test_limits_written_into_a_real_rank_cgroup(cgroup2_mount: Path) -> None:
    top = cgroup2_mount / f"labgang-lim-{os.getpid()}"
    top.mkdir()
    root_controllers = (cgroup2_mount / "cgroup.controllers").read_text().split()
    if "cpu" in root_controllers and "memory" in root_controllers:
        # The root (no processes rule does not apply to it) hands cpu and memory to our folder.
        (cgroup2_mount / "cgroup.subtree_control").write_text("+cpu +memory")
        (top / "cgroup.subtree_control").write_text("+cpu +memory")
    ranks = top / "labgang.ranks"
    # this host's own cgroup v1 hierarchies, as the agent reads them: a hybrid host says so in the skip
    v1 = v1_controllers(Path("/proc/self/mountinfo").read_text())
    limits = decide_limits(
        probe_limits(simulated=False, cgroup2_mount=str(cgroup2_mount), ranks_dir=str(ranks), v1_bound=v1)
    )
    if not limits.enforced:
        pytest.skip(limits.message())
    assert set((ranks / "cgroup.subtree_control").read_text().split()) >= {"cpu", "memory"}

    rank = ranks / "job-1.0"
    rank.mkdir()
    apply_limits(str(rank), RankLimits(6, 16 * GIB))
    assert (rank / "cpu.max").read_text().split() == ["600000", "100000"]
    assert int((rank / "memory.max").read_text()) == 16 * GIB

    apply_limits(str(rank), RankLimits(None, None))
    assert (rank / "cpu.max").read_text().split() == ["max", "100000"]
    assert (rank / "memory.max").read_text().strip() == "max"


def test_a_rank_without_device_confinement_gets_a_real_cgroup_with_its_limits(cgroup2_mount: Path) -> None:
    top = cgroup2_mount / f"labgang-lim-{os.getpid()}-unfenced"
    top.mkdir()
    if {"cpu", "memory"} <= set((cgroup2_mount / "cgroup.controllers").read_text().split()):
        (cgroup2_mount / "cgroup.subtree_control").write_text("+cpu +memory")
        (top / "cgroup.subtree_control").write_text("+cpu +memory")
    ranks = top / "labgang.ranks"
    v1 = v1_controllers(Path("/proc/self/mountinfo").read_text())
    limits = decide_limits(
        probe_limits(simulated=False, cgroup2_mount=str(cgroup2_mount), ranks_dir=str(ranks), v1_bound=v1)
    )
    if not limits.enforced:
        pytest.skip(limits.message())
    procs = RankCgroups(str(ranks), None, enforce_limits=True).prepare("job-2", 0, [], RankLimits(2, 4 * GIB))
    rank = Path(procs).parent
    assert (rank / "cpu.max").read_text().split() == ["200000", "100000"]  # read back from the kernel
    assert int((rank / "memory.max").read_text()) == 4 * GIB
