"""The short-cuts of a plain submission's checks (``requests.build_spec``): a request for no share
converts neither the queue nor the ``[sharing]`` table, a plain gang's default lifecycle policies are
not checked again and no mail type is parsed when none is asked. Each answer must stay what the full
check gives: a one-group job with policies of its own is still checked, and a share is still judged
against the queue."""

from __future__ import annotations

import pytest
from labgang.launcher.config.cluster import QueueConfig, parse_config
from labgang.launcher.coordinator.errors import BadRequest
from labgang.launcher.coordinator.requests import Caller, build_spec
from labgang.launcher.model import QueueSpec

ALICE = Caller(uid=1000, user="alice")
CONFIG = parse_config(
    {
        "queues": [
            {"name": "default", "nominal": {"gpu": 8}},
            {"name": "shared", "nominal": {"gpu": 8}, "share_gpus": "queue"},
        ],
        "sharing": {"shards_per_gpu": 4},
    }
)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"max_restarts": 2}, "max_restarts"),  # without --failure-policy restart
        ({"failure_policy": "retry"}, "failure_policy"),
        ({"success_policy": "group:nope"}, "success_policy"),
        ({"startup_order": ["g1"]}, "startup_order"),
    ],
)
def test_a_one_group_job_with_policies_of_its_own_is_still_checked(fields: dict, field: str) -> None:
    with pytest.raises(BadRequest) as caught:
        build_spec({"argv": ["train"], **fields}, ALICE, CONFIG)
    assert caught.value.field == field


def test_a_one_group_job_with_policies_it_can_follow_is_accepted() -> None:
    spec = build_spec(
        {"argv": ["train"], "failure_policy": "restart", "max_restarts": 2, "startup_order": ["g0"]}, ALICE, CONFIG
    )
    assert (spec.failure_policy, spec.max_restarts, spec.startup_order) == ("restart", 2, ("g0",))


def test_a_request_for_no_share_converts_no_queue_and_a_share_is_judged_by_its_queue(monkeypatch) -> None:
    converted: list[str] = []
    to_spec = QueueConfig.to_spec

    def counted(self: QueueConfig) -> QueueSpec:
        converted.append(self.name)
        return to_spec(self)

    monkeypatch.setattr(QueueConfig, "to_spec", counted)
    build_spec({"argv": ["train"], "queue": "default"}, ALICE, CONFIG)
    assert converted == []
    with pytest.raises(BadRequest, match="share_gpus = 'none'"):
        build_spec({"argv": ["train"], "queue": "default", "shards": 1}, ALICE, CONFIG)
    assert converted == ["default"]
    assert build_spec({"argv": ["train"], "queue": "shared", "shards": 2}, ALICE, CONFIG).shards == 2


@pytest.mark.parametrize(("asked", "kept"), [(None, ()), ([], ()), (["end", "FAIL"], ("END", "FAIL")), (["NONE"], ())])
def test_mail_types_as_asked(asked: list[str] | None, kept: tuple[str, ...]) -> None:
    body = {"argv": ["train"]} if asked is None else {"argv": ["train"], "mail_type": asked}
    assert build_spec(body, ALICE, CONFIG).mail_type == kept
