"""Job arrays in the coordinator (docs/arrays.md): one submission, one commit, one task per index;
the %N cap and the window as scheduling rules; cancel by array id; a restart keeps it all.

A real coordinator object with a real SQLite store and a simulated 4-GPU node's inventory;
cycles are the real ``run_cycles`` (agents are registry records, no processes).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from labgang.agent.inventory import NodeInventory, read_inventory
from labgang.agent.nvml.machine import machine_from_toml
from labgang.agent.nvml.simulated import SimulatedNvml
from labgang.agent.supervisor.environment import rank_environment
from labgang.agent.supervisor.identity import RunAs
from labgang.agent.supervisor.spec import LaunchSpec
from labgang.launcher.config.cluster import parse_config
from labgang.launcher.coordinator import arrays as arrays_api
from labgang.launcher.coordinator.core import Coordinator
from labgang.launcher.coordinator.dispatch import launch_specs
from labgang.launcher.coordinator.errors import BadRequest, Forbidden, NotFound
from labgang.launcher.coordinator.requests import Caller
from labgang.launcher.coordinator.scheduling import run_cycles
from labgang.launcher.coordinator.store import Store
from labgang.launcher.model import JobState

ALICE = Caller(uid=1000, user="alice")
BOB = Caller(uid=1001, user="bob")
SIM = Path(__file__).resolve().parents[2] / "config" / "sim"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _coordinator(path: Path, **config: object) -> Coordinator:
    cfg = parse_config({"queues": [{"name": "default", "nominal": {"gpu": 8}}], **config})
    coord = Coordinator(cfg, Store(path), clock=Clock())
    backend = SimulatedNvml(machine_from_toml((SIM / "n1-4gpu.toml").read_text(), "n1-4gpu"), scan_processes=False)
    backend.nvmlInit()
    coord.agents.join("n1", coord.clock(), NodeInventory.from_dict(read_inventory(backend, hostname="n1").to_dict()))
    return coord


@pytest.fixture
def coord(tmp_path: Path):
    c = _coordinator(tmp_path / "db")
    yield c
    c.store.close()


async def _array(coord: Coordinator, spec: str, caller: Caller = ALICE, **fields: object) -> str:
    job = await coord.desk.submit(caller, {"argv": ["sweep.sh"], "array": spec, **fields})
    assert job.spec.array is not None
    return job.spec.array.array_id


def _state(coord: Coordinator, job_id: str) -> JobState:
    return coord.desk.get_job(job_id).status.state


def _finish(coord: Coordinator, job_id: str, kinds: tuple[str, ...] = ("started", "exited", "gone")) -> None:
    """Every rank of ``job_id`` starts, exits 0 and is gone (or only goes through ``kinds``)."""
    job = coord.jobs[job_id]
    for rank in list(job.ranks.values()):
        for kind in kinds:
            event = {"job_id": job.run_id, "rank": rank.rank, "kind": kind, "exit_status": 0, "time": coord.clock()}
            coord.node_events.apply_rank_event(rank.node, event)


async def test_one_submission_is_one_commit_and_one_job_per_index(coord: Coordinator) -> None:
    before = coord.store.commits
    array_id = await _array(coord, "1,3,5-9")
    assert coord.store.commits == before + 1
    ids = [f"{array_id}_{i}" for i in (1, 3, 5, 6, 7, 8, 9)]
    assert [j.id for j in list(coord.desk.list_jobs(ALICE))] == ids
    task = coord.jobs[f"{array_id}_7"].spec.array
    assert task is not None
    assert (task.index, task.count, task.low, task.high, task.limit) == (7, 7, 1, 9, None)
    # the next job's id comes after the array's sequence numbers, as with Slurm
    plain = await coord.desk.submit(ALICE, {"argv": ["x"]})
    assert plain.id == str(int(array_id) + 7)


async def test_bad_array_spec_names_the_part_and_nothing_is_recorded(coord: Coordinator) -> None:
    below = r'^array: "5-2": end below start \(a range is START-END with START <= END, e.g. 2-5\)$'
    with pytest.raises(BadRequest, match=below):
        await _array(coord, "0,5-2")
    with pytest.raises(BadRequest, match=r"index 20000 is over the largest allowed, 10000 \(limits.max_array_size\)"):
        await _array(coord, "0-20000")
    assert list(coord.desk.list_jobs(ALICE)) == [] and coord.store.count_jobs() == 0


async def test_max_array_size_comes_from_limits(tmp_path: Path) -> None:
    c = _coordinator(tmp_path / "db", limits={"max_array_size": 4})
    with pytest.raises(BadRequest, match=r'"0-4": index 4 is over the largest allowed, 3'):
        await _array(c, "0-4")
    assert len(list(c.desk.list_jobs(ALICE))) == 0
    await _array(c, "0-3")
    assert len(list(c.desk.list_jobs(ALICE))) == 4
    c.store.close()


async def test_the_cap_admits_at_most_n_tasks_and_says_why_the_rest_wait(coord: Coordinator) -> None:
    array_id = await _array(coord, "0-5%2")
    run_cycles(coord.driver, coord.admissions)
    states = {j.id: j.status.state for j in list(coord.desk.list_jobs(ALICE))}
    assert [i for i, s in states.items() if s == JobState.ADMITTED] == [f"{array_id}_0", f"{array_id}_1"]
    waiting = coord.jobs[f"{array_id}_4"].status
    assert waiting.reason_code == "array_limit"
    assert waiting.reason_message == f"array {array_id} runs at most 2 tasks at once (%2)"
    # 4 GPUs, 2 free, yet no third task: the cap, not capacity, holds it back
    _finish(coord, f"{array_id}_0")
    assert _state(coord, f"{array_id}_0") == JobState.SUCCEEDED
    run_cycles(coord.driver, coord.admissions)
    assert _state(coord, f"{array_id}_2") == JobState.ADMITTED
    assert _state(coord, f"{array_id}_3") == JobState.PENDING


async def test_tasks_are_ordinary_jobs_to_quota_and_capacity(coord: Coordinator) -> None:
    """No cap: as many tasks start as the node holds; the rest wait for capacity, with the
    reason the scheduler gave the first task that did not fit (the window)."""
    array_id = await _array(coord, "0-99", gpus_per_worker=2)
    run_cycles(coord.driver, coord.admissions)
    admitted = [j.id for j in list(coord.desk.list_jobs(ALICE)) if j.status.state == JobState.ADMITTED]
    assert admitted == [f"{array_id}_0", f"{array_id}_1"]
    first_waiting = coord.jobs[f"{array_id}_2"].status
    assert first_waiting.reason_code in ("no_capacity", "over_quota")
    last = coord.jobs[f"{array_id}_99"].status
    assert (last.reason_code, last.reason_message) == (first_waiting.reason_code, first_waiting.reason_message)


async def test_a_higher_priority_job_preempts_a_task(tmp_path: Path) -> None:
    c = _coordinator(
        tmp_path / "db",
        queues=[{"name": "default", "nominal": {"gpu": 8}, "within_queue": "lower-priority"}],
        priority_classes={"urgent": 10},  # a raw number is for admins only (launcher/coordinator/policy.py)
    )
    array_id = await _array(c, "0-3", gpus_per_worker=1)
    run_cycles(c.driver, c.admissions)
    assert all(j.status.state == JobState.ADMITTED for j in list(c.desk.list_jobs(ALICE)))
    urgent = await c.desk.submit(ALICE, {"argv": ["urgent"], "priority": "urgent"})
    assert urgent.spec.priority == 10
    run_cycles(c.driver, c.admissions)
    assert c.jobs[urgent.id].status.state == JobState.ADMITTED
    # the newest-admitted task of equal priority was the victim: requeued (it never ran), pending again
    victim = c.jobs[f"{array_id}_3"]
    assert victim.status.state == JobState.PENDING
    assert [h.event for h in victim.history][-2:] == ["stopping", "requeued"]
    assert f"preempted by job {urgent.id}" in victim.history[-1].message
    c.store.close()


async def test_each_task_gets_the_array_variables_in_both_names(coord: Coordinator) -> None:
    array_id = await _array(coord, "0-20:4")
    run_cycles(coord.driver, coord.admissions)
    job = coord.jobs[f"{array_id}_8"]
    assert job.status.state == JobState.ADMITTED
    [launch] = launch_specs(job, "n1")
    assert launch.master_port is None  # the agent of rank 0 picks it at launch
    env = rank_environment(
        LaunchSpec.from_dict(launch.to_dict()).with_master_port(29500),
        RunAs(uid=1000, gid=1000, groups=(1000,), name="alice", home="/home/alice", drop_privileges=False),
    )
    expected = {"JOB_ID": array_id, "TASK_ID": "8", "TASK_COUNT": "6", "TASK_MIN": "0", "TASK_MAX": "20"}
    for name, value in expected.items():
        assert env[f"LABGANG_ARRAY_{name}"] == value
        assert env[f"SLURM_ARRAY_{name}"] == value
    assert env["SLURM_ARRAY_TASK_STEP"] == "4"
    assert env["LABGANG_JOB_ID"] == f"{array_id}_8"


async def test_cancel_by_array_id_cancels_every_task_and_by_task_id_one(coord: Coordinator) -> None:
    array_id = await _array(coord, "0-4%1")
    run_cycles(coord.driver, coord.admissions)
    _finish(coord, f"{array_id}_0", ("started",))
    await coord.desk.cancel(ALICE, f"{array_id}_3")
    assert _state(coord, f"{array_id}_3") == JobState.CANCELLED
    assert _state(coord, f"{array_id}_4") == JobState.PENDING
    with pytest.raises(Forbidden):
        await arrays_api.cancel_array(coord.desk, coord.store, coord.jobs, coord.model.jobs, BOB, array_id)
    assert _state(coord, f"{array_id}_4") == JobState.PENDING  # nothing cancelled by the refusal
    jobs, finished = await arrays_api.cancel_array(
        coord.desk, coord.store, coord.jobs, coord.model.jobs, ALICE, array_id
    )
    assert finished == 1 and {j.id for j in jobs} == {f"{array_id}_{i}" for i in (0, 1, 2, 4)}
    assert _state(coord, f"{array_id}_0") == JobState.TERMINATING  # running: stopped with its grace
    assert all(_state(coord, f"{array_id}_{i}") == JobState.CANCELLED for i in (1, 2, 4))
    with pytest.raises(NotFound, match="no job array 999"):
        await arrays_api.cancel_array(coord.desk, coord.store, coord.jobs, coord.model.jobs, ALICE, "999")


async def test_show_of_an_array_id_names_its_tasks(coord: Coordinator) -> None:
    array_id = await _array(coord, "0-2,7")
    with pytest.raises(NotFound, match=rf"{array_id} is a job array with tasks {array_id}_\[0-2,7\]"):
        coord.desk.get_job(array_id)


async def test_an_unknown_task_of_an_array_is_named_once_with_the_tasks_it_has(coord: Coordinator) -> None:
    array_id = await _array(coord, "0-2,7")
    with pytest.raises(NotFound) as info:
        coord.desk.get_job(f"{array_id}_99")
    assert info.value.message == f"no job {array_id}_99 (job array {array_id} has tasks {array_id}_[0-2,7])"
    with pytest.raises(NotFound) as info:
        coord.desk.get_job("999_1")
    assert info.value.message == "no job 999_1"


async def test_arrays_survive_a_coordinator_restart(tmp_path: Path) -> None:
    first = _coordinator(tmp_path / "db")
    array_id = await _array(first, "0-5%2")
    run_cycles(first.driver, first.admissions)
    await first.flush()
    first.store.close()

    again = _coordinator(tmp_path / "db")
    tasks = list(again.desk.list_jobs(ALICE))
    assert [j.id for j in tasks] == [f"{array_id}_{i}" for i in range(6)]
    task = tasks[3].spec.array
    assert task is not None and (task.array_id, task.index, task.limit) == (array_id, 3, 2)
    assert [j.status.state for j in tasks[:2]] == [JobState.ADMITTED] * 2
    run_cycles(again.driver, again.admissions)  # still capped at 2 after the restart
    assert sum(j.status.state == JobState.ADMITTED for j in list(again.desk.list_jobs(ALICE))) == 2
    assert again.jobs[f"{array_id}_5"].status.reason_code == "array_limit"
    jobs, _ = await arrays_api.cancel_array(again.desk, again.store, again.jobs, again.model.jobs, ALICE, array_id)
    assert len(jobs) == 6
    again.store.close()


async def test_a_dependency_on_an_array_id_waits_for_every_task(coord: Coordinator) -> None:
    array_id = await _array(coord, "0-1")
    after = await coord.desk.submit(ALICE, {"argv": ["merge.sh"], "dependency": f"afterok:{array_id}"})
    run_cycles(coord.driver, coord.admissions)
    assert [_state(coord, f"{array_id}_{i}") for i in (0, 1)] == [JobState.ADMITTED] * 2
    assert _state(coord, after.id) == JobState.PENDING
    _finish(coord, f"{array_id}_0")
    run_cycles(coord.driver, coord.admissions)
    assert _state(coord, after.id) == JobState.PENDING  # task 1 still runs
    _finish(coord, f"{array_id}_1")
    run_cycles(coord.driver, coord.admissions)
    assert _state(coord, after.id) == JobState.ADMITTED


async def test_an_array_with_a_dependency_holds_every_task(coord: Coordinator) -> None:
    first = await coord.desk.submit(ALICE, {"argv": ["prep.sh"]})
    run_cycles(coord.driver, coord.admissions)
    array_id = await _array(coord, "0-2", dependency=f"afterok:{first.id}")
    run_cycles(coord.driver, coord.admissions)
    assert [_state(coord, f"{array_id}_{i}") for i in range(3)] == [JobState.PENDING] * 3
    _finish(coord, first.id)
    run_cycles(coord.driver, coord.admissions)
    assert [_state(coord, f"{array_id}_{i}") for i in range(3)] == [JobState.ADMITTED] * 3
