"""A rank launched with host limits (``cpu_limit``, ``memory_limit``) by the real supervisor and
small parent: its cgroup folder gets ``cpu.max``/``memory.max`` (written when the cgroup is
prepared, before the small parent is spawned), and the small parent writes its pid to
``cgroup.procs``. A plain folder stands in for the cgroup v2 ranks folder (no kernel cgroup
here; the kernel's side is tests/supervisor/test_hostlimits_cgroup2.py), and the device filter
is not attached (no NVIDIA driver)."""

from __future__ import annotations

import sys
from pathlib import Path

from labgang.agent.confine import NodeDevices, RankCgroups
from labgang.agent.supervisor import RankState, Supervisor

GIB = 1024**3


def test_limits_written_into_the_ranks_cgroup(state_dir: Path, cleanup, make_spec, h, tmp_path: Path) -> None:
    ranks = tmp_path / "labgang.ranks"
    ranks.mkdir()

    def install(where: str, rules: object, majors: object) -> None:
        pass  # no NVIDIA driver: no device filter to attach

    devices = NodeDevices({"nvidia-frontend": 1}, {"GPU-test-0": 3}, {}, {})
    sup = Supervisor(
        state_dir, allow_root=True, cgroups=RankCgroups(str(ranks), devices, install=install, enforce_limits=True)
    )
    cleanup.append(sup)
    sup.launch(make_spec([sys.executable, "-c", "pass"], cpu_limit=2, memory_limit=3 * GIB))
    h.run_until(sup, h.all_in(sup, RankState.GONE))
    folder = ranks / "job1.0"  # a plain folder keeps its files, so release could not remove it
    assert (folder / "cpu.max").read_text() == "200000 100000"
    assert (folder / "memory.max").read_text() == str(3 * GIB)
    assert (folder / "cgroup.procs").read_text().strip().isdigit()  # the small parent joined first
    for name in ("cpu.max", "memory.max", "cgroup.procs"):
        (folder / name).unlink()
    sup.forget("job1")
    assert not folder.exists()
