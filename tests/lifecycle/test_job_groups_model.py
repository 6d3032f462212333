"""The job-of-groups model: a one-group job is today's job on the wire and in the store; a job
of groups round-trips, sums its quota over its groups, and numbers ranks globally in group order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from labgang.launcher.coordinator.store import Store
from labgang.launcher.jobgroups import GroupSpec, job_shape, rank_groups
from labgang.launcher.lifecycle.records import JobSpec, JobStatus
from labgang.launcher.model import JobRequest


def spec(**kw: object) -> JobSpec:
    fields: dict[str, object] = dict(
        name="j",
        user="alice",
        uid=1000,
        gid=1000,
        queue="default",
        priority=0,
        workers=2,
        per_worker=4,
        resource="gpu",
        gpu_model=None,
        nodes=None,
        argv=["python", "train.py"],
        env={"A": "1"},
        cwd="/tmp",
        grace_s=5.0,
        time_limit_s=None,
        requeue=True,
        signal=None,
    )
    fields.update(kw)
    return JobSpec(**fields)  # type: ignore[arg-type]


LAUNCHER = GroupSpec("launcher", workers=1, per_worker=0, argv=("mpirun", "worker.py"))
WORKERS = GroupSpec("worker", workers=4, per_worker=2, topology="nvlink", env={"ROLE": "w"}, argv=("worker.py",))


def hetero() -> JobSpec:
    return spec(
        workers=5,
        per_worker=0,
        argv=["mpirun", "worker.py"],
        groups=(LAUNCHER, WORKERS),
        colocate=(("launcher", "worker"),),
    )


def test_a_one_group_job_stores_the_keys_it_stored_before_groups() -> None:
    d = spec().to_dict()
    assert "groups" not in d and "colocate" not in d
    old_row = json.loads(json.dumps(d))  # a row written before groups existed
    back = JobSpec.from_dict(old_row)
    assert back == spec() and back.groups == ()
    assert back.request == JobRequest(workers=2, per_worker=4)


def test_a_job_of_groups_round_trips_through_the_store(tmp_path: Path) -> None:
    store = Store(tmp_path / "db")
    job = store.insert_job(hetero(), JobStatus(submit_time=1.0, pending_since=1.0))
    store.close()
    again = Store(tmp_path / "db")
    loaded = again.load_job(job.id)
    again.close()
    assert loaded is not None
    assert loaded.spec == hetero()
    assert loaded.spec.groups[1].env == {"ROLE": "w"}
    assert loaded.spec.colocate == (("launcher", "worker"),)


def test_quota_is_the_sum_over_groups_and_the_floor_takes_every_group_to_its_minimum() -> None:
    req = hetero().request
    assert req.total == 8 and req.workers == 5
    assert [g.name for g in req.groups] == ["launcher", "worker"]
    assert not req.elastic and req.floor() is req
    elastic = spec(workers=5, groups=(LAUNCHER, GroupSpec("worker", workers=4, min_workers=2))).request
    assert elastic.elastic
    floor = elastic.floor()
    assert [g.request.workers for g in floor.groups] == [1, 2] and floor.total == 2 and not floor.elastic


def test_ranks_are_numbered_globally_in_group_order() -> None:
    s = hetero()
    assert [(rg.group.name, rg.group_rank) for rg in rank_groups(s.groups)] == [
        ("launcher", 0),
        ("worker", 0),
        ("worker", 1),
        ("worker", 2),
        ("worker", 3),
    ]
    assert s.rank_group(3).group.name == "worker" and s.rank_group(3).group_rank == 2
    assert s.rank_group(3).first_rank == 1 and s.rank_group(3).index == 1
    with pytest.raises(IndexError):
        s.rank_group(5)
    one = spec()
    assert one.rank_group(1).group.name == "g0" and one.rank_group(1).group.argv == ("python", "train.py")
    assert job_shape(s.groups) == "1x0+4x2"
    assert job_shape(one.group_specs()) == "2x4"
