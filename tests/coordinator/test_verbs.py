"""scontrol's verbs in the coordinator (hold, release, requeue, update), on a fake clock with a real
SQLite store: owner/admin rules as for cancel, refusals that change nothing, a history event for
each, held jobs never admitted by a real scheduling cycle, requeue of a running job through the
lifecycle (grace, then pending with restart + 1), and updates that persist."""

from __future__ import annotations

from pathlib import Path

import pytest
from labgang.launcher.config.cluster import parse_config
from labgang.launcher.coordinator import verbs
from labgang.launcher.coordinator.core import Coordinator
from labgang.launcher.coordinator.errors import BadRequest, Conflict, Forbidden, NotFound
from labgang.launcher.coordinator.requests import Caller
from labgang.launcher.coordinator.scheduling import build_snapshot
from labgang.launcher.coordinator.store import Store
from labgang.launcher.coordinator.verbs import hold, release, requeue
from labgang.launcher.lifecycle.effects import Stop
from labgang.launcher.model import JobState
from labgang.launcher.scheduler.cycle import run_cycle
from lifecycle_driver import ROOT, Clock, advance, event, make_coord, node_inventory, start

ALICE = Caller(uid=1000, user="alice")
BOB = Caller(uid=1001, user="bob")


@pytest.fixture
def coord(tmp_path: Path):
    yield from make_coord(tmp_path)


async def submit_as(coord: Coordinator, caller: Caller, **fields) -> str:
    job = await coord.desk.submit(caller, {"argv": ["train"], "workers": 2, "gpus_per_worker": 4, **fields})
    return job.id


async def update(coord: Coordinator, caller: Caller, job_id: str, body: object):
    """``verbs.update`` handed the coordinator's parts, as the ``POST /v1/jobs/{id}/update`` handler does."""
    return await verbs.update(
        coord.desk,
        caller,
        job_id,
        body,
        config=coord.config,
        store=coord.store,
        active=coord.model.jobs,
        recent=coord.recent,
    )


def events(coord: Coordinator, job_id: str) -> list[str]:
    return [h.event for h in coord.jobs[job_id].history]


async def with_inventories(coord: Coordinator) -> None:
    for node in ("n1", "n2"):
        await coord.node_events.on_inventory(
            coord.agents.nodes[node], {"inventory": node_inventory(node, {}), "ranks": []}
        )


async def test_a_held_job_is_never_admitted_and_a_released_one_is(coord: Coordinator) -> None:
    await with_inventories(coord)
    job_id = await submit_as(coord, ALICE)
    await hold(coord.desk, ALICE, job_id)
    st = coord.jobs[job_id].status
    assert (st.hold, st.reason_code) == ("alice", "held")
    result = run_cycle(build_snapshot(coord.driver, coord.clock()))
    assert result.admitted == ()
    [pending] = result.pending
    assert (pending.job_id, pending.reason.code.value) == (job_id, "held")
    assert f"labgang release {job_id}" in pending.reason.message
    await release(coord.desk, ALICE, job_id)
    assert coord.jobs[job_id].status.hold is None
    assert [a.job_id for a in run_cycle(build_snapshot(coord.driver, coord.clock())).admitted] == [job_id]
    assert events(coord, job_id) == ["submitted", "held", "released"]


async def test_a_held_head_does_not_block_the_job_behind_it(coord: Coordinator) -> None:
    await with_inventories(coord)
    first = await submit_as(coord, ALICE)
    second = await submit_as(coord, ALICE)
    await hold(coord.desk, ALICE, first)
    result = run_cycle(build_snapshot(coord.driver, coord.clock()))
    assert [a.job_id for a in result.admitted] == [second]


async def test_submit_hold_holds_every_task_and_is_saved(coord: Coordinator, tmp_path: Path) -> None:
    job_id = await submit_as(coord, ALICE, hold=True)
    arr = await coord.desk.submit(ALICE, {"argv": ["x"], "array": "0-2", "hold": True})
    tasks = [j for j in coord.jobs.values() if j.spec.array is not None]
    assert len(tasks) == 3 and all(t.status.hold == "alice" for t in tasks)
    assert arr.spec.array is not None
    assert events(coord, job_id) == ["submitted", "held"]
    stored = Store(tmp_path / "db").load_job(job_id)
    assert stored is not None and stored.status.hold == "alice"


async def test_owner_or_admin_rules_and_refusals_change_nothing(coord: Coordinator) -> None:
    job_id = await submit_as(coord, ALICE)
    with pytest.raises(Forbidden, match="belongs to alice"):
        await hold(coord.desk, BOB, job_id)
    with pytest.raises(Conflict, match="not held: nothing to release"):
        await release(coord.desk, ALICE, job_id)
    with pytest.raises(Conflict, match="only an admitted or running job can be requeued"):
        await requeue(coord.desk, ALICE, job_id, None)
    with pytest.raises(NotFound):
        await hold(coord.desk, ALICE, "999")
    assert coord.jobs[job_id].status.hold is None
    assert events(coord, job_id) == ["submitted"]


async def test_an_admin_hold_is_released_only_by_an_admin(coord: Coordinator) -> None:
    job_id = await submit_as(coord, ALICE)
    await hold(coord.desk, ROOT, job_id)
    assert coord.jobs[job_id].status.hold_admin
    with pytest.raises(Forbidden, match="only an admin may release it"):
        await release(coord.desk, ALICE, job_id)
    assert coord.jobs[job_id].status.hold == "root"
    await release(coord.desk, ROOT, job_id)
    assert coord.jobs[job_id].status.hold is None


async def test_a_running_job_cannot_be_held_but_can_be_requeued_with_grace(coord: Coordinator) -> None:
    job_id = await submit_as(coord, ALICE, grace_s=7)
    start(coord, job_id)
    with pytest.raises(Conflict, match="requeue --hold"):
        await hold(coord.desk, ALICE, job_id)
    await requeue(coord.desk, ALICE, job_id, None)
    job = coord.jobs[job_id]
    assert job.status.state == JobState.TERMINATING
    assert job.status.reason_code == "requeue_requested"
    for node, rank in (("n1", 0), ("n2", 1)):
        event(coord, node, job_id, rank, "exited", 143)
        event(coord, node, job_id, rank, "gone", 143)
    st = coord.jobs[job_id].status
    assert (st.state, st.restart_count, st.attempt) == (JobState.PENDING, 1, 1)
    history = coord.jobs[job_id].history
    stopping = next(h for h in history if h.event == "stopping")
    assert stopping.message.startswith("requeue requested by alice")
    assert history[-1].event == "requeued" and "restart 1" in history[-1].message


async def test_requeue_stops_each_node_with_the_jobs_grace(coord: Coordinator) -> None:
    from labgang.launcher.lifecycle import events as ev

    job_id = await submit_as(coord, ALICE, grace_s=7)
    start(coord, job_id)
    out = coord.model.apply(ev.RequeueRequested(coord.clock(), job_id, "alice"))
    stops = sorted((e.node, e.grace) for e in out if isinstance(e, Stop))
    assert stops == [("n1", 7.0), ("n2", 7.0)]


async def test_requeue_hold_comes_back_held_even_without_requeue(coord: Coordinator) -> None:
    job_id = await submit_as(coord, ALICE, requeue=False)
    start(coord, job_id)
    await requeue(coord.desk, ALICE, job_id, {"hold": True})
    for node, rank in (("n1", 0), ("n2", 1)):
        event(coord, node, job_id, rank, "gone", 143)
    st = coord.jobs[job_id].status
    assert (st.state, st.hold, st.reason_code) == (JobState.PENDING, "alice", "held")
    with pytest.raises(BadRequest, match="unknown field 'later'"):
        await requeue(coord.desk, ALICE, job_id, {"later": True})


async def test_a_requeued_job_whose_ranks_all_exit_0_meanwhile_has_finished(coord: Coordinator) -> None:
    job_id = await submit_as(coord, ALICE)
    start(coord, job_id)
    await requeue(coord.desk, ALICE, job_id, None)
    for node, rank in (("n1", 0), ("n2", 1)):
        event(coord, node, job_id, rank, "exited", 0)
        event(coord, node, job_id, rank, "gone", 0)
    assert coord.jobs[job_id].status.state == JobState.SUCCEEDED


async def test_update_priority_users_lower_admins_any(coord: Coordinator, tmp_path: Path) -> None:
    job_id = await submit_as(
        coord, ALICE, priority=-1
    )  # a user may lower their own job (launcher/coordinator/policy.py)
    with pytest.raises(Forbidden, match="only an admin may raise it"):
        await update(coord, ALICE, job_id, {"priority": 0})
    assert coord.jobs[job_id].spec.priority == -1
    await update(coord, ALICE, job_id, {"priority": -5})
    await update(coord, ROOT, job_id, {"priority": 100})
    assert coord.jobs[job_id].spec.priority == 100
    assert coord.jobs[job_id].history[-1].message == "by root: priority -5 -> 100"
    stored = Store(tmp_path / "db").load_job(job_id)
    assert stored is not None and stored.spec.priority == 100
    assert run_cycle(build_snapshot(coord.driver, coord.clock())).pending[0].job_id == job_id  # the snapshot reads it


async def test_update_refuses_json_true_as_a_number(coord: Coordinator) -> None:
    job_id = await submit_as(coord, ALICE, priority=-1)
    for field in ("priority", "time_limit_s"):
        with pytest.raises(BadRequest, match=field):
            await update(coord, ALICE, job_id, {field: True})
    assert coord.jobs[job_id].spec.priority == -1 and coord.jobs[job_id].spec.time_limit_s is None


async def test_update_priority_follows_the_queues_priority_classes(tmp_path: Path) -> None:
    config = parse_config(
        {
            "priority_classes": {"low": -10, "normal": 0, "high": 100},
            "queues": [
                {"name": "default", "nominal": {"gpu": 8}, "priority_classes": ["low", "normal"]},
            ],
        }
    )
    coord = Coordinator(config, Store(tmp_path / "db"), clock=Clock())
    try:
        job_id = (await coord.desk.submit(ALICE, {"argv": ["train"], "priority": "normal"})).id
        for refused in ("high", 50):  # a class the queue does not list; a raw number above its default
            with pytest.raises(Forbidden, match="priority") as said:
                await update(coord, ALICE, job_id, {"priority": refused})
            # a new user's finding: `Priority=100` offered "high (100)" among the classes to use, and
            # `Priority=high` was then refused as a raise; both are refused as a raise now
            number = 100 if refused == "high" else refused
            assert said.value.message.startswith(f"priority {number} is above job {job_id}'s 0"), said.value.message
            assert "high (100)" not in said.value.message
        assert coord.jobs[job_id].spec.priority == 0
        assert [h.event for h in coord.jobs[job_id].history] == ["submitted"]
        await update(coord, ALICE, job_id, {"priority": "low"})
        assert coord.jobs[job_id].spec.priority == -10
        await update(coord, ROOT, job_id, {"priority": "high"})  # admins may use any class
        assert coord.jobs[job_id].spec.priority == 100
    finally:
        coord.store.close()


async def test_update_time_limit_down_for_users_up_for_admins(coord: Coordinator) -> None:
    job_id = await submit_as(coord, ALICE, time_limit_s=3600)
    with pytest.raises(Forbidden, match="only an admin may extend") as refused:
        await update(coord, ALICE, job_id, {"time_limit_s": 7200})
    assert f"would raise job {job_id}'s current limit of 3600 s" in refused.value.message
    await update(coord, ALICE, job_id, {"time_limit_s": 60})
    start(coord, job_id)
    advance(coord, 61)
    coord.node_events.check_timers()
    assert coord.jobs[job_id].status.state == JobState.TERMINATING  # the new, shorter limit applies
    await update(coord, ROOT, job_id, {"time_limit_s": 7200})
    assert coord.jobs[job_id].spec.time_limit_s == 7200
    unlimited = await submit_as(coord, ALICE)
    await update(coord, ALICE, unlimited, {"time_limit_s": 300})  # a first limit shortens an unlimited job
    assert coord.jobs[unlimited].spec.time_limit_s == 300


async def test_update_lifts_a_time_limit_for_admins_only(coord: Coordinator) -> None:
    job_id = await submit_as(coord, ALICE, time_limit_s=3600)
    with pytest.raises(
        Forbidden, match=r"would lift job \S+'s current limit of 3600 s: only an admin may lift a time limit"
    ):
        await update(coord, ALICE, job_id, {"time_limit_s": None})
    assert coord.jobs[job_id].spec.time_limit_s == 3600 and events(coord, job_id).count("updated") == 0
    await update(coord, ROOT, job_id, {"time_limit_s": None})  # TimeLimit=UNLIMITED (or 0)
    assert coord.jobs[job_id].spec.time_limit_s is None
    updated = [h.message for h in coord.jobs[job_id].history if h.event == "updated"]
    assert updated == ["by root: time limit 3600 s -> none"]
    unlimited = await submit_as(coord, ALICE)
    await update(coord, ALICE, unlimited, {"time_limit_s": None})  # already none: nothing to lift
    assert coord.jobs[unlimited].spec.time_limit_s is None


async def test_update_name_and_dependency(coord: Coordinator) -> None:
    first = await submit_as(coord, ALICE)
    job_id = await submit_as(coord, ALICE, name="a")
    await update(coord, ALICE, job_id, {"name": "b", "dependency": f"afterok:{first}"})
    job = coord.jobs[job_id]
    assert (job.spec.name, job.spec.dependency, job.status.reason_code) == ("b", f"afterok:{first}", "dependency")
    assert not coord.model.admissible(job, coord.clock())
    with pytest.raises(NotFound, match="no job 777"):
        await update(coord, ALICE, job_id, {"dependency": "afterok:777"})
    with pytest.raises(BadRequest, match="dependency"):
        await update(coord, ALICE, job_id, {"dependency": "afterfoo:1"})
    with pytest.raises(BadRequest, match="cannot depend on itself"):
        await update(coord, ALICE, job_id, {"dependency": f"afterok:{job_id}"})
    await update(coord, ALICE, job_id, {"dependency": ""})
    job = coord.jobs[job_id]
    assert job.spec.dependency is None and job.status.reason_code is None
    assert coord.model.admissible(job, coord.clock())


async def test_update_refuses_bad_fields_and_finished_jobs(coord: Coordinator) -> None:
    job_id = await submit_as(coord, ALICE)
    with pytest.raises(BadRequest, match="unknown field 'gpus'"):
        await update(coord, ALICE, job_id, {"gpus": 2})
    with pytest.raises(BadRequest, match="nothing to update"):
        await update(coord, ALICE, job_id, {})
    with pytest.raises(BadRequest, match="time_limit_s: must be > 0 seconds"):
        await update(coord, ALICE, job_id, {"time_limit_s": 0})
    start(coord, job_id)
    with pytest.raises(Conflict, match="only be changed while the job is pending"):
        await update(coord, ALICE, job_id, {"dependency": "singleton"})
    await coord.desk.cancel(ALICE, job_id)
    for node, rank in (("n1", 0), ("n2", 1)):
        event(coord, node, job_id, rank, "gone", 143)
    with pytest.raises(Conflict, match="a finished job cannot be updated"):
        await update(coord, ROOT, job_id, {"name": "z"})
    assert events(coord, job_id).count("updated") == 0


async def test_an_update_that_would_close_a_dependency_cycle_is_refused_and_changes_nothing(coord: Coordinator) -> None:
    first = await submit_as(coord, ALICE)
    second = await submit_as(coord, ALICE, dependency=f"afterok:{first}")
    third = await submit_as(coord, ALICE, dependency=f"afterany:{second}")
    for text in (f"afterok:{third}", f"afterok:{second}", f"after:{third}?afterok:{second}"):
        with pytest.raises(BadRequest, match=rf"would make job {first} wait for itself"):
            await update(coord, ALICE, first, {"dependency": text})
    assert coord.jobs[first].spec.dependency is None and events(coord, first) == ["submitted"]
    other = await submit_as(coord, ALICE)
    await update(coord, ALICE, first, {"dependency": f"afterok:{other}"})  # no cycle: allowed
    assert coord.jobs[first].spec.dependency == f"afterok:{other}"


async def test_a_job_number_beyond_64_bits_is_no_job_for_every_verb(coord: Coordinator) -> None:
    huge = "99999999999999999999"
    with pytest.raises(NotFound):
        coord.desk.get_job(huge)
    for verb, args in ((hold, ()), (release, ()), (requeue, ({},))):
        with pytest.raises(NotFound):
            await verb(coord.desk, ALICE, huge, *args)
    with pytest.raises(NotFound):
        await update(coord, ALICE, huge, {"name": "x"})
