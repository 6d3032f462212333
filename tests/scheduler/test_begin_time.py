"""``--begin``: the pure scheduler never admits a job before its begin time (pending reason
``begin_time``), admits it from that instant, and tells drivers when to wake (``next_wake``)."""

from __future__ import annotations

from dataclasses import replace

from labgang.launcher.lifecycle.rules import next_begin, next_wake
from labgang.launcher.scheduler import ReasonCode, run_cycle
from labgang.launcher.scheduler.snapshot import Snapshot
from sched_builders import Cluster, job, queue

T0 = 1_800_000_000.0  # a unix time (2027-01-15)


def _snapshot(begin: float | None, now: float) -> Snapshot:
    q = queue("q").nominal(gpu=4).build()
    snap = Cluster().node("n1", 4).snapshot([q], [job("later").queue("q").gpus(1), job("now").queue("q").gpus(1)], now)
    later, at_once = snap.pending
    return replace(snap, pending=(replace(later, begin_time=begin), at_once))


def test_a_job_is_not_admitted_before_its_begin_time_even_on_an_idle_cluster():
    result = run_cycle(_snapshot(T0 + 60, T0))
    assert [a.job_id for a in result.admitted] == ["now"]
    (pending,) = result.pending
    assert pending.job_id == "later" and pending.reason.code == ReasonCode.BEGIN_TIME
    assert pending.reason.message.startswith("BeginTime: not before 2027-01-15T")
    assert pending.reason.message.endswith(" (--begin)")


def test_from_its_begin_time_on_it_is_admitted():
    for now in (T0 + 60, T0 + 3600):
        result = run_cycle(_snapshot(T0 + 60, now))
        assert sorted(a.job_id for a in result.admitted) == ["later", "now"], now


def test_a_simulated_clock_shows_seconds_and_the_reason_does_not_change_with_time():
    messages = {p.reason.message for now in (0.0, 5.0, 9.0) for p in run_cycle(_snapshot(10.0, now)).pending}
    assert messages == {"BeginTime: not before t=10s (--begin)"}


def test_drivers_wake_at_the_next_begin_time():
    snap = _snapshot(T0 + 60, T0)
    assert next_begin(snap.pending, T0) == T0 + 60
    assert next_wake(snap.pending, snap.queues, T0) == T0 + 60
    assert next_begin(snap.pending, T0 + 60) is None  # reached: nothing left to wake for
    assert next_wake(_snapshot(None, T0).pending, snap.queues, T0) is None
