"""A scenario job's ``time_limit`` (``--time``): the same lifecycle model as the coordinator stops it
at its limit, with its grace, and it ends TIMEOUT; its devices free for the next job then."""

from __future__ import annotations

from typing import Any

from labgang.agent import tomlfile
from labgang.launcher.lifecycle.states import JobState
from labgang.launcher.simulate import parse_scenario, run_scenario

DOC = """
[scenario]
name = "time-limit"
[[nodes]]
name = "n1"
gpus = 2
[[queues]]
name = "q"
nominal = { gpu = 2 }
[[jobs]]
id = "long"
queue = "q"
gpus_per_worker = 2
duration = "1h"
time_limit = "10m"
grace = "30s"
[[jobs]]
id = "next"
queue = "q"
gpus_per_worker = 2
submit = 1.0
duration = 60
[[expect]]
at = "10m10s"
running = ["long"]
pending = ["next"]
[[expect]]
at = "10m30s"
running = ["next"]
finished = ["long"]
"""


def test_a_job_past_its_time_limit_is_stopped_with_grace_and_ends_timeout() -> None:
    events: list[dict[str, Any]] = []
    scenario = parse_scenario(tomlfile.loads_toml(DOC), "time-limit.toml")
    report = run_scenario(scenario, events.append)
    assert report.ok, report.failures
    long = report.simulation.jobs["long"].record
    assert (long.status.state, long.status.reason_code) == (JobState.TIMEOUT, "timeout")
    assert long.status.end_time == 630.0  # limit at 600 s, then its 30 s grace
    assert {"t": 630.0, "event": "finish", "job": "long", "state": "timeout"} in events
    assert report.simulation.jobs["next"].record.status.state == JobState.SUCCEEDED


def test_a_job_that_ends_before_its_limit_succeeds() -> None:
    doc = DOC.replace('time_limit = "10m"', 'time_limit = "2h"').split("[[expect]]")[0]
    report = run_scenario(parse_scenario(tomlfile.loads_toml(doc), "time-limit.toml"))
    assert report.simulation.jobs["long"].record.status.state == JobState.SUCCEEDED
