"""A reclaim whose victim is an ``--mps`` job, through a real ``labgang up --simulate --config``:
the preemptor starts and the victim waits, once. The new user saw the victim restarted dozens of
times in seconds while the reclaiming queue never started: the victim's MPS server, stopped as its
last rank left, was still listed on its card by the NVML read the agent had just taken, so the
card read as held by a foreign process; the preemptor (needing every other card) failed in that
cycle and the victim, back in its queue, took a free card again (``agent/mps.py``: a stopped
daemon's pids stay labgang's until no inventory lists them)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from up_harness import Up, running_up

pytestmark = pytest.mark.slow

CONFIG = """
default_queue = "team"
default_grace_s = 1

[sharing]
mps = true

[[cohorts]]
name = "lab"

[[queues]]
name = "team"
cohort = "lab"
nominal = { gpu = 1 }
borrowing_limit = { gpu = 7 }
share_gpus = "queue"
reclaim_within_cohort = "any"

[[queues]]
name = "nlp"
cohort = "lab"
nominal = { gpu = 7 }
reclaim_within_cohort = "any"
"""


@pytest.fixture
def up() -> Iterator[Up]:
    yield from running_up("lgmpsrc", CONFIG)


def test_reclaiming_an_mps_job_preempts_it_once_and_the_reclaimer_starts(up: Up) -> None:
    first = up.submit("-q", "team", "--mps", "60", "--", "sleep", "600")
    second = up.submit("-q", "team", "--mps", "60", "--", "sleep", "600")
    for job in (first, second):
        up.wait_state(job, {"running"})  # two cards held alone: team borrows one of nlp's
    reclaimer = up.submit("-q", "nlp", "-n", "7", "--", "sleep", "600")
    up.wait_state(reclaimer, {"running"})
    jobs = {job: up.job(job) for job in (first, second)}
    victims = [job for job, view in jobs.items() if view["restart_count"]]
    assert len(victims) == 1, jobs
    [victim] = victims
    assert jobs[victim]["restart_count"] == 1 and jobs[victim]["state"] == "pending", jobs[victim]
    assert up.job(reclaimer)["state"] == "running"
