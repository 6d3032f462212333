"""The job-array gate in front of each cycle (launcher/lifecycle/arrays.py): the %N cap with its
ARRAY_LIMIT reason, and the window that feeds a big array's first tasks only."""

from __future__ import annotations

import pytest
from labgang.launcher.lifecycle.arrays import cap_reason, follow_reasons, gate_pending
from labgang.launcher.lifecycle.records import ArrayTask, JobRecord, JobSpec, JobStatus
from labgang.launcher.lifecycle.states import JobState
from labgang.launcher.scheduler.decisions import CycleResult, Pending, PendingReason, ReasonCode

_seq = iter(range(1, 1_000_000))


def job(array: ArrayTask | None = None, *, gpus: int = 1, state: JobState = JobState.PENDING) -> JobRecord:
    spec = JobSpec(
        name="j", user="alice", uid=1000, gid=None, queue="default", priority=0, workers=1, per_worker=gpus,
        resource="gpu", gpu_model=None, nodes=None, argv=["x"], env={}, cwd="/tmp", grace_s=7.0, time_limit_s=None,
        requeue=True, signal=None, array=array,
    )  # fmt: skip
    seq = next(_seq)
    job_id = str(seq) if array is None else f"{array.array_id}_{array.index}"
    return JobRecord(id=job_id, seq=seq, spec=spec, status=JobStatus(state=state))


def tasks(array_id: str, n: int, *, limit: int | None = None, gpus: int = 1) -> list[JobRecord]:
    return [job(ArrayTask(array_id, i, n, 0, n - 1, 1, limit), gpus=gpus) for i in range(n)]


def test_jobs_of_their_own_are_always_fed_in_order() -> None:
    plain = [job(), job(), job()]
    gate = gate_pending(plain, [], {"gpu": 1})
    assert gate.fed == tuple(plain) and gate.capped == () and not gate.followers


def test_the_cap_feeds_what_is_left_of_it_and_holds_back_the_rest() -> None:
    array = tasks("7", 6, limit=3)
    for holding in array[:2]:
        holding.status.state = JobState.RUNNING
    gate = gate_pending(array[2:], array[:2], {"gpu": 64})
    assert [j.id for j in gate.fed] == ["7_2"]
    assert [p.job_id for p in gate.capped] == ["7_3", "7_4", "7_5"]
    assert gate.capped[0].reason == PendingReason(ReasonCode.ARRAY_LIMIT, "array 7 runs at most 3 tasks at once (%3)")
    assert not gate.followers


def test_held_tasks_take_none_of_the_cap() -> None:
    """``submit -H --array 0-3%2`` then ``release 1_3``: the released task is fed at once (the
    cap counts tasks that run, as Slurm's ``%N``); the held ones are fed for the cycle to say they
    are held, never capped, and lead no follower."""
    array = tasks("9", 4, limit=2)
    for task in array[:3]:
        task.status.hold = "alice"
    gate = gate_pending(array, [], {"gpu": 64})
    assert [j.id for j in gate.fed] == ["9_0", "9_1", "9_2", "9_3"]
    assert gate.capped == () and not gate.followers
    wide = tasks("8", 5, limit=2)  # two held, then three released: two fed by the cap, one capped
    wide[0].status.hold = wide[1].status.hold = "alice"
    gate = gate_pending(wide, [], {"gpu": 64})
    assert [j.id for j in gate.fed] == ["8_0", "8_1", "8_2", "8_3"]
    assert [p.job_id for p in gate.capped] == ["8_4"]


def test_a_task_already_capped_is_not_told_again() -> None:
    array = tasks("7", 3, limit=1)
    reason = cap_reason("7", 1)
    array[2].status.reason_code, array[2].status.reason_message = reason.code.value, reason.message
    gate = gate_pending(array, [], {"gpu": 8})
    assert [j.id for j in gate.fed] == ["7_0"]
    assert [p.job_id for p in gate.capped] == ["7_1"]


@pytest.mark.parametrize(
    ("capacity", "gpus", "holding", "fed"),
    [
        (8, 1, 0, 9),  # room for 8 at most: feed 9
        (8, 2, 0, 5),
        (8, 1, 3, 6),  # the array's own running tasks cannot be its victims
        (8, 8, 1, 1),
        (0, 1, 0, 1),  # no device of the resource known yet: still one, for its reason
    ],
)
def test_the_window_feeds_one_more_task_than_the_cluster_could_admit(
    capacity: int, gpus: int, holding: int, fed: int
) -> None:
    array = tasks("3", 100, gpus=gpus)
    for running in array[:holding]:
        running.status.state = JobState.RUNNING
    gate = gate_pending(array[holding:], array[:holding], {"gpu": capacity, "mig-1g.10gb": 1000})
    assert [j.id for j in gate.fed] == [f"3_{i}" for i in range(holding, holding + fed)]
    leader = gate.fed[-1].id
    assert list(gate.followers) == [leader]
    assert [j.id for j in gate.followers[leader]] == [f"3_{i}" for i in range(holding + fed, 100)]
    assert gate.capped == ()


def test_a_cap_above_the_window_leaves_the_window_in_charge() -> None:
    gate = gate_pending(tasks("5", 50, limit=40), [], {"gpu": 4})
    assert len(gate.fed) == 5 and gate.capped == () and len(gate.followers["5_4"]) == 45


def test_followers_take_their_leaders_reason_unless_it_is_waiting_for_victims() -> None:
    array = tasks("9", 5)
    jobs = {j.id: j for j in array}
    gate = gate_pending(array, [], {"gpu": 1})
    assert [j.id for j in gate.fed] == ["9_0", "9_1"]
    busy = PendingReason(ReasonCode.NO_CAPACITY, "0 gpu free; job needs 1 x 1 gpu")
    result = CycleResult((), (), (Pending("9_0", busy), Pending("9_1", busy)))
    out = follow_reasons(gate, result)
    assert [p.job_id for p in out.pending] == ["9_0", "9_1", "9_2", "9_3", "9_4"]
    assert all(p.reason == busy for p in out.pending)
    # once told, a follower is not told the same again
    jobs["9_3"].status.reason_code, jobs["9_3"].status.reason_message = busy.code.value, busy.message
    assert [p.job_id for p in follow_reasons(gate, result).pending][2:] == ["9_2", "9_4"]
    waiting = PendingReason(ReasonCode.WAITING_FOR_VICTIMS, "waiting for job 4 to stop")
    result = CycleResult((), (), (Pending("9_0", busy), Pending("9_1", waiting)))
    assert follow_reasons(gate, result) is result


def test_a_queue_quota_cap_narrows_the_window() -> None:
    """A queue that can hold at most 6 devices, 2 of them held by an equal-priority job: 4 tasks
    could start, so 5 are fed. A lower-priority job's devices might be preempted: not counted."""
    other = job(gpus=2, state=JobState.RUNNING)
    low = job(gpus=3, state=JobState.RUNNING)
    low.spec.priority = -1
    gate = gate_pending(tasks("4", 50), [other, low], {"gpu": 64}, {"default": {"gpu": 6}})
    assert [j.id for j in gate.fed] == [f"4_{i}" for i in range(5)]
    gate = gate_pending(tasks("4", 100), [other, low], {"gpu": 64}, {"other-queue": {"gpu": 6}})
    assert len(gate.fed) == 65  # no cap on this queue: the cluster's 64 devices bound it


def test_two_arrays_in_one_queue_each_get_their_own_window() -> None:
    running = job(gpus=2, state=JobState.RUNNING)
    first, second = tasks("6", 20), tasks("8", 20, gpus=2)
    gate = gate_pending([*first, *second], [running], {"gpu": 64}, {"default": {"gpu": 6}})
    assert [j.id for j in gate.fed] == [f"6_{i}" for i in range(5)] + [f"8_{i}" for i in range(3)]
    assert [len(tail) for tail in gate.followers.values()] == [15, 17]
