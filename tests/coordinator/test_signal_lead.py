"""A job's ``--signal SIG@T`` lead is bounded by the cluster's ``max_signal_lead_s``: a cancel by
an admin or a preemption never waits longer than that plus the grace period."""

from __future__ import annotations

import pytest
from labgang.launcher.config.cluster import parse_config
from labgang.launcher.coordinator.dispatch import launch_specs
from labgang.launcher.coordinator.errors import BadRequest
from labgang.launcher.coordinator.requests import Caller, build_spec
from labgang.launcher.coordinator.store import JobRecord, JobStatus, RankRecord
from labgang.launcher.model import JobState

ALICE = Caller(uid=1000, user="alice")


def config(**extra: object):
    return parse_config({"queues": [{"name": "default", "nominal": {"gpu": 8}}], **extra})


def test_the_default_bound_is_a_few_minutes_and_a_day_long_lead_is_refused() -> None:
    cfg = config()
    assert 60 <= cfg.max_signal_lead_s <= 600
    with pytest.raises(BadRequest) as caught:
        build_spec({"argv": ["x"], "signal": "USR1@86400"}, ALICE, cfg)
    assert caught.value.field == "signal"
    assert "max_signal_lead_s" in caught.value.message and "86400" in caught.value.message
    assert build_spec({"argv": ["x"], "signal": f"USR1@{cfg.max_signal_lead_s:g}"}, ALICE, cfg).signal


def test_an_admin_sets_the_bound() -> None:
    cfg = config(max_signal_lead_s=30)
    with pytest.raises(BadRequest, match="over the cluster's maximum of 30 s"):
        build_spec({"argv": ["x"], "signal": "USR1@31"}, ALICE, cfg)
    build_spec({"argv": ["x"], "signal": "USR1@30"}, ALICE, cfg)


def test_a_huge_lead_is_named_in_whole_seconds_not_in_exponent_form() -> None:
    with pytest.raises(BadRequest) as caught:
        build_spec({"argv": ["x"], "signal": "USR1@99999999999"}, ALICE, config())
    assert "the warning lead 99999999999 s" in caught.value.message


def test_a_job_stored_with_a_longer_lead_is_launched_with_the_bound() -> None:
    """A job submitted before the admin lowered the bound: the agent is told the bounded lead,
    which is what the supervisor waits between the warning and SIGTERM."""
    spec = build_spec({"argv": ["x"], "signal": "USR1@3600", "grace_s": 5}, ALICE, config(max_signal_lead_s=86400))
    job = JobRecord(id="7", seq=7, spec=spec, status=JobStatus(state=JobState.ADMITTED))
    job.ranks[0] = RankRecord(rank=0, node="n1", devices=("GPU-a",))
    (launch,) = launch_specs(job, "n1", max_signal_lead_s=config().max_signal_lead_s)
    assert launch.warn_before == 300 and launch.grace == 5
    (unbounded,) = launch_specs(job, "n1")
    assert unbounded.warn_before == 3600


def test_a_time_limit_over_365_days_is_one_line_naming_the_field() -> None:
    from labgang.launcher.cli.plumbing import flag_message
    from labgang.launcher.config.limits import MAX_TIME_LIMIT_S

    assert MAX_TIME_LIMIT_S == 365 * 86400
    with pytest.raises(BadRequest) as caught:
        build_spec({"argv": ["x"], "time_limit_s": 99999999 * 86400}, ALICE, config())
    assert caught.value.field == "time_limit_s"
    assert caught.value.message == "time_limit_s: must be <= 31536000 seconds (365 days)"
    assert flag_message(caught.value.message, caught.value.field) == (
        "-t/--time: must be <= 31536000 seconds (365 days) (e.g. 30s, 5m, 2h)"
    )
    assert build_spec({"argv": ["x"], "time_limit_s": MAX_TIME_LIMIT_S}, ALICE, config()).time_limit_s
