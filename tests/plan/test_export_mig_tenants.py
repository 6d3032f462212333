"""``history --export`` and ``plan replay`` with MIG devices and per-job tenants (issue 28):
MIG devices become nodes of their own so MIG jobs start in a replay; with admission fair sharing
each job's table names its tenant, and a replay under another config keeps only tenants it defines."""

from __future__ import annotations

from pathlib import Path

from labgang.launcher.config.cluster import parse_config
from labgang.launcher.lifecycle.records import JobSpec
from labgang.launcher.plan.export import NodeShape, export_scenario
from labgang.launcher.plan.past import PastJob, PastPeriod
from labgang.launcher.plan.replay import replay, with_config
from labgang.launcher.plan.sources import cluster_nodes, default_policy, mig_shapes
from labgang.launcher.simulate import parse_scenario


def past(job_id: str, seq: int, submit: float, held: float, **spec: object) -> PastJob:
    fields: dict[str, object] = dict(
        name="job", user="u", uid=1000, gid=None, queue="default", priority=0, workers=1, per_worker=1,
        resource="gpu", gpu_model=None, nodes=None, argv=["true"], env={}, cwd="/", grace_s=10.0,
        time_limit_s=None, requeue=True, signal=None,
    )  # fmt: skip
    fields.update(spec)
    return PastJob(job_id, seq, JobSpec(**fields), submit, submit + held, held)  # type: ignore[arg-type]


def test_mig_shapes_one_node_per_profile() -> None:
    devices = [("mig-1g.10gb", "A100"), ("mig-3g.40gb", "A100"), ("mig-1g.10gb", "A100"), ("mig-1g.10gb", "")]
    assert mig_shapes("gpu01", devices) == [
        NodeShape("gpu01~1g.10gb", 3, "A100", mig="1g.10gb"),
        NodeShape("gpu01~3g.40gb", 1, "A100", mig="3g.40gb"),
    ]
    assert mig_shapes("gpu01", []) == []


def test_store_nodes_keep_mig_devices_without_a_coordinator(tmp_path: Path) -> None:
    period = PastPeriod(
        [], 0, 0,
        {"n1": {"GPU-a", "GPU-b", "MIG-x", "MIG-y", "MIG-z"}},
        {"MIG-x": "mig-1g.10gb", "MIG-y": "mig-1g.10gb", "MIG-z": "mig-2g.20gb"},
    )  # fmt: skip
    shapes, note = cluster_nodes(tmp_path / "nobody-here", period)  # no coordinator answers there
    assert shapes == [
        NodeShape("n1", 2),
        NodeShape("n1~1g.10gb", 2, mig="1g.10gb"),
        NodeShape("n1~2g.20gb", 1, mig="2g.20gb"),
    ]
    assert "3 of them MIG devices" in note


def test_mig_jobs_start_in_a_replay() -> None:
    nodes = [NodeShape("n1", 2, "A100"), NodeShape("n1~1g.10gb", 3, "A100", mig="1g.10gb")]
    config = default_policy(nodes)
    assert dict(config.queues[0].nominal) == {"gpu": 2, "mig-1g.10gb": 3}
    # four 1-device MIG jobs of 100 s at once on 3 such devices: the fourth waits 100 s
    jobs = [past(str(i), i, 1000.0, 100.0, resource="mig-1g.10gb") for i in range(1, 5)]
    jobs.append(past("5", 5, 1000.0, 50.0, per_worker=2))
    out = export_scenario(jobs, config, nodes)
    assert out.data["nodes"][1] == {"name": "n1~1g.10gb", "gpus": 3, "model": "A100", "mig": ["1g.10gb"]}
    assert [t.get("mig") for t in out.data["jobs"]] == ["1g.10gb"] * 4 + [None]
    result = replay(out.data)
    assert result.never_started == 0
    assert sorted(result.waits.values()) == [0.0, 0.0, 0.0, 0.0, 100.0]
    assert result.gpus == 5  # devices: 2 whole GPUs and 3 MIG devices


CONFIG_AFS = parse_config(
    {
        "admission_fair_sharing": {"half_life": 600},
        "queues": [{"name": "default", "nominal": {"gpu": 2}}, {"name": "other", "nominal": {"gpu": 2}}],
        "tenants": [
            {"name": "alice", "queue": "default", "fair_weight": 2},
            {"name": "vision", "queue": "default", "groups": ["cv"]},
        ],
    }
)


def test_each_job_names_its_tenant_and_replays() -> None:
    jobs = [
        past("1", 1, 1000.0, 100.0, user="alice", uid=1001),
        past("2", 2, 1001.0, 100.0, user="bob", uid=1002),  # member of cv
        past("3", 3, 1002.0, 100.0, user="carol", uid=1003),  # no tenant: the queue's default one
        past("4", 4, 1003.0, 100.0, user="bob", uid=1002, queue="other"),  # cv is a tenant of default only
    ]
    looked_up: list[int] = []

    def groups_of(uid: int) -> tuple[str, ...]:
        looked_up.append(uid)
        return ("cv",) if uid == 1002 else ()

    out = export_scenario(jobs, CONFIG_AFS, [NodeShape("n1", 4)], groups_of=groups_of)
    assert [t.get("tenant") for t in out.data["jobs"]] == ["alice", "vision", None, None]
    assert sorted(looked_up) == [1001, 1002, 1003]  # once per user
    assert out.data["tenants"] == [
        {"name": "alice", "queue": "default", "fair_weight": 2.0},
        {"name": "vision", "queue": "default"},
    ]
    assert out.data["scenario"]["admission_fair_sharing"] == {"half_life": 600.0, "sampling_interval": 300.0}
    scenario = parse_scenario(out.data, "t")  # labgang simulate reads it back
    assert [t.name for t in scenario.tenants] == ["alice", "vision"]
    assert replay(out.data).never_started == 0
    # another config: only the tenants it defines for the job's queue stay
    other = parse_config(
        {
            "admission_fair_sharing": {"half_life": 60},
            "queues": [{"name": "default", "nominal": {"gpu": 3}}, {"name": "other", "nominal": {"gpu": 1}}],
            "tenants": [{"name": "vision", "queue": "default"}],
        }
    )
    moved = with_config(out.data, other, map_queues=False, source="new.toml")
    assert [t.get("tenant") for t in moved["jobs"]] == [None, "vision", None, None]
    assert replay(moved).never_started == 0
    plain = parse_config(
        {"queues": [{"name": "default", "nominal": {"gpu": 3}}, {"name": "other", "nominal": {"gpu": 1}}]}
    )
    without = with_config(out.data, plain, map_queues=False, source="plain.toml")
    assert all("tenant" not in t for t in without["jobs"]) and "tenants" not in without
    assert replay(without).never_started == 0


def test_no_tenant_keys_without_tenants() -> None:
    config = parse_config({"admission_fair_sharing": {"half_life": 60}, "queues": [{"name": "default"}]})
    out = export_scenario(
        [past("1", 1, 0.0, 1.0, user="alice")], config, [NodeShape("n1", 2)], groups_of=lambda uid: ()
    )
    assert "tenant" not in out.data["jobs"][0] and "tenants" not in out.data
    parse_scenario(out.data, "t")
