"""Host CPUs and memory in queue quotas against a real ``labgang up --simulate --config``: a queue
whose nominal quota lists ``cpu = 1`` starts one ``-c 1`` job and holds the next with an
over-quota reason in CPUs, while a queue that lists no CPUs is not limited; ``queues`` shows the
CPUs and memory in NOMINAL and USED."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from up_harness import Up, running_up

pytestmark = pytest.mark.slow

CONFIG = """
default_queue = "a"

[[cohorts]]
name = "lab"

[[queues]]
name = "a"
cohort = "lab"
nominal = { gpu = 4, cpu = 1, memory = "64G" }
borrowing_limit = { cpu = 0 }

[[queues]]
name = "b"
cohort = "lab"
nominal = { gpu = 4 }
"""


@pytest.fixture(scope="module")
def up() -> Iterator[Up]:
    yield from running_up("lghq", CONFIG)


def test_a_queue_holds_its_jobs_to_its_cpu_quota_and_says_so(up: Up) -> None:
    first = up.submit("-q", "a", "-c", "1", "--mem", "1G", "--", "sleep", "300")
    second = up.submit("-q", "a", "-c", "1", "--", "sleep", "300")
    other = up.submit("-q", "b", "-c", "1", "--", "sleep", "300")  # b lists no cpu: not limited by it
    try:
        up.wait_state(first, {"running"})
        up.wait_state(other, {"running"})
        waiting = up.job(second)
        assert waiting["state"] == "pending"
        assert waiting["reason"]["code"] == "over_quota"
        assert waiting["reason"]["message"] == "a uses 1 cpu of the 1 cpu it may use; job needs 1 cpu"
        queues = {q["name"]: q for q in json.loads(up.cli("queues", "--json").stdout)["queues"]}
        assert queues["a"]["nominal"] == {"gpu": 4, "cpu": 1, "memory": 64 * 1024**3}
        assert queues["a"]["used"] == {"gpu": 1, "cpu": 1, "memory": 1024**3}
        row = next(line for line in up.cli("queues").stdout.splitlines() if line.startswith("a "))
        assert "cpu=1,gpu=4,memory=64G" in row and "cpu=1,gpu=1,memory=1G" in row
        assert up.cli("cancel", first).returncode == 0
        up.wait_state(second, {"running"})  # the CPU came back to the queue
    finally:
        up.cli("cancel", first, second, other)


def test_a_request_over_what_the_queue_could_ever_hold_is_refused_at_submission(up: Up) -> None:
    before = up.jobs()
    out = up.cli("submit", "-q", "a", "--mem", "65G", "--", "true")
    assert out.returncode == 1, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("labgang submit: --mem: job can never start: "), lines
    assert "job needs 65 GiB but queue a can hold at most 64 GiB (memory quota)" in lines[0]
    assert set(up.jobs()) <= set(before)  # nothing submitted (a job the test before cancelled may end meanwhile)
