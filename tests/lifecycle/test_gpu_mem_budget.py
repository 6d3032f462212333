"""The lifecycle's device-memory budget rule: a sharing rank over its ``--gpu-mem`` budget gets a
history line naming the process, its usage and its budget (once per process, whatever the usage
of later reports), and under ``violation = "kill"`` its job is stopped and fails with that line."""

from __future__ import annotations

import dataclasses

from labgang.launcher.lifecycle import effects as fx
from labgang.launcher.lifecycle import events as ev
from labgang.launcher.lifecycle.machine import Lifecycle, LifecyclePolicy
from labgang.launcher.lifecycle.records import JobRecord
from labgang.launcher.lifecycle.states import EndIntent, JobState, RankPhase

from .test_machine import POLICY, admitted, job, start

GIB = 1024**3
OVER = ev.DeviceViolationSeen(3.0, "n1", "1.0", 0, "GPU-a", 4242, ("GPU-a",), used=6 * GIB, budget=4 * GIB)
LINE = "rank 0 on n1 (pid 4242) uses 6.0 GiB of device GPU-a, over its --gpu-mem budget of 4.0 GiB"


def running(policy: LifecyclePolicy = POLICY) -> tuple[Lifecycle, JobRecord]:
    model = Lifecycle(policy, [job("1")])
    admitted(model, "1", 1.0)
    start(model, model.jobs["1"], 2.0)
    return model, model.jobs["1"]


def lines(record: JobRecord) -> list[str]:
    return [h.message for h in record.history if h.event == "gpu-mem-violation"]


def test_report_names_the_process_its_usage_and_its_budget_once() -> None:
    model, record = running()
    out = model.apply(OVER)
    assert lines(record) == [LINE]
    assert [type(e) for e in out] == [fx.AddHistory]
    assert record.status.state == JobState.RUNNING
    assert model.apply(dataclasses.replace(OVER, now=4.0, used=7 * GIB)) == []  # still over: no new line
    assert not [h for h in record.history if h.event == "device-violation"]  # its own card: no device violation


def test_kill_stops_the_job_and_fails_it_with_the_budget_line() -> None:
    model, record = running(dataclasses.replace(POLICY, violation="kill"))
    out = model.apply(OVER)
    assert [e for e in out if isinstance(e, fx.Stop)] == [
        fx.Stop("n1", "1.0", 7.0, False, "1"),
        fx.Stop("n2", "1.0", 7.0, False, "1"),
    ]
    reason = f'device-memory budget exceeded (violation = "kill"): {LINE}'
    assert record.status.end_intent == EndIntent.FAIL and record.status.reason_message == reason
    for rank, node in ((0, "n1"), (1, "n2")):
        model.apply(ev.RankObserved(5.0, node, "1.0", rank, RankPhase.GONE, exit_status=143))
    assert record.status.state == JobState.FAILED and record.status.reason_message == reason


def test_a_budget_under_a_gib_is_written_in_mib_not_as_0_0_gib() -> None:
    # the new user's --gpu-mem 16 (16 MiB) read "over its --gpu-mem budget of 0.0 GiB"
    model, record = running()
    model.apply(dataclasses.replace(OVER, used=512 * 1024**2, budget=16 * 1024**2))
    assert lines(record) == [
        "rank 0 on n1 (pid 4242) uses 512 MiB of device GPU-a, over its --gpu-mem budget of 16 MiB"
    ]
