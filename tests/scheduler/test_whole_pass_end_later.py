"""A whole-device greedy victim pass (no share book kept) checks its last state, every usable candidate
taken off, only once ``preemption.whole_end_after`` of its fit checks failed, over the candidates left
(``_whole_pass_fails`` from the state the pass reached), instead of before its first step: it decides as
the pass that checks its fit after each victim (``preemption.end_first`` off). Checked over every cycle of
the property tests' random scenarios (gangs over nodes, exact node counts, MIG, GPU models, cohort
trees) and of busy labs (backlogs of whole-device jobs where high-priority gangs preempt many small jobs,
as in the replay bench) with the test made after the first, second and third failed check, so that it
is made mid-pass often; and not vacuously: it is made there, and answers both ways."""

from __future__ import annotations

import random
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hypothesis import given, settings
from labgang.launcher.scheduler import preemption, run_cycle
from labgang.launcher.scheduler.snapshot import Snapshot
from test_properties import run_to_end, scenarios, tree_scenarios  # type: ignore[import-not-found]


@contextmanager
def switched(name: str, value: object) -> Iterator[None]:
    saved = getattr(preemption, name)
    setattr(preemption, name, value)
    try:
        yield
    finally:
        setattr(preemption, name, saved)


def same_without(snap: Snapshot, result: object) -> None:
    """A cycle hook: the cycle with ``end_first`` off decides as the one that ran."""
    with switched("end_first", False):
        assert run_cycle(snap) == result


@pytest.mark.parametrize("after", [1, 2, 3])
@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(data=scenarios())
def test_late_end_test_decides_alike_over_random_scenarios(after: int, data: dict) -> None:
    with switched("whole_end_after", after):
        run_to_end(data, [same_without], until=300.0)


@pytest.mark.parametrize("after", [1, 2, 3])
@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(data=tree_scenarios())
def test_late_end_test_decides_alike_over_cohort_trees(after: int, data: dict) -> None:
    with switched("whole_end_after", after):
        run_to_end(data, [same_without], until=300.0)


def busy_lab(seed: int) -> dict:
    """A backlog on a few 8-GPU nodes: two queues of a cohort, small jobs of priority 0 and gangs of
    priority 5 or 10 (some larger than the cluster can free for them), arriving faster than they end."""
    rng = random.Random(seed)
    nodes = rng.randint(2, 5)
    jobs = []
    t = 0.0
    for i in range(rng.randint(30, 60)):
        per = rng.choice([1, 1, 1, 2, 4, 8])
        t += rng.uniform(0.0, 3.0)
        jobs.append({
            "id": f"j{i}", "queue": rng.choice(["a", "b"]), "gpus_per_worker": per,
            "workers": 1 if per < 8 else rng.choice([1, 2, 3]), "priority": rng.choice([0, 0, 0, 5, 10]),
            "submit": round(t, 1), "duration": float(rng.randint(5, 60)), "grace": rng.choice([0.0, 2.0]),
        })  # fmt: skip
    half = nodes * 4
    reclaim = rng.choice(["never", "lower-priority", "any"])
    return {
        "scenario": {"name": f"busy lab {seed}"},
        "nodes": [{"name": f"n{k}", "gpus": 8} for k in range(nodes)],
        "queues": [
            {
                "name": q,
                "cohort": "lab",
                "nominal": {"gpu": half},
                "within_queue": "lower-priority",
                "reclaim_within_cohort": reclaim,
            }
            for q in ("a", "b")
        ],
        "jobs": jobs,
    }


@pytest.mark.parametrize("after", [1, 2, 3])
@pytest.mark.parametrize("seed", range(12))
def test_late_end_test_decides_alike_in_busy_labs(after: int, seed: int) -> None:
    with switched("whole_end_after", after):
        run_to_end(busy_lab(seed), [same_without])


def test_the_late_end_test_is_made_and_answers_both_ways(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not vacuous: over the busy labs the test is made mid-pass (candidates already taken off) and
    both stops passes that could only fail and lets others go on."""
    outcomes = {True: 0, False: 0}
    real = preemption._whole_pass_fails

    def counting(state, spec, job, cands, allow_borrow):
        got = real(state, spec, job, cands, allow_borrow)
        if state.removed:  # asked mid-pass: the pass's victims so far are off the cycle's copy
            outcomes[got] += 1
        return got

    monkeypatch.setattr(preemption, "_whole_pass_fails", counting)
    with switched("whole_end_after", 1):
        for seed in range(12):
            run_to_end(busy_lab(seed), [])
    assert all(outcomes.values()), outcomes
