"""`labgang update`'s KEY=VALUE pairs: TimeLimit takes --time's forms (Slurm's bare number is minutes)."""

from __future__ import annotations

import click
import pytest
from labgang.launcher.cli.verbs import parse_assignments


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90", 5400.0), ("1:00:00", 3600.0), ("2-00", 172800.0), ("30m", 1800.0), ("45s", 45.0)],
)
def test_time_limit_takes_the_forms_of_time(text, seconds):
    assert parse_assignments([f"TimeLimit={text}"]) == {"time_limit_s": seconds}


def test_priority_stays_a_number_or_a_class_and_keys_are_checked():
    assert parse_assignments(["priority=-3", "JobName=x"]) == {"priority": -3, "name": "x"}
    assert parse_assignments(["Priority=high"]) == {"priority": "high"}
    with pytest.raises(click.UsageError, match="allowed keys"):
        parse_assignments(["Nodes=2"])
    with pytest.raises(click.UsageError, match="TimeLimit"):
        parse_assignments(["TimeLimit=soon"])


@pytest.mark.parametrize("text", ["UNLIMITED", "unlimited", "0", "INFINITE"])
def test_time_limit_zero_or_unlimited_lifts_it(text):
    assert parse_assignments([f"TimeLimit={text}"]) == {"time_limit_s": None}  # JSON null: no limit


def test_a_refused_time_limit_names_the_current_one_and_suggests_no_value():
    """A well-formed limit refused (403: only an admin may raise it) gets no syntax example: it
    would suggest the very value refused; a malformed one (400) still gets it."""
    from labgang.launcher.api.client import ApiError
    from labgang.launcher.cli.plumbing import describe_api_error

    refused = ApiError(
        403,
        "time limit 3600 s would raise job 1's current limit of 600 s: only an admin may extend a time limit "
        "(you may shorten it: at most 600 s)",
        field="time_limit_s",
    )
    message = describe_api_error(refused).message
    assert "e.g." not in message and "current limit of 600 s" in message and "only an admin" in message
    bad = describe_api_error(ApiError(400, "time_limit_s: must be > 0 seconds", field="time_limit_s"))
    assert bad.message == "-t/--time: must be > 0 seconds (e.g. 30s, 5m, 2h)" and bad.exit_code == 2
