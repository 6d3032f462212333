"""docs/openapi.json describes exactly the routes the coordinator application serves."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from labgang.launcher.config.cluster import parse_config
from labgang.launcher.coordinator.app import create_app
from labgang.launcher.coordinator.handlers import ROUTES

METHODS = {"get", "post", "put", "patch", "delete"}


def served_routes() -> set[tuple[str, str]]:
    config = parse_config({"queues": [{"name": "default", "nominal": {"gpu": 1}}]})
    app = create_app(config, Path(tempfile.mkdtemp(prefix="lgo-", dir="/tmp")), token="t")
    out = set()
    for resource in app.router.resources():
        path = resource.canonical
        for route in resource:
            if route.method != "HEAD":
                out.add((route.method, path))
    return out


def documented_routes(repo_root: Path) -> set[tuple[str, str]]:
    spec = json.loads((repo_root / "docs" / "openapi.json").read_text())
    return {(m.upper(), path) for path, item in spec["paths"].items() for m in item if m in METHODS}


def test_every_served_route_is_documented_and_nothing_else(repo_root: Path) -> None:
    assert served_routes() == documented_routes(repo_root)


def test_documented_operation_ids_are_the_handler_names(repo_root: Path) -> None:
    spec = json.loads((repo_root / "docs" / "openapi.json").read_text())
    ids = {item[m]["operationId"] for item in spec["paths"].values() for m in item if m in METHODS}
    assert ids == {r.name for r in ROUTES} | {"agent_link"}


def test_documented_job_view_fields_match_what_the_api_returns(repo_root: Path) -> None:
    from dataclasses import replace

    from labgang.launcher.coordinator.store import JobRecord, JobSpec, JobStatus
    from labgang.launcher.coordinator.views import job_view
    from labgang.launcher.jobgroups import GroupSpec
    from labgang.launcher.model import JobState

    spec = json.loads((repo_root / "docs" / "openapi.json").read_text())
    documented = set(spec["components"]["schemas"]["JobView"]["properties"])
    job = JobRecord(
        id="1",
        seq=1,
        status=JobStatus(state=JobState.PENDING),
        spec=JobSpec(
            name="x",
            user="u",
            uid=1,
            gid=None,
            queue="q",
            priority=0,
            workers=1,
            per_worker=1,
            resource="gpu",
            gpu_model=None,
            nodes=None,
            argv=["x"],
            env={},
            cwd="/",
            grace_s=1.0,
            time_limit_s=None,
            requeue=True,
            signal=None,
        ),
    )
    # a one-group job's view has every documented field but a job of groups' own two
    assert set(job_view(job)) == documented - {"groups", "colocate"}
    het = replace(
        job.spec,
        workers=3,
        groups=(GroupSpec("launcher", per_worker=0, argv=("x",)), GroupSpec("worker", workers=2, argv=("y",))),
    )
    assert set(job_view(replace(job, spec=het))) == documented
