"""``history --export``'s scenario document from past jobs (no store): arrays, dependencies, grace."""

from __future__ import annotations

import pytest
from labgang.launcher.config.cluster import parse_config
from labgang.launcher.lifecycle.records import ArrayTask, JobSpec
from labgang.launcher.plan.export import NodeShape, export_scenario
from labgang.launcher.plan.past import PastJob
from labgang.launcher.simulate import parse_scenario

CONFIG = parse_config({"queues": [{"name": "default", "nominal": {"gpu": 8}}], "priority_classes": {"high": 10}})


def past(job_id: str, seq: int, submit: float, held: float, **spec: object) -> PastJob:
    fields: dict[str, object] = dict(
        name="job", user="u", uid=1000, gid=None, queue="default", priority=0, workers=1, per_worker=1,
        resource="gpu", gpu_model=None, nodes=None, argv=["true"], env={}, cwd="/", grace_s=10.0,
        time_limit_s=None, requeue=True, signal=None,
    )  # fmt: skip
    fields.update(spec)
    return PastJob(job_id, seq, JobSpec(**fields), submit, submit + held, held)  # type: ignore[arg-type]


def task(array_id: str, index: int, count: int, limit: int | None = 2) -> ArrayTask:
    return ArrayTask(array_id, index, count, 0, count - 1, 1, limit)


def test_arrays_dependencies_grace_and_round_trip() -> None:
    jobs = [
        past("1", 1, 1000.0, 30.0, workers=2, per_worker=4, priority=10),
        past("2_0", 2, 1001.0, 5.0, array=task("2", 0, 3)),
        past("2_2", 4, 1001.0, 7.0, array=task("2", 2, 3)),  # task 1 not finished: left out
        past("5", 5, 1002.0, 1.0, dependency="afterok:1"),
        past("6", 6, 1003.0, 1.0, dependency="afterok:2"),  # an array not whole in the export
        past("7", 7, 1004.0, 2.0, dependency="afterany:99"),  # outside the period
    ]
    jobs[0].stop_s = 0.5  # preempted once, gone 0.5 s after being told to stop
    out = export_scenario(jobs, CONFIG, [NodeShape("n1", 8, "H100")], name="t")
    tables = {t["id"]: t for t in out.data["jobs"]}
    assert tables["j1"] == {
        "id": "j1", "queue": "default", "user": "u", "workers": 2, "gpus_per_worker": 4, "priority": 10,
        "submit": 0.0, "duration": 30.0, "grace": 0.5, "name": "job",
    }  # fmt: skip
    assert scenario_users(out.data) == {"u"}  # who submitted each job: per-user limits and MPS servers read it
    assert tables["j2"]["array"] == "0,2%2"
    assert tables["j2"]["durations"] == [5.0, 7.0]
    assert "duration" not in tables["j2"]
    assert tables["j2"]["grace"] == 0.5  # never stopped: the period's median stop
    assert tables["j5"]["dependency"] == "afterok:j1"
    assert "dependency" not in tables["j6"] and "dependency" not in tables["j7"]
    assert out.dropped_dependencies == ["j6", "j7"]
    assert out.data["nodes"] == [{"name": "n1", "gpus": 8, "model": "H100"}]
    assert out.data["priority_classes"] == {"high": 10}
    scenario = parse_scenario(out.data, "t")  # what labgang simulate reads back
    assert sorted(scenario.ids.by_name) == ["j1", "j2_0", "j2_2", "j5", "j6", "j7"]


def scenario_users(data: dict) -> set[str]:
    """The users the parsed scenario's jobs are submitted by (what the replay's per-user rules read)."""
    return {job.user for job in parse_scenario(data, "t").file.jobs}


def test_no_finished_jobs() -> None:
    with pytest.raises(ValueError, match="no finished jobs in the period"):
        export_scenario([], CONFIG, [NodeShape("n1", 8)])


def test_a_job_of_groups_exports_its_groups_and_replays() -> None:
    from labgang.launcher.jobgroups import GroupSpec
    from labgang.launcher.simulate import Simulation

    groups = (GroupSpec("launcher", per_worker=0, argv=("m",)), GroupSpec("worker", workers=2, per_worker=3))
    jobs = [past("1", 1, 1000.0, 30.0, workers=3, per_worker=0, groups=groups, colocate=(("launcher", "worker"),))]
    out = export_scenario(jobs, CONFIG, [NodeShape("n1", 8, "H100")], name="t")
    [table] = out.data["jobs"]
    assert table["groups"] == [
        {"name": "launcher", "workers": 1, "gpus_per_worker": 0},
        {"name": "worker", "workers": 2, "gpus_per_worker": 3},
    ]
    assert table["colocate"] == [["launcher", "worker"]] and "workers" not in table
    sim = Simulation(parse_scenario(out.data, "t"))  # labgang plan replays it: admitted whole
    while sim.next_time() is not None:
        sim.run_instant()
    [job] = sim.jobs.values()
    assert job.state == "finished" and job.request.total == 6


def test_shares_and_the_sharing_table_round_trip() -> None:
    config = parse_config(
        {
            "sharing": {"shards_per_gpu": 4, "mps": True},
            "queues": [{"name": "default", "nominal": {"gpu": 8}, "share_gpus": "queue"}],
        }
    )
    jobs = [past("1", 1, 1000.0, 30.0, shards=2, gpu_mem=3 << 30), past("2", 2, 1001.0, 5.0, mps=50)]
    out = export_scenario(jobs, config, [NodeShape("n1", 8)], name="t")
    tables = {t["id"]: t for t in out.data["jobs"]}
    assert (tables["j1"]["shards"], tables["j1"]["gpu_mem"]) == (2, "3072M")
    assert tables["j2"]["mps"] == 50
    assert out.data["sharing"] == {"shards_per_gpu": 4, "mps": True}
    assert out.data["queues"][0]["share_gpus"] == "queue"
    scenario = parse_scenario(out.data, "t")
    assert scenario.gpu_sharing.shards_per_gpu == 4
    assert scenario.file.jobs[0].request().gpu_mem == 3 << 30


def test_cpu_and_memory_quotas_read_back_as_the_same_quotas() -> None:
    """A queue's and cohort's ``cpu`` and ``memory`` quotas export as sizes (``"256G"``), so the
    scenario reads back the same bytes (a bare number of memory would read back as MiB)."""
    config = parse_config(
        {
            "cohorts": [{"name": "lab", "nominal": {"memory": "1536M"}}],
            "queues": [
                {
                    "name": "default",
                    "cohort": "lab",
                    "nominal": {"gpu": 8, "cpu": 32, "memory": "256G"},
                    "lending_limit": {"memory": 4096},  # MiB
                }
            ],
        }
    )
    out = export_scenario([past("1", 1, 1000.0, 30.0)], config, [NodeShape("n1", 8)], name="t")
    [queue] = out.data["queues"]
    assert queue["nominal"] == {"gpu": 8, "cpu": 32, "memory": "256G"}
    assert queue["lending_limit"] == {"memory": "4G"}
    assert out.data["cohorts"][0]["nominal"] == {"memory": "1536M"}
    scenario = parse_scenario(out.data, "t")
    assert scenario.queues == tuple(config.queue_specs())
    assert scenario.cohorts == tuple(config.cohort_specs())
