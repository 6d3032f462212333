"""One node's ranks of a gang start together (``Supervisor.launch_all``, ``SpareShims.start_shims``):
every spare small parent gets its rank folder while it still waits at its low priority, then every
priority is put back, so a woken spare never takes the CPU from the agent before the last folder is
out; a spare that runs before that takes the agent's priority back itself, so no rank ever runs at
the spare's. Real spares, real ranks; the host seam only records or withholds on purpose."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from labgang.agent.supervisor import RankState, Supervisor
from labgang.agent.supervisor.gate import NOT_RELEASED
from labgang.agent.supervisor.hostos import HostOS

root_only = pytest.mark.skipif(
    os.geteuid() != 0, reason="only a root agent lowers a spare's priority (it must be able to raise it back)"
)


class RecordingHost(HostOS):
    """The real host, noting each spare handed out and each priority put back, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def hand_spare_shim(self, proc: subprocess.Popen[bytes], rank_dir: Path) -> bool:
        self.calls.append(("hand", proc.pid))
        return super().hand_spare_shim(proc, rank_dir)

    def restore_spare_priority(self, proc: subprocess.Popen[bytes]) -> bool:
        self.calls.append(("restore", proc.pid))
        return super().restore_spare_priority(proc)


class NoRestoreHost(HostOS):
    """The real host, except that the agent never puts a handed-out spare's priority back."""

    def restore_spare_priority(self, proc: subprocess.Popen[bytes]) -> bool:
        return True


class NoNewShimHost(HostOS):
    """The real host, except that no new small parent can be spawned (spares still work)."""

    def spawn_shim(self, rank_dir: Path, stderr_path: Path) -> tuple[subprocess.Popen[bytes], int | None]:
        raise OSError(11, "Resource temporarily unavailable")


def _nice_specs(make_spec, out: Path, job: str, n: int):
    """``n`` ranks of one gang, each writing its own niceness (``/proc/self/stat`` field 19) to ``out/RANK``."""
    return [
        make_spec(["/bin/sh", "-c", f"cut -d' ' -f19 /proc/self/stat > {out}/{r}"], job_id=job, rank=r, world_size=n)
        for r in range(n)
    ]


def _shim_pid(state_dir: Path, job: str, rank: int) -> int:
    return json.loads((state_dir / "ranks" / job / str(rank) / "shim.json").read_text())["pid"]


def test_every_spare_gets_its_folder_before_any_priority_is_put_back(state_dir, make_spec, cleanup, h):
    host = RecordingHost()
    sup = Supervisor(state_dir, allow_root=True, spare_shims=3, host_os=host)
    cleanup.append(sup)
    try:
        assert sup.refill_spares() == 3
        spares = [p.pid for p, _ in sup._spares.waiting]
        out = state_dir / "nice"
        out.mkdir()
        results = sup.launch_all(_nice_specs(make_spec, out, "g1", 3))
        assert [type(r).__name__ for r in results] == ["RankStatus"] * 3
        assert host.calls == [("hand", pid) for pid in spares] + [("restore", pid) for pid in spares]
        assert [_shim_pid(state_dir, "g1", r) for r in range(3)] == spares
        h.run_until(sup, h.all_in(sup, RankState.GONE))
        assert [int((out / str(r)).read_text()) for r in range(3)] == [os.getpriority(os.PRIO_PROCESS, 0)] * 3
    finally:
        sup.close_spares()


@root_only
def test_a_spare_whose_priority_the_agent_never_put_back_starts_its_rank_at_the_agents(
    state_dir, make_spec, cleanup, h
):
    sup = Supervisor(state_dir, allow_root=True, spare_shims=2, host_os=NoRestoreHost())
    cleanup.append(sup)
    try:
        sup.refill_spares()
        assert {os.getpriority(os.PRIO_PROCESS, p.pid) for p, _ in sup._spares.waiting} == {19}
        out = state_dir / "nice"
        out.mkdir()
        sup.launch_all(_nice_specs(make_spec, out, "g2", 2))
        h.run_until(sup, h.all_in(sup, RankState.GONE))
        assert [int((out / str(r)).read_text()) for r in range(2)] == [os.getpriority(os.PRIO_PROCESS, 0)] * 2
    finally:
        sup.close_spares()


def test_ranks_beyond_the_spares_get_new_small_parents_after_them(state_dir, make_spec, cleanup, h):
    sup = Supervisor(state_dir, allow_root=True, spare_shims=1)
    cleanup.append(sup)
    try:
        sup.refill_spares()
        spare = sup._spares.waiting[0][0].pid
        out = state_dir / "nice"
        out.mkdir()
        results = sup.launch_all(_nice_specs(make_spec, out, "g3", 3))
        assert [type(r).__name__ for r in results] == ["RankStatus"] * 3
        shims = [_shim_pid(state_dir, "g3", r) for r in range(3)]
        assert shims[0] == spare and spare not in shims[1:] and len(set(shims)) == 3
        events = h.run_until(sup, h.all_in(sup, RankState.GONE))
        assert sorted(e.rank for e in events if e.kind == "started") == [0, 1, 2]
        assert all((out / str(r)).read_text().strip() for r in range(3))
    finally:
        sup.close_spares()


def test_a_rank_whose_small_parent_cannot_be_spawned_is_forgotten_and_its_gang_does_not_run(
    state_dir, make_spec, cleanup, h
):
    """The start gate: rank 1 has no small parent, so rank 0 (parked at the gate) never runs its
    command; it exits with ``NOT_RELEASED`` and says why."""
    sup = Supervisor(state_dir, allow_root=True, spare_shims=1, host_os=NoNewShimHost())
    cleanup.append(sup)
    try:
        sup.refill_spares()
        out = state_dir / "nice"
        out.mkdir()
        results = sup.launch_all(_nice_specs(make_spec, out, "g4", 2))
        assert type(results[0]).__name__ == "RankStatus"
        assert isinstance(results[1], OSError) and results[1].errno == 11
        assert [r.rank for r in sup.ranks()] == [0]
        assert not (state_dir / "ranks" / "g4" / "1").exists()
        events = h.run_until(sup, h.all_in(sup, RankState.GONE))
        assert [(e.rank, e.exit_status) for e in events if e.kind == "exited"] == [(0, NOT_RELEASED)]
        assert not (out / "0").exists() and not (out / "1").exists()
        exit_file = json.loads((state_dir / "ranks" / "g4" / "0" / "exit.json").read_text())
        assert exit_file["error"] == "not started: rank 1 of its gang on this node failed before the start"
    finally:
        sup.close_spares()
