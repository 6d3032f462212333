"""A held job (``labgang hold``, ``PendingJob.on_hold``) in the pure cycle: never admitted, never a
preemptor, never holding quota or blocking a strict-fifo queue; it is answered with reason HELD."""

from __future__ import annotations

from dataclasses import replace

from labgang.launcher.scheduler import run_cycle
from labgang.launcher.scheduler.decisions import ReasonCode
from sched_builders import Cluster, job, queue


def held(snapshot, job_id: str, by: str = "alice"):
    return replace(snapshot, pending=tuple(replace(p, on_hold=by) if p.id == job_id else p for p in snapshot.pending))


def test_a_held_job_that_fits_is_not_admitted_and_says_held():
    q = queue("q").nominal(gpu=4).build()
    snap = held(Cluster().node("n1", 4).snapshot([q], [job("h").queue("q").gpus(2)]), "h")
    result = run_cycle(snap)
    assert result.admitted == ()
    [pending] = result.pending
    assert pending.job_id == "h" and pending.reason.code == ReasonCode.HELD
    assert pending.reason.message == "held by alice; `labgang release h` lets it be scheduled"


def test_a_held_high_priority_job_preempts_nobody():
    q = queue("q").nominal(gpu=4).within_queue("lower-priority").build()
    c = Cluster().node("n1", 4)
    c.run(job("low").queue("q").gpus(4).priority(-5))
    snap = c.snapshot([q], [job("top").queue("q").gpus(4).priority(100)])
    assert run_cycle(snap).preempted != ()  # not held: it would preempt
    result = run_cycle(held(snap, "top"))
    assert result.preempted == () and result.admitted == ()
    assert [p.reason.code for p in result.pending] == [ReasonCode.HELD]


def test_a_held_head_does_not_block_a_strict_fifo_queue():
    q = queue("q").nominal(gpu=4).strict().build()
    pending = [job("head").queue("q").gpus(4).priority(9), job("next").queue("q").gpus(2)]
    snap = Cluster().node("n1", 4).snapshot([q], pending)
    assert [a.job_id for a in run_cycle(snap).admitted] == ["head"]
    result = run_cycle(held(snap, "head"))
    assert [a.job_id for a in result.admitted] == ["next"]
    assert {p.job_id: p.reason.code for p in result.pending} == {"head": ReasonCode.HELD}


def test_a_held_array_task_names_its_array_and_how_to_release_it_all():
    q = queue("q").nominal(gpu=4).build()
    snap = Cluster().node("n1", 4).snapshot([q], [job("12_0").queue("q").gpus(1), job("12_1").queue("q").gpus(1)])
    snap = held(held(snap, "12_0"), "12_1")
    result = run_cycle(snap)
    assert result.admitted == ()
    messages = {p.job_id: p.reason.message for p in result.pending}
    want = "held by alice; `labgang release 12` lets array 12 be scheduled (one task: `labgang release 12_N`)"
    assert messages == {"12_0": want, "12_1": want}  # the same words: `queue` folds the tasks in one row
