"""The submitter's umask in a submission, the job spec and the launch spec (the rank's side is
tests/cli/test_umask_end_to_end.py, with real processes)."""

from __future__ import annotations

import pytest
from labgang.agent.supervisor.errors import InvalidSpec
from labgang.agent.supervisor.spec import LaunchSpec
from labgang.launcher.config.cluster import parse_config
from labgang.launcher.coordinator.errors import BadRequest
from labgang.launcher.coordinator.requests import Caller, build_spec
from labgang.launcher.lifecycle.records import DEFAULT_UMASK, JobSpec

ROOT = Caller(uid=0, user="root", admin=True)
CONFIG = parse_config({"queues": [{"name": "default", "nominal": {"gpu": 8}}]})
BODY = {"argv": ["true"], "workers": 1, "gpus_per_worker": 1}


@pytest.mark.parametrize("umask", [0, 0o002, 0o077, 0o777])
def test_the_spec_keeps_the_submitted_umask_and_stores_it(umask: int) -> None:
    spec = build_spec({**BODY, "umask": umask}, ROOT, CONFIG)
    assert spec.umask == umask
    assert JobSpec.from_dict(spec.to_dict()).umask == umask


def test_a_submission_or_a_stored_spec_without_a_umask_gets_the_usual_default() -> None:
    spec = build_spec(BODY, ROOT, CONFIG)
    assert spec.umask == DEFAULT_UMASK == 0o022
    stored = spec.to_dict()
    del stored["umask"]  # a row written before the field existed
    assert JobSpec.from_dict(stored).umask == 0o022


@pytest.mark.parametrize("umask", [-1, 0o1000, "0022", 2.5])
def test_a_umask_out_of_range_is_refused_on_its_field(umask: object) -> None:
    with pytest.raises(BadRequest) as refused:
        build_spec({**BODY, "umask": umask}, ROOT, CONFIG)
    assert refused.value.field == "umask"


def _launch(**extra: object) -> dict[str, object]:
    return {
        "job_id": "1.0",
        "rank": 0,
        "local_rank": 0,
        "world_size": 1,
        "local_world_size": 1,
        "node_rank": 0,
        "master_addr": "127.0.0.1",
        "master_port": 0,
        "devices": [],
        "argv": ["true"],
        "env": {},
        "cwd": "/",
        "uid": 0,
        **extra,
    }


def test_the_launch_spec_carries_the_umask_and_refuses_a_bad_one() -> None:
    spec = LaunchSpec.from_dict(_launch(umask=0o002))
    assert spec.umask == 0o002 and spec.to_dict()["umask"] == 0o002
    assert LaunchSpec.from_dict(_launch()).umask is None  # a coordinator from before it was sent
    assert "umask" not in LaunchSpec.from_dict(_launch()).to_dict()
    for bad in (-1, 0o1000, True, "022"):
        with pytest.raises(InvalidSpec):
            LaunchSpec.from_dict(_launch(umask=bad))
