"""The lifecycle's device-violation rule: a history line once per process and device, and under
``violation = "kill"`` a stop whose failure names the violation."""

from __future__ import annotations

import dataclasses

from labgang.launcher.lifecycle import effects as fx
from labgang.launcher.lifecycle import events as ev
from labgang.launcher.lifecycle.machine import Lifecycle, LifecyclePolicy
from labgang.launcher.lifecycle.records import JobRecord
from labgang.launcher.lifecycle.states import EndIntent, JobState, RankPhase

from .test_machine import POLICY, admitted, job, start

SEEN = ev.DeviceViolationSeen(3.0, "n1", "1.0", 0, "GPU-z", 4242, ("GPU-a",))
LINE = "rank 0 on n1 (pid 4242) used device GPU-z, which it was not given (its devices: GPU-a)"


def running(policy: LifecyclePolicy = POLICY) -> tuple[Lifecycle, JobRecord]:
    model = Lifecycle(policy, [job("1")])
    admitted(model, "1", 1.0)
    start(model, model.jobs["1"], 2.0)
    return model, model.jobs["1"]


def lines(record: JobRecord) -> list[str]:
    return [h.message for h in record.history if h.event == "device-violation"]


def test_report_writes_one_history_line_and_stops_nothing() -> None:
    model, record = running()
    out = model.apply(SEEN)
    assert lines(record) == [LINE]
    assert [type(e) for e in out] == [fx.AddHistory]
    assert record.status.state == JobState.RUNNING
    assert model.apply(dataclasses.replace(SEEN, now=4.0)) == []  # seen again: nothing new
    model.apply(dataclasses.replace(SEEN, pid=4243))  # another process of the rank: its own line
    assert len(lines(record)) == 2


def test_kill_stops_every_rank_and_fails_the_job_with_the_violation() -> None:
    model, record = running(dataclasses.replace(POLICY, violation="kill"))
    out = model.apply(SEEN)
    assert [e for e in out if isinstance(e, fx.Stop)] == [
        fx.Stop("n1", "1.0", 7.0, False, "1"),
        fx.Stop("n2", "1.0", 7.0, False, "1"),
    ]
    assert record.status.end_intent == EndIntent.FAIL
    assert record.status.reason_message == f'device violation (violation = "kill"): {LINE}'
    for rank, node in ((0, "n1"), (1, "n2")):
        model.apply(ev.RankObserved(5.0, node, "1.0", rank, RankPhase.GONE, exit_status=143))
    assert record.status.state == JobState.FAILED
    assert record.status.reason_message == f'device violation (violation = "kill"): {LINE}'
    assert record.status.restart_count == 0  # a failure, not a requeue


def test_a_violation_of_an_old_attempt_or_another_node_is_ignored() -> None:
    model, record = running(dataclasses.replace(POLICY, violation="kill"))
    assert model.apply(dataclasses.replace(SEEN, run_id="1.7")) == []
    assert model.apply(dataclasses.replace(SEEN, node="n2")) == []  # rank 0 runs on n1
    assert lines(record) == [] and record.status.state == JobState.RUNNING
