"""Job dependencies in the lifecycle model: held, released, cancelled when they can never hold."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from labgang.launcher.lifecycle import effects as fx
from labgang.launcher.lifecycle import events as ev
from labgang.launcher.lifecycle.dependency import Target, parse_dependency
from labgang.launcher.lifecycle.machine import Lifecycle, LifecyclePolicy
from labgang.launcher.lifecycle.records import JobRecord, JobSpec, JobStatus
from labgang.launcher.lifecycle.states import JobState, RankPhase
from labgang.launcher.scheduler.decisions import Admit, CycleResult, Preempt
from labgang.launcher.scheduler.snapshot import RankPlacement

POLICY = LifecyclePolicy(
    startup_timeout_s=30, requeue_backoff_s=4, requeue_backoff_max_s=60, max_start_failures=3, default_grace_s=5
)


def job(job_id: str, dependency: str | None = None, *, name: str = "j", user: str = "alice") -> JobRecord:
    spec = JobSpec(
        name=name, user=user, uid=1000, gid=None, queue="default", priority=0, workers=1, per_worker=1,
        resource="gpu", gpu_model=None, nodes=None, argv=["x"], env={}, cwd="/tmp", grace_s=7.0, time_limit_s=None,
        requeue=True, signal=None, dependency=dependency,
    )  # fmt: skip
    seq = int(job_id.split("_")[0]) * 1000 + int(job_id.split("_")[1]) if "_" in job_id else int(job_id)
    return JobRecord(id=job_id, seq=seq, spec=spec, status=JobStatus(submit_time=0.0))


def submit(model: Lifecycle, record: JobRecord, now: float = 1.0, targets: tuple[Target, ...] = ()) -> list[fx.Effect]:
    return model.apply(ev.JobSubmitted(now, record, targets))


def admit(model: Lifecycle, job_id: str, now: float) -> list[fx.Effect]:
    placement = (RankPlacement(0, "n1", (f"GPU-{job_id}",)),)
    return model.apply(
        ev.CycleDecided(now, CycleResult(admitted=(Admit(job_id, placement),), preempted=(), pending=()))
    )


def run(model: Lifecycle, job_id: str, now: float) -> list[fx.Effect]:
    admit(model, job_id, now)
    return model.apply(ev.RankObserved(now, "n1", f"{job_id}.0", 0, RankPhase.RUNNING, pid=100))


def end(model: Lifecycle, job_id: str, now: float, status: int) -> list[fx.Effect]:
    return model.apply(ev.RankObserved(now, "n1", f"{job_id}.0", 0, RankPhase.GONE, exit_status=status))


def requeue(model: Lifecycle, job_id: str, now: float) -> None:
    """Preempt ``job_id`` for a fresh job and let its rank go: it is requeued (a new attempt)."""
    submit(model, job("99", name="preemptor"), now)
    cycle = CycleResult(admitted=(), preempted=(Preempt("99", (job_id,), "test"),), pending=())
    model.apply(ev.CycleDecided(now, cycle))
    model.apply(ev.RankObserved(now, "n1", f"{job_id}.0", 0, RankPhase.GONE, exit_status=143))


def reason(record: JobRecord) -> tuple[str | None, str | None]:
    return record.status.reason_code, record.status.reason_message


def test_afterok_holds_the_job_until_its_target_succeeds() -> None:
    model = Lifecycle(POLICY)
    a, b = job("1"), job("2", "afterok:1")
    submit(model, a)
    out = submit(model, b)
    assert not model.admissible(b, 1.0) and model.admissible(a, 1.0)
    assert reason(b) == ("dependency", "waits for afterok:1 (pending)")
    assert fx.RecordDecision(1.0, "2", fx.DecisionKind.PENDING, "dependency", "waits for afterok:1 (pending)") in out
    assert "dependency afterok:1" in b.history[0].message
    run(model, "1", 2.0)
    assert reason(b) == ("dependency", "waits for afterok:1 (running)")
    assert not model.admissible(b, 2.0)
    out = end(model, "1", 3.0, 0)
    assert model.admissible(b, 3.0) and b.status.dependency_met
    assert reason(b) == (None, None)
    assert fx.WakeScheduler() in out and fx.SaveStatus(b) in out
    assert (b.history[-1].event, b.history[-1].message) == ("dependency-met", "afterok:1 (succeeded)")


def test_a_dependency_that_can_never_hold_cancels_the_job_and_its_own_dependents() -> None:
    model = Lifecycle(POLICY)
    for record in (job("1"), job("2", "afterok:1"), job("3", "afterany:2"), job("4", "afterok:2")):
        submit(model, record)
    c, d = model.jobs["3"], model.jobs["4"]
    run(model, "1", 2.0)
    out = end(model, "1", 3.0, 1)
    cancelled = [e.job.id for e in out if isinstance(e, fx.Finished)]
    assert cancelled == ["1", "2", "4"]  # 2 can never run; 4 waited for 2 to succeed
    assert d.status.state == JobState.CANCELLED
    assert reason(d) == ("dependency_never", "afterok:2 can never be satisfied (cancelled)")
    assert d.history[-1].event == "cancelled"
    assert "3" in model.jobs and model.admissible(c, 3.0)  # afterany: a cancelled job did finish
    assert c.status.dependency_met


def test_afternotok_is_cancelled_when_its_target_succeeds_and_released_when_it_fails() -> None:
    model = Lifecycle(POLICY)
    for record in (job("1"), job("2"), job("3", "afternotok:1"), job("4", "afternotok:2")):
        submit(model, record)
    cleanup_ok, cleanup_fail = model.jobs["3"], model.jobs["4"]
    run(model, "1", 2.0)
    end(model, "1", 3.0, 0)
    assert cleanup_ok.status.state == JobState.CANCELLED
    assert reason(cleanup_ok) == ("dependency_never", "afternotok:1 can never be satisfied (succeeded)")
    model.apply(ev.CancelRequested(4.0, "2", "alice"))
    assert model.admissible(cleanup_fail, 4.0)


def test_after_waits_for_the_start_only() -> None:
    model = Lifecycle(POLICY)
    submit(model, job("1"))
    watcher = job("2", "after:1")
    submit(model, watcher)
    admit(model, "1", 2.0)
    assert not model.admissible(watcher, 2.0)  # admitted is not started
    model.apply(ev.RankObserved(2.5, "n1", "1.0", 0, RankPhase.RUNNING, pid=100))
    assert model.admissible(watcher, 2.5)


def test_singleton_lets_one_job_per_name_and_user_hold_devices() -> None:
    model = Lifecycle(POLICY)
    first, second = job("1", "singleton", name="etl"), job("2", "singleton", name="etl")
    other_user = job("3", "singleton", name="etl", user="bob")
    for record in (first, second, other_user):
        submit(model, record)
    assert model.admissible(first, 1.0) and model.admissible(other_user, 1.0)
    assert not model.admissible(second, 1.0)
    assert reason(second) == ("dependency", "waits for singleton (job 1 of the same name goes first)")
    run(model, "1", 2.0)
    assert reason(second) == ("dependency", "waits for singleton (job 1 of the same name is running)")
    end(model, "1", 3.0, 0)
    assert model.admissible(second, 3.0)
    # a job of that name without singleton holding devices counts too
    plain = job("5", name="etl")
    submit(model, plain)
    third = job("6", "singleton", name="etl")
    submit(model, third)
    run(model, "5", 4.0)
    assert not model.admissible(third, 4.0)


def test_a_cancelled_job_still_stopping_no_longer_holds_a_singleton_job_of_its_name() -> None:
    """Slurm counts a cancelled job no more (CANCELLED while completing is not running): the
    singleton job is released at the cancel, while the cancelled job's ranks still have their grace
    (7 s), and a job of the name stopped for another reason (preempted) still holds it."""
    model = Lifecycle(POLICY)
    running, waiting = job("1", name="etl"), job("2", "singleton", name="etl")
    for record in (running, waiting):
        submit(model, record)
    run(model, "1", 2.0)
    assert reason(waiting) == ("dependency", "waits for singleton (job 1 of the same name is running)")
    effects = model.apply(ev.CancelRequested(3.0, "1", "alice"))
    assert running.status.state == JobState.TERMINATING  # its ranks are still within their grace
    assert any(isinstance(e, fx.Stop) and e.grace == 7.0 for e in effects)
    assert model.admissible(waiting, 3.0) and waiting.status.dependency_met
    assert [(h.time, h.event) for h in waiting.history if h.event == "dependency-met"] == [(3.0, "dependency-met")]
    # a preempted job of the name, stopping with its grace, still holds it
    preempted, other = job("3", name="cmp"), job("4", "singleton", name="cmp")
    for record in (preempted, other):
        submit(model, record, 4.0)
    run(model, "3", 4.0)
    submit(model, job("98", name="preemptor"), 5.0)
    model.apply(ev.CycleDecided(5.0, CycleResult(admitted=(), preempted=(Preempt("98", ("3",), "test"),), pending=())))
    assert preempted.status.state == JobState.TERMINATING
    assert not model.admissible(other, 5.0)
    assert reason(other) == ("dependency", "waits for singleton (job 3 of the same name is terminating)")


def test_an_array_id_waits_for_every_task() -> None:
    model = Lifecycle(POLICY)
    for record in (job("7_0"), job("7_1"), job("8", "afterok:7")):
        submit(model, record)
    after_array = model.jobs["8"]
    run(model, "7_0", 2.0)
    end(model, "7_0", 3.0, 0)
    assert reason(after_array) == ("dependency", "waits for afterok:7 (1 of 2 tasks finished)")
    run(model, "7_1", 4.0)
    end(model, "7_1", 5.0, 0)
    assert model.admissible(after_array, 5.0)


def test_finished_targets_come_from_the_driver() -> None:
    model = Lifecycle(POLICY)
    out = submit(model, job("9", "afterok:3"), targets=(Target("3", JobState.SUCCEEDED, True),))
    assert model.admissible(model.jobs["9"], 1.0)
    assert not any(isinstance(e, fx.RecordDecision) for e in out)
    failed = submit(model, job("10", "afterok:4"), targets=(Target("4", JobState.FAILED, True),))
    assert "10" not in model.jobs and any(isinstance(e, fx.Finished) for e in failed)
    submit(model, job("11", "afterok:5"))  # the driver did not say: the job is unknown
    assert "11" not in model.jobs


def test_a_restarted_model_holds_at_once_and_acts_on_its_first_event() -> None:
    waiting = job("2", "afterok:1")
    waiting.status.reason_code, waiting.status.reason_message = "dependency", "waits for afterok:1 (pending)"
    doomed = job("3", "afterok:4")
    released = job("5", "afterok:1")
    released.status = replace(released.status, dependency_met=True)
    model = Lifecycle(
        POLICY,
        [job("1"), waiting, doomed, released],
        finished=[Target("4", JobState.FAILED, True), Target("99", JobState.SUCCEEDED, True)],
    )
    assert not model.admissible(waiting, 0.0) and not model.admissible(doomed, 0.0)
    assert model.admissible(released, 0.0)  # held once already: not judged again
    assert "99" not in model.finished_targets  # no job names it
    out = model.apply(ev.Tick(1.0, 0.0, frozenset()))
    assert [e.job.id for e in out if isinstance(e, fx.Finished)] == ["3"]
    assert not any(isinstance(e, fx.SaveStatus) and e.job is waiting for e in out)  # its reason did not change


def test_with_kill_invalid_depend_off_the_job_stays_held() -> None:
    model = Lifecycle(replace(POLICY, kill_invalid_depend=False))
    submit(model, job("1"))
    stuck = job("2", "afterok:1")
    submit(model, stuck)
    model.apply(ev.CancelRequested(2.0, "1", "alice"))
    assert stuck.status.state == JobState.PENDING and not model.admissible(stuck, 2.0)
    assert reason(stuck) == ("dependency_never", "afterok:1 can never be satisfied (cancelled)")


def test_a_held_job_can_be_cancelled_and_is_forgotten() -> None:
    model = Lifecycle(POLICY)
    submit(model, job("1"))
    held = job("2", "afterok:1")
    submit(model, held)
    model.apply(ev.CancelRequested(2.0, "2", "alice"))
    assert held.status.state == JobState.CANCELLED and "2" not in model.held
    run(model, "1", 3.0)
    out = end(model, "1", 4.0, 0)
    assert [e.job.id for e in out if isinstance(e, fx.Finished)] == ["1"]
    assert model.finished_targets == {}  # no held job names 1 any more


def test_a_requeued_dependent_is_not_held_again() -> None:
    model = Lifecycle(POLICY)
    submit(model, job("1"))
    b = job("2", "afterok:1")
    submit(model, b)
    run(model, "1", 2.0)
    end(model, "1", 3.0, 0)
    run(model, "2", 4.0)
    requeue(model, "2", 5.0)
    assert b.status.state == JobState.PENDING and model.admissible(b, 5.0)


def test_a_requeued_singleton_job_goes_first_again() -> None:
    model = Lifecycle(POLICY)
    first, second = job("1", "singleton", name="etl"), job("2", "singleton", name="etl")
    submit(model, first)
    submit(model, second)
    run(model, "1", 2.0)
    requeue(model, "1", 3.0)
    assert first.status.state == JobState.PENDING and model.admissible(first, 3.0)
    assert reason(second) == ("dependency", "waits for singleton (job 1 of the same name goes first)")


def test_a_sweep_waiting_for_one_job_is_judged_once_per_change_and_not_rewritten() -> None:
    model = Lifecycle(POLICY)
    submit(model, job("1"))
    sweep = [job(str(i), "afterok:1") for i in range(2, 52)]
    for record in sweep:
        submit(model, record)
    out = run(model, "1", 2.0)
    assert all(reason(r) == ("dependency", "waits for afterok:1 (running)") for r in sweep)
    assert not any(isinstance(e, fx.SaveStatus) and e.job in sweep for e in out)  # same reason: memory only
    out = model.apply(ev.RankObserved(2.5, "n1", "1.0", 0, RankPhase.RUNNING, pid=100))
    assert out == []  # nothing changed for anyone
    out = end(model, "1", 3.0, 0)
    assert sum(isinstance(e, fx.SaveStatus) and e.job in sweep for e in out) == len(sweep)
    assert all(model.admissible(r, 3.0) for r in sweep)


def test_a_report_that_changes_nothing_runs_no_rule_for_nothing(monkeypatch) -> None:
    """An agent's report that repeats what is known (the usual one) dates no history line and
    looks up no dependent, held ones waiting or not; a report that does change a job still
    releases its dependents (bench/dependencies.py's "unrelated event")."""
    model = Lifecycle(POLICY)
    submit(model, job("1"))
    sweep = [job(str(i), "afterok:1") for i in range(2, 12)]
    for record in sweep:
        submit(model, record)
    run(model, "1", 2.0)
    calls: list[str] = []
    for part, name in ((model._deps, "_affected"), (model._fences, "fence_time"), (model._gang, "heard_late")):
        original = getattr(part, name)

        def spied(*args: object, _name: str = name, _original=original) -> object:
            calls.append(_name)
            return _original(*args)

        monkeypatch.setattr(part, name, spied)
    assert model.apply(ev.RankObserved(2.5, "n1", "1.0", 0, RankPhase.RUNNING, pid=100)) == []
    assert calls == []
    out = end(model, "1", 3.0, 0)
    assert "_affected" in calls and all(model.admissible(r, 3.0) for r in sweep)
    assert sum(isinstance(e, fx.SaveStatus) and e.job in sweep for e in out) == len(sweep)


def spy_lookups(monkeypatch, model: Lifecycle) -> list[str]:
    """The ids of the changed jobs each later look-up of dependents (``_affected``) was asked about."""
    calls: list[str] = []
    original = model._deps._affected

    def spied(changed: Iterable[JobRecord]) -> set[str]:
        changed = list(changed)
        calls.extend(j.id for j in changed)
        return original(changed)

    monkeypatch.setattr(model._deps, "_affected", spied)
    return calls


def test_a_submission_among_jobs_without_dependencies_looks_up_no_dependent(monkeypatch) -> None:
    """A plain submission while no job has a dependency (a replay's usual case, the bench's plain
    submission) looks up no dependent; a job that is the first dependent is still judged at its
    own submission (an ``afterok`` and a ``singleton`` one held), is released when its target
    succeeds, and once there are dependents a plain submission is looked up again."""
    model = Lifecycle(POLICY)
    calls = spy_lookups(monkeypatch, model)
    for record in (job("1"), job("2", name="solo")):
        submit(model, record)
    assert calls == [] and not model.held
    sweep = job("3", "afterok:1")
    submit(model, sweep)
    assert calls == ["3"] and reason(sweep) == ("dependency", "waits for afterok:1 (pending)")
    assert not model.admissible(sweep, 1.0)
    submit(model, job("5"))
    assert calls == ["3", "5"]  # a dependent exists: the new job is looked up
    run(model, "1", 2.0)
    end(model, "1", 3.0, 0)
    assert model.admissible(sweep, 3.0) and "3" not in model.held

    model = Lifecycle(POLICY)
    calls = spy_lookups(monkeypatch, model)
    submit(model, job("2", name="solo"))
    solo = job("4", "singleton", name="solo")
    submit(model, solo)
    assert calls == ["4"] and not model.admissible(solo, 1.0)
    assert reason(solo) == ("dependency", "waits for singleton (job 2 of the same name is pending and goes first)")


def test_a_stored_dependency_that_no_longer_parses_never_holds() -> None:
    model = Lifecycle(POLICY, [job("1"), job("2", "afterwards:1")])
    out = model.apply(ev.Tick(1.0, 0.0, frozenset()))
    assert [e.job.id for e in out if isinstance(e, fx.Finished)] == ["2"]
    assert model.jobs["1"].status.state == JobState.PENDING
    cancelled = next(e.job for e in out if isinstance(e, fx.Finished))
    assert reason(cancelled) == ("dependency_never", "the stored dependency 'afterwards:1' does not parse")


def test_any_of_over_one_type_survives_the_stored_text() -> None:
    # The spec stores the canonical text and the model parses it again: `?` must stay any-of.
    model = Lifecycle(POLICY)
    for record in (job("1"), job("2"), job("3"), job("4")):
        submit(model, record)
    stored = parse_dependency("afterok:1?afterok:2").text
    assert stored == "afterok:1?afterok:2"
    waits, starts = job("5", stored), job("6", parse_dependency("afterok:3?afterok:4").text)
    submit(model, waits)
    submit(model, starts)
    run(model, "1", 2.0)
    end(model, "1", 3.0, 1)
    run(model, "2", 3.0)
    assert waits.status.state == JobState.PENDING  # 1 failed, 2 may still succeed
    assert reason(waits) == ("dependency", "waits for afterok:2 (running)")
    run(model, "3", 4.0)
    end(model, "3", 5.0, 0)
    assert model.admissible(starts, 5.0)  # 3 succeeded: enough, 4 is still pending


def test_a_requeued_job_of_the_name_goes_first_and_the_history_stays_true() -> None:
    model = Lifecycle(POLICY)
    a, b = job("1", name="solo"), job("2", "singleton", name="solo")
    submit(model, a)
    submit(model, b)
    run(model, "1", 2.0)
    requeue(model, "1", 3.0)
    assert a.status.state == JobState.PENDING
    assert not model.admissible(b, 10.0)
    assert reason(b) == ("dependency", "waits for singleton (job 1 of the same name is pending and goes first)")
    assert [h.event for h in b.history].count("dependency-met") == 0
    admit(model, "1", 10.0)
    model.apply(ev.RankObserved(10.0, "n1", a.run_id, 0, RankPhase.RUNNING, pid=101))  # its second attempt
    assert reason(b) == ("dependency", "waits for singleton (job 1 of the same name is running)")
    assert not model.admissible(b, 10.0)
    model.apply(ev.RankObserved(11.0, "n1", a.run_id, 0, RankPhase.GONE, exit_status=0))
    assert model.admissible(b, 11.0)
    assert [h.event for h in b.history].count("dependency-met") == 1
    run(model, "2", 12.0)
    requeue(model, "2", 13.0)  # its turn again: no second dependency-met line
    assert model.admissible(b, 20.0) and [h.event for h in b.history].count("dependency-met") == 1


def test_a_released_singleton_job_and_a_later_job_of_its_name_are_not_offered_together() -> None:
    model = Lifecycle(POLICY)
    b, c = job("2", "singleton", name="solo"), job("3", name="solo")
    submit(model, b)
    submit(model, c)
    assert model.admissible(b, 1.0) and not model.admissible(c, 1.0)
    run(model, "2", 2.0)
    assert model.admissible(c, 2.0)  # Slurm: only the singleton job itself waits for others


def test_after_a_restart_requeued_tasks_of_the_name_go_before_a_singleton_job() -> None:
    tasks = [job(f"7_{i}", name="cmp") for i in range(3)]
    single = replace(job("8", "singleton", name="cmp"), seq=8000)  # after the array's tasks
    for task in tasks:  # running before the restart, requeued by the shutdown
        task.status.restart_count = 1
    model = Lifecycle(POLICY, [*tasks, single])
    assert all(model.admissible(t, 1.0) for t in tasks)
    assert not model.admissible(single, 1.0)
