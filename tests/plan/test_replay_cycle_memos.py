"""The cycle-state memos of the replay speed work (issue 28: the running jobs by id carried from the
last cycle, ``state._by_id_from``; the device book's request map built when first read,
``capacity.lazy_requests``; with the usage and request memos they rest on) change no schedule: a
generated 10,000-job history like ``bench/plan_fidelity.py``'s (100 nodes of 8 GPUs at about 90 %
load, two queues in a cohort, priorities that preempt) gives every job the same admit and end times,
waits and preemptions, the same cycle count and the same trace (every pending reason, admission,
preemption and end, hashed) with them on and off, and ``plan replay``'s per-queue table of a 3,000-job
history is the same. The kept scenarios are pinned by ``tests/simulate/test_engine_unchanged.py``."""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from engine_digest import digest
from labgang.launcher.lifecycle.driver import CycleDriver
from labgang.launcher.plan.replay import replay
from labgang.launcher.scheduler import capacity, state
from labgang.launcher.scheduler.snapshot import PendingJob


def history(n: int, nodes: int = 100, seed: int = 1) -> dict[str, Any]:
    """``n`` jobs on ``nodes`` 8-GPU nodes at about 90 % load, as ``bench/plan_fidelity.py``'s ``synthetic``."""
    rng = random.Random(seed)
    gpus = nodes * 8
    jobs = []
    t = 0.0
    for i in range(n):
        per = rng.choice([1, 1, 2, 4, 8])
        workers = 1 if per < 8 else rng.choice([1, 1, 2])
        run = rng.uniform(600, 3600)
        t += rng.expovariate(1.0) * run * per * workers / (gpus * 0.9)
        jobs.append({
            "id": f"j{i}", "queue": rng.choice(["a", "b"]), "workers": workers, "gpus_per_worker": per,
            "priority": rng.choice([0, 0, 0, 10]), "submit": round(t, 3), "duration": round(run, 3),
        })  # fmt: skip
    return {
        "scenario": {"name": "speed"},
        "nodes": [{"name": f"n{k}", "gpus": 8} for k in range(nodes)],
        "queues": [
            {"name": "a", "cohort": "lab", "nominal": {"gpu": gpus // 2}, "within_queue": "lower-priority"},
            {"name": "b", "cohort": "lab", "nominal": {"gpu": gpus - gpus // 2}, "within_queue": "lower-priority"},
        ],
        "jobs": jobs,
    }


@pytest.fixture(autouse=True)
def verify_tracking() -> Iterator[None]:
    """Here the cycle driver's tracking is not checked against a full scan each split (the other
    tests of this folder do): over 10,000 jobs that scan would be most of the test's time."""
    yield


@contextmanager
def memos_off() -> Iterator[None]:
    """Every cycle builds its running map, usage and request map in full (the memos neither read nor kept)."""
    was = state.memo_usage, capacity.memo_requests, capacity.lazy_requests
    state.memo_usage = capacity.memo_requests = capacity.lazy_requests = False
    state._last_plain = capacity._last_requests = None
    try:
        yield
    finally:
        state.memo_usage, capacity.memo_requests, capacity.lazy_requests = was
        state._last_plain = capacity._last_requests = None


@pytest.mark.timeout(600)  # two 10,000-job replays on a loaded shared machine
def test_a_long_history_replays_the_same_with_the_memos_off() -> None:
    data = history(10_000)
    got = digest(data)
    with memos_off():
        want = digest(data)
    changed = [j for j in want["jobs"] if want["jobs"][j] != got["jobs"].get(j)]
    assert not changed, (
        f"{len(changed)} jobs changed, first: {[(j, want['jobs'][j], got['jobs'].get(j)) for j in changed[:3]]}"
    )
    assert got["jobs"].keys() == want["jobs"].keys()
    assert (got["cycles"], got["events"], got["trace_sha256"]) == (want["cycles"], want["events"], want["trace_sha256"])
    assert got["cycles"] > 15_000  # the history ran its bursts: the memos were asked every cycle


def test_the_per_queue_table_is_the_same_with_the_memos_off() -> None:
    data = history(3_000)
    got = replay(data)
    with memos_off():
        want = replay(data)
    assert got.queues == want.queues
    assert (got.span_s, got.waits, got.never_started) == (want.span_s, want.waits, want.never_started)


def test_pending_views_kept_per_held_flag_stay_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cycle driver keeps a pending job's view per held-quota flag (``CycleDriver._pending_views``):
    a waiting head that held its queue's idle quota one cycle holds none the next, so its flag
    alternates, and each flag's view is handed again while the job's record, spec, status object and
    shown fields stay. A 1,000-job history's every split is checked against fresh views
    (``verify_tracking``), and not vacuously: views are handed again after the flag flipped both ways."""
    monkeypatch.setattr(CycleDriver, "verify_tracking", True)
    real = CycleDriver._pending_views
    last: dict[str, PendingJob] = {}  # per job, the view handed last
    seen: dict[int, PendingJob] = {}  # every view handed out (kept alive: no identity reused)
    again = {True: 0, False: 0}  # a view handed again for the flag the job did not have last time

    def watching(self: CycleDriver, fed: Any, held: Any) -> list[PendingJob]:
        out = real(self, fed, held)
        for view in out:
            before = last.get(view.id)
            if before is not None and before.held_last_cycle != view.held_last_cycle and id(view) in seen:
                again[view.held_last_cycle] += 1
            last[view.id] = seen[id(view)] = view
        return out

    monkeypatch.setattr(CycleDriver, "_pending_views", watching)
    replay(history(1000, nodes=20))
    assert again[True] > 0 and again[False] > 0, again
