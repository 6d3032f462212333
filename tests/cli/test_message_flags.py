"""Refusals of a submission name the flag at fault, in the ``FLAG: what; allowed: ...`` form."""

from __future__ import annotations

import pytest
from labgang.launcher.cli.plumbing import flag_message
from labgang.launcher.config.cluster import parse_config
from labgang.launcher.coordinator.errors import BadRequest
from labgang.launcher.coordinator.requests import Caller, build_spec

CONFIG = parse_config({"queues": [{"name": "default", "nominal": {"gpu": 8}}]})
ALICE = Caller(uid=1000, user="alice")


def _refusal(body: dict) -> str:
    with pytest.raises(BadRequest) as caught:
        build_spec(body if "groups" in body else {"argv": ["true"], **body}, ALICE, CONFIG)
    return flag_message(caught.value.message, caught.value.field)


def test_colocate_naming_an_unknown_group_says_colocate():
    groups = [{"name": f"g{i}", "workers": 1, "gpus_per_worker": 1, "argv": ["true"]} for i in range(2)]
    msg = _refusal({"groups": groups, "colocate": [["g0", "g9"]]})
    assert msg.startswith("--colocate: g0,g9 must name two or more of the job's groups; allowed: g0, g1"), msg


def test_too_many_cpus_says_the_allowed_range():
    msg = _refusal({"cpus_per_task": 100000})
    assert msg == "-c/--cpus-per-task: 100000 is out of range; allowed: 1..65536", msg


def test_a_groups_bad_name_names_its_group_flag():
    """A group's name is given with --group (``--group w -n 2 -- CMD``), not --name (the job's)."""
    message = "groups.0.name: '1bad' is not a group name; allowed: a letter, then letters, digits, _ or -"
    assert flag_message(message, "groups.0.name") == (
        "group 0 --group: '1bad' is not a group name; allowed: a letter, then letters, digits, _ or -"
    )
    workers = flag_message("groups.1.min_workers: must be >= 1", "groups.1.min_workers")
    assert workers == "group 1 --min-workers: must be >= 1"
